package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/cmd/internal/damage"
	"github.com/raftlock/raftlock/cmd/internal/proccluster"
	"github.com/raftlock/raftlock/transport/raftnet"
)

// damageSeeds is how many seeds TestRandomDamageIsRefusedOrHarmless runs:
// RAFTLOCK_DAMAGE_SEEDS, else 8 (a few seconds each).
func damageSeeds(t *testing.T) int {
	if v := os.Getenv("RAFTLOCK_DAMAGE_SEEDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("RAFTLOCK_DAMAGE_SEEDS=%q: want a positive number", v)
		}
		return n
	}
	return 8
}

// Random bytes flipped in a stopped follower's files (raft.db, a
// snapshot's state.bin or meta.json), seed after seed: the follower either
// refuses to start cleanly (exit 1, "data dir damaged" or a corrupt entry
// named, never a panic or a fault), or it starts, catches up, and its
// state digest equals the leader's at a common index: it never serves a
// state that differs. After each seed its files are put back.
//
// It runs with each log store: with wal, the damage lands in raft.db
// (term and vote), the newest WAL segment (twice as often) or
// wal-meta.db; with boltdb, in raft.db (twice as often, as it holds the
// log).
func TestRandomDamageIsRefusedOrHarmless(t *testing.T) {
	for _, store := range []string{"wal", "boltdb"} {
		t.Run(store, func(t *testing.T) { randomDamageIsRefusedOrHarmless(t, store) })
	}
}

func randomDamageIsRefusedOrHarmless(t *testing.T, store string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, ld, f, cl, s := snapshottingCluster(t, ctx, store)
	dir := c.Flag(f, "--data-dir")
	op := 0
	work := func(n int) {
		t.Helper()
		for range n {
			op++
			name := fmt.Sprintf("seed/%d", op%7)
			if _, err := cl.Acquire(ctx, api.AcquireRequest{Name: name, Session: s.ID, Holder: "h"}); err != nil {
				t.Fatal(err)
			}
			if op%3 != 0 {
				if err := cl.Release(ctx, api.ReleaseRequest{Name: name, Session: s.ID, Holder: "h"}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	work(60)
	refused, harmless := 0, 0
	for seed := range damageSeeds(t) {
		rng := rand.New(rand.NewSource(int64(seed)))
		if code, err := c.Stop(f, 30*time.Second); err != nil || code != 0 {
			t.Fatalf("seed %d: stop: exit %d, %v", seed, code, err)
		}
		files, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*", "*"))
		if store == "wal" {
			files = append(files, filepath.Join(dir, "raft.db"), damage.LogFile(dir), damage.LogFile(dir), filepath.Join(dir, "wal", "wal-meta.db"))
		} else {
			files = append(files, filepath.Join(dir, "raft.db"), filepath.Join(dir, "raft.db"))
		}
		target := files[rng.Intn(len(files))]
		orig, err := os.ReadFile(target)
		if err != nil || len(orig) == 0 {
			t.Fatalf("seed %d: %s: %v", seed, target, err)
		}
		damaged := append([]byte(nil), orig...)
		k := 1 + rng.Intn(32)
		for range k {
			damaged[rng.Intn(len(damaged))] ^= byte(1 + rng.Intn(255))
		}
		if err := os.WriteFile(target, damaged, 0o600); err != nil {
			t.Fatal(err)
		}
		from := len(c.Nodes[f].Log())
		c.Restart(f)
		// It either exits, or serves: polled (another process).
		code := -1
		proccluster.Eventually(t, time.Minute, "the damaged follower exits or serves", func() error {
			if cd, exited := c.Exited(f); exited {
				code = cd
				return nil
			}
			if _, err := raftnet.GetDigests(ctx, nil, c.Flag(f, "--raft-addr")); err == nil {
				return nil
			}
			return errors.New("starting")
		})
		log := c.Nodes[f].Log()[from:]
		if crash := crashed(log); crash != "" {
			t.Fatalf("seed %d (%d bytes of %s): the log has %q:\n%s", seed, k, target, crash, log)
		}
		switch code {
		case 1:
			if !strings.Contains(log, "data dir damaged") && !strings.Contains(log, "is corrupt") {
				t.Fatalf("seed %d (%d bytes of %s): exit 1 without naming the damage:\n%s\nwhole log:\n%s", seed, k, target, log, c.Nodes[f].Log())
			}
			refused++
		case -1:
			// It runs: it must agree with the leader.
			work(10)
			if err := sameDigest(ctx, c, ld, f); err != nil {
				t.Fatalf("seed %d (%d bytes of %s): it serves, but %v\n%s", seed, k, target, err, log)
			}
			harmless++
			// It ran on: its files are its own again (putting the old one
			// back would turn its state back in time).
			continue
		default:
			t.Fatalf("seed %d (%d bytes of %s): exit %d\n%s", seed, k, target, code, log)
		}
		if err := os.WriteFile(target, orig, 0o600); err != nil {
			t.Fatal(err)
		}
		from = len(c.Nodes[f].Log())
		c.Restart(f)
		proccluster.Eventually(t, time.Minute, "the repaired follower serves", func() error {
			if cd, exited := c.Exited(f); exited {
				t.Fatalf("seed %d: with %s put back, the follower exits %d:\n%s", seed, target, cd, c.Nodes[f].Log()[from:])
			}
			_, err := raftnet.GetDigests(ctx, nil, c.Flag(f, "--raft-addr"))
			return err
		})
		work(5)
	}
	t.Logf("%d seeds: %d refused cleanly, %d harmless (the node rejoined with the leader's digest)", refused+harmless, refused, harmless)
}

// sameDigest waits until nodes a and b report digests at a common index
// and checks that they are equal there.
func sameDigest(ctx context.Context, c *proccluster.Cluster, a, b int) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ra, err1 := raftnet.GetDigests(ctx, nil, c.Flag(a, "--raft-addr"))
		rb, err2 := raftnet.GetDigests(ctx, nil, c.Flag(b, "--raft-addr"))
		if err1 == nil && err2 == nil && ra.Origin == rb.Origin {
			at := map[uint64]string{}
			for _, d := range ra.Digests {
				at[d.Index] = d.Digest
			}
			for i := len(rb.Digests) - 1; i >= 0; i-- {
				if d, ok := at[rb.Digests[i].Index]; ok {
					if d != rb.Digests[i].Digest {
						return fmt.Errorf("its digest at %d is %s, the leader's %s", rb.Digests[i].Index, rb.Digests[i].Digest, d)
					}
					return nil
				}
			}
		}
		time.Sleep(100 * time.Millisecond) // polling other processes
	}
	return errors.New("no digest at a common index within 30 s")
}
