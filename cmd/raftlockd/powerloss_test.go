package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/cmd/internal/crashfs"
	"github.com/raftlock/raftlock/cmd/internal/proccluster"
	"github.com/raftlock/raftlock/transport/client"
)

// powerLossDisks mounts one crashfs per node (a disk that keeps only what
// was fsynced when Crash cuts the power) and returns them.
func powerLossDisks(t *testing.T, n int) []*crashfs.FS {
	t.Helper()
	var disks []*crashfs.FS
	for range n {
		d, err := crashfs.MountT(t)
		if err != nil {
			t.Fatal(err)
		}
		disks = append(disks, d)
	}
	return disks
}

// dataDir is node i's data dir on its disk: n1's is a directory the node
// creates itself, the others' the disk's root.
func dataDir(d *crashfs.FS, i int, root string) string {
	if i == 0 {
		return filepath.Join(root, "data")
	}
	return root
}

// snapshots lists the completed snapshots (not .tmp) in node i's data
// dir, read from the backing tree.
func snapshots(d *crashfs.FS, i int) []string {
	ents, _ := os.ReadDir(filepath.Join(dataDir(d, i, d.Backing()), "snapshots"))
	var out []string
	for _, e := range ents {
		if e.IsDir() && !strings.HasSuffix(e.Name(), ".tmp") {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// A power loss of every node right after each took a snapshot (and
// compacted its log) leaves every node able to start, with every
// acknowledged grant kept and later tokens higher: every file and
// directory entry a snapshot needs is fsynced before Raft compacts the
// log the snapshot replaces. The disks keep only what was fsynced
// (crashfs), as a strict filesystem may after a power loss.
func TestPowerLossAfterSnapshotKeepsEveryNodeStartable(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs raftlockd processes on FUSE disks")
	}
	bin := proccluster.BuildDaemon(t)
	for _, store := range []string{"wal", "boltdb"} {
		t.Run(store, func(t *testing.T) {
			disks := powerLossDisks(t, 3)
			c := proccluster.StartEach(t, bin, 3, func(i int) []string {
				return []string{"--data-dir", dataDir(disks[i], i, disks[i].Dir())}
			}, "--log-store", store, "--snapshot-threshold", "32", "--snapshot-interval", "100ms", "--snapshot-trailing-logs", "8",
				// One session takes a new lock per grant for three rounds:
				// far more than the default 1,000 on a fast machine.
				"--max-locks-per-session", "100000")
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			if _, err := c.Leader(ctx); err != nil {
				t.Fatal(err)
			}
			cl := c.Client(client.WithRequestTimeout(5 * time.Second))
			s, err := cl.OpenSession(ctx, api.OpenRequest{Name: "work", TTL: 5 * time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			acked := map[string]uint64{} // lock -> token of the acknowledged grant
			next := 0
			for round := 1; round <= 3; round++ {
				// Grants until every node has taken a snapshot since the
				// round began (and compacted its log); then the power
				// goes, on all three at once.
				var mu sync.Mutex
				wctx, stop := context.WithCancel(ctx)
				done := make(chan struct{})
				go func() {
					defer close(done)
					for wctx.Err() == nil {
						name := fmt.Sprintf("pl/%d", next)
						next++
						g, err := cl.Acquire(wctx, api.AcquireRequest{Name: name, Session: s.ID, Holder: "h"})
						if err == nil {
							mu.Lock()
							acked[name] = uint64(g.Token)
							mu.Unlock()
						}
					}
				}()
				start := make([][]string, 3)
				for i, d := range disks {
					start[i] = snapshots(d, i)
				}
				proccluster.Eventually(t, 2*time.Minute, "a new snapshot on every node", func() error {
					for i, d := range disks {
						if now := snapshots(d, i); len(now) == 0 || (len(start[i]) > 0 && now[len(now)-1] <= start[i][len(start[i])-1]) {
							return fmt.Errorf("n%d: snapshots %v (at the start %v)", i+1, now, start[i])
						}
					}
					return nil
				})
				for i := range c.Nodes {
					c.Kill(i)
				}
				for i, n := range c.Nodes {
					// A snapshot whose Close failed was not followed by a
					// compaction: the test would prove nothing.
					if strings.Contains(n.Log(), "failed to close snapshot") {
						t.Fatalf("round %d: n%d failed to close a snapshot:\n%s", round, i+1, n.Log())
					}
				}
				stop()
				<-done
				for _, d := range disks {
					if err := d.Crash(); err != nil {
						t.Fatal(err)
					}
				}
				for i := range c.Nodes {
					c.Restart(i)
				}
				proccluster.Eventually(t, time.Minute, "every node serving after the power loss", func() error {
					var errs []error
					for i, a := range c.Addrs() {
						if code, exited := c.Exited(i); exited {
							t.Fatalf("round %d: n%d exited (%d) after the power loss:\n%s", round, i+1, code, c.Nodes[i].Log())
						}
						one, err := client.NewClient([]string{a}, client.WithFailFast(time.Second))
						if err != nil {
							return err
						}
						h, err := one.Health(ctx)
						one.CloseIdleConnections()
						if err != nil || !h.OK {
							errs = append(errs, fmt.Errorf("n%d: %+v %v", i+1, h, err))
						}
					}
					return errors.Join(errs...)
				})
				if len(acked) == 0 {
					t.Fatal("no grant was acknowledged")
				}
				var highest uint64
				for name, tok := range acked {
					st, err := cl.LockState(ctx, name)
					if err != nil || len(st.Holders) != 1 || uint64(st.Holders[0].Token) != tok {
						t.Fatalf("round %d: acknowledged grant of %s (token %d) after the power loss: %+v %v", round, name, tok, st, err)
					}
					highest = max(highest, tok)
				}
				name := fmt.Sprintf("pl/after-%d", round)
				g, err := cl.Acquire(ctx, api.AcquireRequest{Name: name, Session: s.ID, Holder: "h"})
				if err != nil {
					t.Fatal(err)
				}
				if uint64(g.Token) <= highest {
					t.Fatalf("round %d: grant after the power loss: token %d, not above the highest acknowledged %d", round, g.Token, highest)
				}
				acked[name] = uint64(g.Token)
				t.Logf("round %d: %d acknowledged grants kept, next token %d", round, len(acked)-1, g.Token)
			}
		})
	}
}
