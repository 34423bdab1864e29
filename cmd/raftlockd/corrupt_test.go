package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/cmd/internal/damage"
	"github.com/raftlock/raftlock/cmd/internal/proccluster"
	"github.com/raftlock/raftlock/transport/client"
	bolt "go.etcd.io/bbolt"
)

// A byte changed in a stopped follower's raft.db, inside a committed
// entry (the case: the lock name "dmg/x3" of an acquire turned
// into "dmg/x8"), is caught by the entry's checksum before the follower
// applies it: the follower exits 1 naming the entry, the file and the
// repair, and applies nothing from it; the others keep the lock with its
// holder and token, and a second client cannot take it (no double grant).
func TestFlippedByteInRaftDBIsCaughtBeforeItIsApplied(t *testing.T) {
	flippedByteIsCaught(t, "boltdb")
}

// The same with the wal log store: the byte changed in the follower's
// newest WAL segment, in an append batch before its last (raft-wal takes
// a CRC mismatch in the last batch for a torn write and drops the batch,
// which Raft then sends again: harmless, and met by
// TestRandomDamageIsRefusedOrHarmless).
func TestFlippedByteInAWALSegmentIsCaughtBeforeItIsApplied(t *testing.T) {
	flippedByteIsCaught(t, "wal")
}

// x3Field is the lock name of the acquire flippedByteIsCaught damages:
// its entry holds it as it is in either command format (binary, or JSON
// while the cluster's first member records are not all in).
var x3Field = []byte("dmg/x3")

func flippedByteIsCaught(t *testing.T, store string) {
	bin := proccluster.BuildDaemon(t)
	c := proccluster.Start(t, bin, 3, "--log-store", store)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ld, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cl := c.Client()
	s, err := cl.OpenSession(ctx, api.OpenRequest{Name: "h3", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	g, err := cl.Acquire(ctx, api.AcquireRequest{Name: "dmg/x3", Session: s.ID, Holder: "h3"})
	if err != nil {
		t.Fatal(err)
	}
	f := (ld + 1) % 3
	// Wait until the follower's raft.db holds the entry, then stop it
	// cleanly and change the byte.
	dir := c.Flag(f, "--data-dir")
	db, named := filepath.Join(dir, "raft.db"), filepath.Join(dir, "raft.db")
	if store == "wal" {
		named = filepath.Join(dir, "wal")
	}
	later := 0
	proccluster.Eventually(t, 30*time.Second, "the follower's log holds the entry", func() error {
		if store == "wal" {
			db = damage.LogFile(dir)
		}
		data, err := os.ReadFile(db)
		if err != nil {
			return err
		}
		at := bytes.Index(data, x3Field)
		if at < 0 {
			return errors.New("not yet")
		}
		if store == "wal" {
			// Not in the segment's last batch: later entries follow.
			if starts := damage.WALBatchStarts(data); len(starts) == 0 || at >= starts[len(starts)-1] {
				later++
				if _, err := cl.Acquire(ctx, api.AcquireRequest{Name: fmt.Sprintf("later/%d", later), Session: s.ID, Holder: "h3"}); err != nil {
					return err
				}
				return errors.New("the entry is in the last batch")
			}
		}
		return nil
	})
	if code, err := c.Stop(f, 30*time.Second); err != nil || code != 0 {
		t.Fatalf("stop %s: exit %d, %v", c.Nodes[f].ID, code, err)
	}
	data, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(data, x3Field)
	if at < 0 {
		t.Fatalf("the entry is not in %s", db)
	}
	data[at+len(x3Field)-1] = '8'
	if err := os.WriteFile(db, data, 0o600); err != nil {
		t.Fatal(err)
	}
	c.Restart(f)
	code, err := c.Wait(f, time.Minute)
	if err != nil || code != 1 {
		t.Fatalf("the damaged follower: exit %d, %v; want it to stop with 1\n%s", code, err, c.Nodes[f].Log())
	}
	log := c.Nodes[f].Log()
	for _, want := range []string{"is corrupt", "checksum mismatch", named, "members remove " + c.Nodes[f].ID, "--join"} {
		if !strings.Contains(log, want) {
			t.Errorf("the damaged follower's log does not say %q:\n%s", want, log)
		}
	}
	// The others are unaffected: the lock keeps its holder and token, and
	// nobody else gets it.
	st, err := cl.LockState(ctx, "dmg/x3")
	if err != nil || len(st.Holders) != 1 || st.Holders[0].Token != g.Token || st.Holders[0].Holder != "h3" {
		t.Fatalf("dmg/x3 on the healthy nodes: %+v, %v; want h3 with token %d", st, err, g.Token)
	}
	other, err := cl.OpenSession(ctx, api.OpenRequest{Name: "other", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Acquire(ctx, api.AcquireRequest{Name: "dmg/x3", Session: other.ID, Holder: "x"}); api.CodeOf(err) != api.CodeLockBusy {
		t.Fatalf("a second client's acquire of dmg/x3: %v, want lock_busy", err)
	}
	if st, err := cl.LockState(ctx, "dmg/x8"); err != nil || len(st.Holders) != 0 {
		t.Fatalf("dmg/x8 (the damaged name): %+v, %v; want it free", st, err)
	}
}

// damagedFollower runs a 3-node cluster that snapshots and compacts its
// log often, does enough work for a follower to have a snapshot and a
// compacted log, stops that follower, damages its data dir and restarts
// it, and returns the follower's exit code and log, with the cluster
// (for the others' checks).
func damagedFollower(t *testing.T, store string, damage func(t *testing.T, dataDir string)) (int, string, *proccluster.Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, _, f, cl, s := snapshottingCluster(t, ctx, store)
	dir := c.Flag(f, "--data-dir")
	n := 0
	proccluster.Eventually(t, time.Minute, "the follower snapshots and compacts its log", func() error {
		for range 20 {
			n++
			name := fmt.Sprintf("dmg/%d", n)
			if _, err := cl.Acquire(ctx, api.AcquireRequest{Name: name, Session: s.ID, Holder: "h"}); err != nil {
				return err
			}
			if err := cl.Release(ctx, api.ReleaseRequest{Name: name, Session: s.ID, Holder: "h"}); err != nil {
				return err
			}
		}
		metas, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*", "meta.json"))
		if len(metas) == 0 {
			return errors.New("no snapshot yet")
		}
		return nil
	})
	// One last write alone, once the follower has everything before it:
	// its log then ends in an append batch of that one entry, and the
	// command before it (what a WAL damage hits, since raft-wal drops a
	// torn final batch) is surely within the trailing logs the follower
	// keeps. A follower that lagged under load could otherwise take a
	// batch longer than them last, and the damage would hit an entry the
	// compaction has already let go of (seen once in a loaded run).
	followerHasAll(t, ctx, c, f, cl)
	if _, err := cl.Acquire(ctx, api.AcquireRequest{Name: "dmg/last", Session: s.ID, Holder: "h"}); err != nil {
		t.Fatal(err)
	}
	followerHasAll(t, ctx, c, f, cl)
	if code, err := c.Stop(f, 30*time.Second); err != nil || code != 0 {
		t.Fatalf("stop %s: exit %d, %v", c.Nodes[f].ID, code, err)
	}
	damage(t, dir)
	c.Restart(f)
	code, err := c.Wait(f, time.Minute)
	if err != nil {
		t.Fatalf("the damaged follower: %v\n%s", err, c.Nodes[f].Log())
	}
	return code, c.Nodes[f].Log(), c
}

// followerHasAll waits until node f has applied everything the leader
// has committed.
func followerHasAll(t *testing.T, ctx context.Context, c *proccluster.Cluster, f int, cl *client.Client) {
	t.Helper()
	info, err := cl.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fc, err := client.NewClient([]string{c.Nodes[f].HTTPAddr})
	if err != nil {
		t.Fatal(err)
	}
	defer fc.CloseIdleConnections()
	proccluster.Eventually(t, time.Minute, "the follower applies the leader's log", func() error {
		h, err := fc.Health(ctx)
		if err != nil || h.AppliedIndex < info.CommitIndex {
			return fmt.Errorf("applied %d of %d (%v)", h.AppliedIndex, info.CommitIndex, err)
		}
		return nil
	})
}

// Each damaged data dir of the issue ends in a clean refusal: exit 1, a
// line naming the file, what is wrong and the repair; never a fault, a
// panic or a node that serves from it.
func TestDamagedDataDirsAreRefusedCleanly(t *testing.T) {
	for _, tc := range []struct {
		name   string
		store  string // the log store
		damage func(t *testing.T, dir string)
		want   []string
	}{
		{"raft.db truncated", "boltdb", func(t *testing.T, dir string) {
			// Cut at half of what the meta page says is in use, not half
			// of the file: bbolt grows the file ahead of its use (up to
			// twice), so half of the file can keep every used page (seen
			// once in CI: the follower started and ran).
			db := filepath.Join(dir, "raft.db")
			used := boltBytesInUse(t, db)
			if err := os.Truncate(db, max(used/2/4096*4096, 4*4096)); err != nil {
				t.Fatal(err)
			}
		}, []string{"raft.db", "truncated"}},
		{"32 random bytes in raft.db", "boltdb", func(t *testing.T, dir string) {
			// The newest command is in the live log; bbolt leaves old
			// copies of pages in free pages, so every copy is damaged.
			if err := damage.NewestCommandInFile(filepath.Join(dir, "raft.db"), 32, rand.New(rand.NewSource(1))); err != nil {
				t.Fatal(err)
			}
		}, []string{"raft.db", "corrupt"}},
		{"newest snapshot's meta.json deleted", "boltdb", func(t *testing.T, dir string) {
			metas, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*", "meta.json"))
			sort.Strings(metas)
			for _, m := range metas { // every snapshot's: none covers the compacted log
				if err := os.Remove(m); err != nil {
					t.Fatal(err)
				}
			}
		}, []string{"raft.db", "no snapshot covers"}},
		{"raft.db deleted, snapshots kept", "boltdb", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "raft.db")); err != nil {
				t.Fatal(err)
			}
		}, []string{"raft.db", "term and vote"}},
		{"32 random bytes in a WAL segment", "wal", func(t *testing.T, dir string) {
			if err := damage.NewestSettledCommandInWAL(damage.LogFile(dir), 32, rand.New(rand.NewSource(1))); err != nil {
				t.Fatal(err)
			}
		}, []string{"/wal: ", "corrupt"}},
		{"raft.db deleted, WAL and snapshots kept", "wal", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "raft.db")); err != nil {
				t.Fatal(err)
			}
		}, []string{"raft.db", "term and vote"}},
		{"wal deleted", "wal", func(t *testing.T, dir string) {
			if err := os.RemoveAll(filepath.Join(dir, "wal")); err != nil {
				t.Fatal(err)
			}
		}, []string{"wal", "log was lost"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, log, _ := damagedFollower(t, tc.store, tc.damage)
			if code != 1 {
				t.Fatalf("exit %d, want 1\n%s", code, log)
			}
			for _, w := range append(tc.want, "data dir damaged", "--join") {
				if !strings.Contains(log, w) {
					t.Errorf("the log does not say %q:\n%s", w, log)
				}
			}
			if crash := crashed(log); crash != "" {
				t.Errorf("the log has %q:\n%s", crash, log)
			}
		})
	}
}

// crashTrace matches what a crashed Go process prints: a panic or a fatal
// signal at the start of a line, a goroutine's stack header.
var crashTrace = regexp.MustCompile(`(?m)^(panic: |fatal error: |goroutine \d+ \[|\[signal SIG)`)

// crashed returns the first crash trace line in log ("" if none). A clean
// refusal may quote a recovered panic inside its message; that is not a
// crash.
func crashed(log string) string {
	return crashTrace.FindString(log)
}

// snapshottingCluster starts 3 nodes on log store store that snapshot and
// compact their log often (every 32 entries, keeping 8), and returns the cluster, its
// leader, a follower, a client and a session of it.
func snapshottingCluster(t *testing.T, ctx context.Context, store string) (c *proccluster.Cluster, ld, f int, cl *client.Client, s api.Info) {
	t.Helper()
	bin := proccluster.BuildDaemon(t)
	c = proccluster.Start(t, bin, 3, "--log-store", store, "--snapshot-threshold", "32", "--snapshot-interval", "100ms", "--snapshot-trailing-logs", "8")
	ld, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cl = c.Client()
	if s, err = cl.OpenSession(ctx, api.OpenRequest{Name: "work", TTL: 5 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	return c, ld, (ld + 1) % 3, cl, s
}

// boltBytesInUse returns the bytes of the bbolt file at path that its meta
// page says are in use (its high-water mark of pages).
func boltBytesInUse(t *testing.T, path string) int64 {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int64
	if err := db.View(func(tx *bolt.Tx) error { n = tx.Size(); return nil }); err != nil {
		t.Fatal(err)
	}
	if n < 8*4096 {
		t.Fatalf("%s has only %d bytes in use: too few to cut in half and keep its meta pages", path, n)
	}
	return n
}
