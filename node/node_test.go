package node

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"

	"github.com/raftlock/raftlock/sequencer"
)

// Killing the leader: a new leader serves, held locks keep their tokens,
// live sessions survive, and the next grant gets a larger token.
func TestLeaderFailoverKeepsLocksAndSessions(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	s := mustOpen(t, c, api.OpenRequest{Name: "holder", TTL: 2 * time.Second})
	stopKA := c.keepAlive(s.ID, 300*time.Millisecond)
	g := mustAcquire(t, c, api.AcquireRequest{Name: "jobs/a", Session: s.ID, Holder: "h1"})

	_, li := c.leader()
	killed := time.Now()
	c.stop(li)
	n, _ := c.leader()
	t.Logf("new leader n%s after %v", n.ID(), time.Since(killed))

	// The lock is still held with the same token.
	var st api.LockState
	if err := c.do(func(n *Node) (err error) { st, err = n.LockState(ctxT(t), "jobs/a"); return }); err != nil {
		t.Fatal(err)
	}
	if len(st.Holders) != 1 || st.Holders[0].Token != g.Token || st.Holders[0].SessionHandle != api.SessionHandle(s.ID) {
		t.Fatalf("after failover lock = %+v, want held by %s with token %d", st, s.ID, g.Token)
	}
	// A retried acquire returns the same grant.
	if g2 := mustAcquire(t, c, api.AcquireRequest{Name: "jobs/a", Session: s.ID, Holder: "h1"}); g2.Token != g.Token {
		t.Fatalf("retried acquire token %d, want %d", g2.Token, g.Token)
	}
	// The session outlives TTL + failover grace with keepalives flowing.
	deadline := time.Now().Add(2*time.Second + DefaultFailoverGrace + time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond) // observe over time; no event to await
	}
	if err := stopKA(); err != nil {
		t.Fatalf("live session expired by the failover: %v", err)
	}
	if err := c.do(func(n *Node) error { _, err := n.SessionInfo(ctxT(t), s.ID); return err }); err != nil {
		t.Fatalf("session after failover: %v", err)
	}
	// The next grant of the lock gets a larger token.
	if err := c.do(func(n *Node) error {
		return n.Release(ctxT(t), api.ReleaseRequest{Name: "jobs/a", Session: s.ID, Holder: "h1"})
	}); err != nil {
		t.Fatal(err)
	}
	g3 := mustAcquire(t, c, api.AcquireRequest{Name: "jobs/a", Session: s.ID, Holder: "h2"})
	if g3.Token <= g.Token {
		t.Fatalf("token after failover %d, want > %d", g3.Token, g.Token)
	}
	if g3.Term <= g.Term {
		t.Fatalf("term of new leader's grant %d, want > %d", g3.Term, g.Term)
	}
}

// A session without keepalives expires after its TTL, not before; its lock
// is free only after the lock-delay, with a larger token.
func TestExpiryThenLockDelay(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	const ttl, delay = 1 * time.Second, 1500 * time.Millisecond
	opened := time.Now()
	dead := mustOpen(t, c, api.OpenRequest{TTL: ttl, LockDelay: delay})
	g := mustAcquire(t, c, api.AcquireRequest{Name: "svc/leader", Session: dead.ID, Holder: "h"})
	other := mustOpen(t, c, api.OpenRequest{TTL: 10 * time.Second})
	stopKA := c.keepAlive(other.ID, 500*time.Millisecond)
	defer stopKA()

	eventually(t, 10*time.Second, "expiry", func() error {
		err := c.do(func(n *Node) error { _, err := n.SessionInfo(ctxT(t), dead.ID); return err })
		if errors.Is(err, api.ErrSessionNotFound) {
			return nil
		}
		return errors.New("session still alive")
	})
	if el := time.Since(opened); el < ttl {
		t.Fatalf("session expired after %v, before its ttl %v", el, ttl)
	}
	var got api.Grant
	eventually(t, 10*time.Second, "acquire after lock-delay", func() error {
		return c.do(func(n *Node) (err error) {
			got, err = n.Acquire(ctxT(t), api.AcquireRequest{Name: "svc/leader", Session: other.ID, Holder: "h2"})
			return err
		})
	})
	if el := time.Since(opened); el < ttl+delay {
		t.Fatalf("lock acquirable %v after open, before ttl+lock-delay %v", el, ttl+delay)
	}
	if got.Token <= g.Token {
		t.Fatalf("token %d after expiry, want > %d", got.Token, g.Token)
	}
}

// A waiter is granted in the entry that releases the lock, in FIFO order,
// and a wait times out as wait_timeout and leaves the queue.
func TestWaitFIFOAndTimeout(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	n, _ := c.leader()
	ctx := ctxT(t)
	s, err := n.OpenSession(ctx, api.OpenRequest{TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	g1, err := n.Acquire(ctx, api.AcquireRequest{Name: "q", Session: s.ID, Holder: "a"})
	if err != nil {
		t.Fatal(err)
	}
	type res struct {
		g   api.Grant
		err error
	}
	results := make(chan res, 2)
	for _, h := range []string{"b", "c"} {
		h := h
		go func() {
			g, err := n.Acquire(ctx, api.AcquireRequest{Name: "q", Session: s.ID, Holder: h, Wait: 20 * time.Second})
			results <- res{g, err}
		}()
		eventually(t, 5*time.Second, "queued "+h, func() error {
			st, err := n.LockState(ctx, "q")
			if err != nil || st.Waiters == 0 || (h == "c" && st.Waiters < 2) {
				return errors.New("not queued yet")
			}
			return nil
		})
	}
	if err := n.Release(ctx, api.ReleaseRequest{Name: "q", Session: s.ID, Holder: "a"}); err != nil {
		t.Fatal(err)
	}
	r := <-results
	if r.err != nil || r.g.Token <= g1.Token {
		t.Fatalf("first waiter: %+v %v", r.g, r.err)
	}
	st, _ := n.LockState(ctx, "q")
	if len(st.Holders) != 1 || st.Holders[0].Holder != "b" || st.Holders[0].Token != r.g.Token {
		t.Fatalf("holder after handoff %+v, want b (FIFO) with token %d", st.Holders, r.g.Token)
	}
	// A short wait behind b times out and leaves the queue.
	_, err = n.Acquire(ctx, api.AcquireRequest{Name: "q", Session: s.ID, Holder: "d", Wait: 200 * time.Millisecond})
	if !errors.Is(err, api.ErrWaitTimeout) {
		t.Fatalf("short wait: %v, want wait_timeout", err)
	}
	if st, _ := n.LockState(ctx, "q"); st.Waiters != 1 {
		t.Fatalf("waiters after timeout = %d, want 1 (c only)", st.Waiters)
	}
	// Closing the session releases at once: no lock-delay.
	if err := n.CloseSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	r = <-results
	if !errors.Is(r.err, api.ErrSessionNotFound) {
		t.Fatalf("waiter of a closed session: %v, want session_not_found", r.err)
	}
	if st, _ := n.LockState(ctx, "q"); len(st.Holders) != 0 || !st.DelayUntil.IsZero() {
		t.Fatalf("after close lock = %+v, want free without delay", st)
	}
}

// Stopping and restarting all three nodes keeps sessions, locks and tokens.
func TestFullClusterRestart(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	s := mustOpen(t, c, api.OpenRequest{TTL: 30 * time.Second})
	g := mustAcquire(t, c, api.AcquireRequest{Name: "db/primary", Session: s.ID, Holder: "h", Value: "10.0.0.1:5432"})
	sh := mustAcquire(t, c, api.AcquireRequest{Name: "cfg", Session: s.ID, Holder: "r", Mode: sequencer.Shared})
	// Snapshot every node, so that the restart restores a snapshot and
	// replays the log after it.
	for _, n := range c.snapshotNodes() {
		eventually(t, 10*time.Second, "snapshot", func() error { return n.raft.Snapshot().Error() })
	}
	mustAcquire(t, c, api.AcquireRequest{Name: "after-snapshot", Session: s.ID, Holder: "h"})
	c.stopAll()
	for i := range c.nodes {
		c.start(i)
	}
	c.leader()
	var st api.LockState
	if err := c.do(func(n *Node) (err error) { st, err = n.LockState(ctxT(t), "db/primary"); return }); err != nil {
		t.Fatal(err)
	}
	if len(st.Holders) != 1 || st.Holders[0].Token != g.Token || st.Holders[0].Value != "10.0.0.1:5432" {
		t.Fatalf("after restart lock = %+v, want token %d", st, g.Token)
	}
	var info api.Info
	if err := c.do(func(n *Node) (err error) { info, err = n.SessionInfo(ctxT(t), s.ID); return }); err != nil {
		t.Fatalf("session after restart: %v", err)
	}
	if len(info.Locks) != 3 {
		t.Fatalf("session locks after restart %v, want 3", info.Locks)
	}
	var chk api.SequencerCheck
	if err := c.do(func(n *Node) (err error) { chk, err = n.CheckSequencer(ctxT(t), sh.Sequencer.String()); return }); err != nil {
		t.Fatal(err)
	}
	if !chk.Valid {
		t.Fatalf("shared sequencer %s not valid after restart: %+v", sh.Sequencer, chk)
	}
	// The same token in the wrong mode, and an older token, are not current.
	for _, bad := range []sequencer.Sequencer{
		{Name: "cfg", Mode: sequencer.Exclusive, Token: sh.Token},
		{Name: "cfg", Mode: sequencer.Shared, Token: sh.Token - 1},
	} {
		if err := c.do(func(n *Node) (err error) { chk, err = n.CheckSequencer(ctxT(t), bad.String()); return }); err != nil {
			t.Fatal(err)
		}
		if chk.Valid || chk.CurrentToken != sh.Token {
			t.Fatalf("sequencer %s: %+v, want not valid with current token %d", bad, chk, sh.Token)
		}
	}
	g2 := mustAcquire(t, c, api.AcquireRequest{Name: "other", Session: s.ID, Holder: "h"})
	if g2.Token <= sh.Token {
		t.Fatalf("token after restart %d, want > %d", g2.Token, sh.Token)
	}
}

// Timers survive a leader change: a lock-delay that started under the old
// leader is ended by the new one (its waiter is granted), and a session
// that stopped keeping alive before the failover still expires after it,
// once its TTL plus the failover grace have passed.
func TestTimersMoveToNewLeader(t *testing.T) {
	const grace = 1 * time.Second
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.FailoverGrace = grace })
	waiter := mustOpen(t, c, api.OpenRequest{TTL: 30 * time.Second})
	stopKA := c.keepAlive(waiter.ID, 300*time.Millisecond)
	defer stopKA()
	dying := mustOpen(t, c, api.OpenRequest{TTL: time.Second, LockDelay: 3 * time.Second})
	g := mustAcquire(t, c, api.AcquireRequest{Name: "delayed", Session: dying.ID, Holder: "h"})
	awaitLockDelay(t, c, "delayed")
	silent := mustOpen(t, c, api.OpenRequest{TTL: 2 * time.Second, LockDelay: time.Second})
	_, li := c.leader()
	c.stop(li)
	promoted := time.Now()
	c.leader()

	// The waiter queued on the new leader gets the lock when the delay ends.
	var got api.Grant
	if err := c.do(func(n *Node) (err error) {
		got, err = n.Acquire(ctxT(t), api.AcquireRequest{Name: "delayed", Session: waiter.ID, Holder: "w", Wait: 20 * time.Second})
		return err
	}); err != nil {
		t.Fatalf("waiter after failover: %v", err)
	}
	if got.Token <= g.Token {
		t.Fatalf("token %d, want > %d", got.Token, g.Token)
	}
	// The silent session expires on the new leader, not before ttl+grace.
	eventually(t, 15*time.Second, "silent session expires", func() error {
		err := c.do(func(n *Node) error { _, err := n.SessionInfo(ctxT(t), silent.ID); return err })
		if errors.Is(err, api.ErrSessionNotFound) {
			return nil
		}
		return errors.New("still alive")
	})
	if el := time.Since(promoted); el < 2*time.Second+grace {
		t.Fatalf("silent session expired %v after the failover, before ttl+grace", el)
	}
	if err := stopKA(); err != nil {
		t.Fatalf("kept-alive session expired: %v", err)
	}
}

// A lock-delay that ends while the cluster has no leader is ended by the
// next leader as soon as it serves: the lock does not stay unavailable.
func TestDelayEndedWithoutLeaderIsEndedByNextLeader(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	dying := mustOpen(t, c, api.OpenRequest{TTL: time.Second, LockDelay: time.Second})
	mustAcquire(t, c, api.AcquireRequest{Name: "gap", Session: dying.ID, Holder: "h"})
	until := awaitLockDelay(t, c, "gap")
	c.stopAll()
	// The delay ends while no node runs.
	time.Sleep(time.Until(until.Add(100 * time.Millisecond)))
	for i := range c.dirs {
		c.start(i)
	}
	eventually(t, 10*time.Second, "delay ended by the new leader", func() error {
		var st api.LockState
		err := c.do(func(n *Node) (err error) { st, err = n.LockState(ctxT(t), "gap"); return })
		if err != nil || len(st.Holders) != 0 || !st.DelayUntil.IsZero() {
			return fmt.Errorf("lock %+v, %v: still delayed", st, err)
		}
		return nil
	})
}

// The leader's lock-delay timer tries again when its proposal fails while
// the node still leads (here: not serving yet, as right after a promotion,
// when a delay that ended during the election fires at once): the delay
// ends as soon as the proposal can go through, instead of never.
func TestDelayTimerRetriesFailedProposal(t *testing.T) {
	// Slow Raft timeouts: the leader must not change while it cannot
	// propose, or the next leader would end the delay.
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 3*time.Second, 3*time.Second, 2*time.Second
	})
	n, _ := c.leader()
	ctx := ctxT(t)
	dying, err := n.OpenSession(ctx, api.OpenRequest{TTL: time.Second, LockDelay: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Acquire(ctx, api.AcquireRequest{Name: "retry", Session: dying.ID, Holder: "h"}); err != nil {
		t.Fatal(err)
	}
	until := awaitLockDelay(t, c, "retry")
	n.ready.Store(false) // proposals fail with no_leader
	time.Sleep(time.Until(until.Add(300 * time.Millisecond)))
	if l, _ := n.fsm.Lock("retry"); !l.Delayed {
		t.Fatal("the delay ended while the leader could not propose")
	}
	n.ready.Store(true)
	eventually(t, 5*time.Second, "delay ended after the retry", func() error {
		if l, _ := n.fsm.Lock("retry"); l.Delayed {
			return errors.New("still delayed")
		}
		return nil
	})
}

// awaitLockDelay waits until the lock is free and in a lock-delay (its
// holder's session expired) and returns when the delay ends.
func awaitLockDelay(t *testing.T, c *testCluster, name string) time.Time {
	t.Helper()
	var until time.Time
	eventually(t, 10*time.Second, "lock-delay of "+name+" starts", func() error {
		var st api.LockState
		err := c.do(func(n *Node) (err error) { st, err = n.LockState(ctxT(t), name); return })
		if err != nil || len(st.Holders) != 0 || st.DelayUntil.IsZero() {
			return errors.New("not delayed yet")
		}
		until = st.DelayUntil
		return nil
	})
	return until
}
