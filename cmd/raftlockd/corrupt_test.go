package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/cmd/internal/proccluster"
	"github.com/raftlock/raftlock/session/api"
)

// A byte changed in a stopped follower's raft.db, inside a committed
// entry (the case: the lock name "dmg/x3" of an acquire turned
// into "dmg/x8"), is caught by the entry's checksum before the follower
// applies it: the follower exits 1 naming the entry, the file and the
// repair, and applies nothing from it; the others keep the lock with its
// holder and token, and a second client cannot take it (no double grant).
func TestFlippedByteInRaftDBIsCaughtBeforeItIsApplied(t *testing.T) {
	bin := proccluster.BuildDaemon(t)
	c := proccluster.Start(t, bin, 3)
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
	db := filepath.Join(c.Flag(f, "--data-dir"), "raft.db")
	proccluster.Eventually(t, 30*time.Second, "the follower's raft.db holds the entry", func() error {
		data, err := os.ReadFile(db)
		if err != nil {
			return err
		}
		if !bytes.Contains(data, []byte(`"lock":"dmg/x3"`)) {
			return errors.New("not yet")
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
	at := bytes.Index(data, []byte(`"lock":"dmg/x3"`))
	if at < 0 {
		t.Fatal("the entry is not in raft.db")
	}
	data[at+len(`"lock":"dmg/x`)] = '8'
	if err := os.WriteFile(db, data, 0o600); err != nil {
		t.Fatal(err)
	}
	c.Restart(f)
	code, err := c.Wait(f, time.Minute)
	if err != nil || code != 1 {
		t.Fatalf("the damaged follower: exit %d, %v; want it to stop with 1\n%s", code, err, c.Nodes[f].Log())
	}
	log := c.Nodes[f].Log()
	for _, want := range []string{"is corrupt", "checksum mismatch", db, "members remove " + c.Nodes[f].ID, "--join"} {
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
