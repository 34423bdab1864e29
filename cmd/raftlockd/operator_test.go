package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/cmd/internal/proccluster"
	"github.com/raftlock/raftlock/session"
	"github.com/raftlock/raftlock/transport/client"
)

// The tests of this file pin DESIGN.md's "Server actions never outrun the
// holder" with real processes: an operator's action (a token deletion, a
// restore into the running cluster) takes a lock from a live holder, and
// that holder's Lost() must close before anyone else is granted the lock.

// opTTL and opLockDelay are the holder's session settings: short, so that
// the revoked lock comes free within seconds.
const (
	opTTL       = 2 * time.Second
	opLockDelay = time.Second
)

// lostWatch records when a lock's Lost() closed.
type lostWatch struct {
	mu sync.Mutex
	at time.Time
}

func watchLost(l *session.Lock) *lostWatch {
	w := &lostWatch{}
	go func() {
		<-l.Lost()
		w.mu.Lock()
		w.at = time.Now()
		w.mu.Unlock()
	}()
	return w
}

// closedBefore reports whether Lost() had closed by t.
func (w *lostWatch) closedBefore(t time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.at.IsZero() && w.at.Before(t)
}

// waitForLock starts other.Lock(name) and returns a channel that yields
// the moment it returned (the grant) or fails the test.
func waitForLock(ctx context.Context, t *testing.T, other *session.Session, name string) <-chan time.Time {
	t.Helper()
	out := make(chan time.Time, 1)
	go func() {
		l, err := other.Lock(ctx, name)
		if err != nil {
			t.Errorf("the next holder's Lock(%s): %v", name, err)
			close(out)
			return
		}
		out <- time.Now()
		_ = l
	}()
	return out
}

// TestDeletingATokenTellsTheHolderBeforeTheNextGrant: a holder's ACL token
// is deleted while another client waits for its lock. The holder's
// session ends at its next keepalive (unauthenticated is the end of the
// session, never a passing error), so its Lost() closes, and only after
// its ttl + lock-delay does the cluster grant the lock to the waiter.
func TestDeletingATokenTellsTheHolderBeforeTheNextGrant(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs raftlockd processes")
	}
	bin := proccluster.BuildDaemon(t)
	c := proccluster.Start(t, bin, 3, "--acl")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	boot, err := c.Client().ACLBootstrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	admin := c.Client(client.WithToken(boot.Secret))
	ta, err := admin.CreateToken(ctx, api.TokenRequest{Name: "holder", Rules: []string{"write:op/"}})
	if err != nil {
		t.Fatal(err)
	}
	tb, err := admin.CreateToken(ctx, api.TokenRequest{Name: "next", Rules: []string{"write:op/"}})
	if err != nil {
		t.Fatal(err)
	}
	holder, err := session.Open(ctx, c.Client(client.WithToken(ta.Secret)), session.TTL(opTTL), session.LockDelay(opLockDelay))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	next, err := session.Open(ctx, c.Client(client.WithToken(tb.Secret)), session.TTL(opTTL), session.LockDelay(opLockDelay))
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close(ctx)
	held, err := holder.Lock(ctx, "op/x")
	if err != nil {
		t.Fatal(err)
	}
	lost := watchLost(held)
	granted := waitForLock(ctx, t, next, "op/x")
	if err := admin.DeleteToken(ctx, ta.ID); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	at, ok := <-granted
	if !ok {
		return
	}
	if !lost.closedBefore(at) {
		t.Fatalf("the waiter was granted op/x %v after the token's deletion while its deleted holder's Lost() was still open (state %v)",
			at.Sub(deleted), holder.State())
	}
	proccluster.Eventually(t, 10*time.Second, "the holder's session ends", func() error {
		if st := holder.State(); st != session.Expired {
			return errors.New("state " + st.String())
		}
		return nil
	})
}

// TestRestoreIntoRunningClusterTellsTheHolderBeforeTheNextGrant: a backup
// is taken while sessions A and B exist without a lock and session G holds
// op/ghost; then A takes op/x and G releases op/ghost. The backup is
// restored (raftlock snapshot restore) while B waits for op/x and a watcher
// waits for a change of op/ghost. A's grants differ from the backup's, so
// its session ends and its Lost() closes before B is granted op/x (after
// A's ttl + lock-delay); op/ghost is not given back to G (whose client
// released it), and the watcher wakes with the restored state.
func TestRestoreIntoRunningClusterTellsTheHolderBeforeTheNextGrant(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs raftlockd processes")
	}
	bin := proccluster.BuildDaemon(t)
	cli := proccluster.Build(t, "github.com/raftlock/raftlock/cmd/raftlock", "raftlock")
	c := proccluster.Start(t, bin, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	cl := c.Client()
	open := func(name string) *session.Session {
		s, err := session.Open(ctx, cl, session.TTL(opTTL), session.LockDelay(opLockDelay), session.Name(name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close(context.Background()) })
		return s
	}
	a, g, b := open("a"), open("g"), open("b")
	ghost, err := g.Lock(ctx, "op/ghost")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "backup.rlsnap")
	runCLI(t, cli, "--addr", c.AddrList(), "snapshot", "save", file)

	held, err := a.Lock(ctx, "op/x")
	if err != nil {
		t.Fatal(err)
	}
	if err := ghost.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := cl.LockState(ctx, "op/ghost")
	if err != nil {
		t.Fatal(err)
	}
	type watched struct {
		st  api.LockState
		err error
	}
	woke := make(chan watched, 1)
	go func() {
		w, err := cl.WatchLock(ctx, "op/ghost", st.Index, 30*time.Second)
		woke <- watched{w, err}
	}()
	lost := watchLost(held)
	granted := waitForLock(ctx, t, b, "op/x")

	runCLI(t, cli, "--addr", c.AddrList(), "snapshot", "restore", file)
	restored := time.Now()
	at, ok := <-granted
	if !ok {
		return
	}
	if !lost.closedBefore(at) {
		t.Fatalf("op/x was granted %v after the restore while its holder's Lost() was still open (state %v)", at.Sub(restored), a.State())
	}
	w := <-woke
	if w.err != nil || w.st.Index <= st.Index {
		t.Fatalf("the watcher of op/ghost after the restore: %+v, %v; want woken with an index above %d", w.st, w.err, st.Index)
	}
	if len(w.st.Holders) != 0 {
		t.Fatalf("op/ghost after the restore: %+v; want free (its holder released it after the backup)", w.st.Holders)
	}
	if _, err := cl.KeepAlive(ctx, g.ID()); api.CodeOf(err) != api.CodeSessionNotFound {
		t.Fatalf("keepalive of the ghost's session: %v, want session_not_found (its grants changed since the backup)", err)
	}
}

// TestReleaseRetriedAfterTheLockMovedOnIsDone: a release is repeated (as
// a client does after an unknown outcome) after the lock went to the next
// waiter in the same entry: the repeat answers done, not not_holder, and
// the new holder keeps the lock.
func TestReleaseRetriedAfterTheLockMovedOnIsDone(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs raftlockd processes")
	}
	bin := proccluster.BuildDaemon(t)
	c := proccluster.Start(t, bin, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	cl := c.Client()
	first, _ := grant(ctx, t, cl, "op/r", "h")
	next, err := cl.OpenSession(ctx, api.OpenRequest{Name: "next"})
	if err != nil {
		t.Fatal(err)
	}
	granted := make(chan error, 1)
	go func() {
		_, err := cl.Acquire(ctx, api.AcquireRequest{Name: "op/r", Session: next.ID, Holder: "n", Wait: 30 * time.Second})
		granted <- err
	}()
	proccluster.Eventually(t, 10*time.Second, "the waiter queues", func() error {
		st, err := cl.LockState(ctx, "op/r")
		if err != nil {
			return err
		}
		if len(st.Queue) != 1 {
			return errors.New("no waiter yet")
		}
		return nil
	})
	rel := api.ReleaseRequest{Name: "op/r", Session: first.ID, Holder: "h"}
	if err := cl.Release(ctx, rel); err != nil {
		t.Fatal(err)
	}
	if err := <-granted; err != nil {
		t.Fatalf("the waiter: %v", err)
	}
	if err := cl.Release(ctx, rel); err != nil {
		t.Fatalf("the release repeated after the lock moved on: %v, want done", err)
	}
	if st, err := cl.LockState(ctx, "op/r"); err != nil || len(st.Holders) != 1 || st.Holders[0].Holder != "n" {
		t.Fatalf("op/r: %+v, %v; want the waiter still holding", st, err)
	}
}

// TestNewClusterServesNothingBeforeTheRestoredState: a new cluster started
// with raftlockd --restore FILE --min-token T (the default restore hold)
// answers its very first requests from the restored state: a lock's index
// is above T from the first read on, and no lock is granted (every try is
// lock_busy during the hold), never a token at or below T from an empty
// state served before the restore landed.
func TestNewClusterServesNothingBeforeTheRestoredState(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs raftlockd processes")
	}
	bin := proccluster.BuildDaemon(t)
	cli := proccluster.Build(t, "github.com/raftlock/raftlock/cmd/raftlock", "raftlock")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	old := proccluster.Start(t, bin, 3)
	if _, err := old.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	_, g := grant(ctx, t, old.Client(), "op/marker", "a")
	file := filepath.Join(t.TempDir(), "backup.rlsnap")
	runCLI(t, cli, "--addr", old.AddrList(), "snapshot", "save", file)
	for i := range old.Nodes {
		old.Kill(i)
	}
	minToken := uint64(g.Token) + 100
	fresh := proccluster.StartEach(t, bin, 3, func(i int) []string {
		if i == 0 {
			return []string{"--restore", file, "--min-token", fmt.Sprint(minToken)}
		}
		return nil
	})
	cl := fresh.Client()
	var s api.Info
	proccluster.Eventually(t, time.Minute, "the new cluster opens a session", func() error {
		var err error
		s, err = cl.OpenSession(ctx, api.OpenRequest{Name: "first"})
		return err
	})
	for i := range 20 {
		name := fmt.Sprintf("op/new-%d", i)
		if g, err := cl.Acquire(ctx, api.AcquireRequest{Name: name, Session: s.ID, Holder: "h"}); api.CodeOf(err) != api.CodeLockBusy {
			t.Fatalf("try of %s on the new cluster: %+v, %v; want lock_busy (the restore hold)", name, g, err)
		}
	}
	st, err := cl.LockState(ctx, "op/marker")
	if err != nil {
		t.Fatal(err)
	}
	if st.Index <= minToken || len(st.Holders) != 0 || len(st.Grants) == 0 {
		t.Fatalf("op/marker on the new cluster: %+v; want the backup's history, no holder, an index above %d", st, minToken)
	}
}
