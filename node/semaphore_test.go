package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/sequencer"
	"github.com/raftlock/raftlock/session"
)

// A semaphore over a real cluster: each grant answers its slot and a
// sequencer naming it, the lock's state shows permits, slots and the
// slot delays; an expired holder's slot waits out its lock-delay (timed
// by the leader, restarted in full by a new one) while the other slot
// stays held, then goes to the next holder with a larger token; the
// cluster's sequencer check tells the slot's old grant from its new one.
func TestSemaphoreSlotsOverTheCluster(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.awaitRecords(t, fsm.Version, fsm.Version, fsm.Version) // permits need version 5
	const delay = 1500 * time.Millisecond
	dying := mustOpen(t, c, api.OpenRequest{Name: "dying", TTL: time.Second, LockDelay: delay})
	live := mustOpen(t, c, api.OpenRequest{Name: "live", TTL: 20 * time.Second})
	stopKA := c.keepAlive(live.ID, 300*time.Millisecond)
	defer stopKA()

	g0 := mustAcquire(t, c, api.AcquireRequest{Name: "pool", Session: dying.ID, Holder: "d", Permits: 2})
	g1 := mustAcquire(t, c, api.AcquireRequest{Name: "pool", Session: live.ID, Holder: "a", Permits: 2})
	if g0.Slot != 0 || g1.Slot != 1 || g0.Permits != 2 || g1.Permits != 2 {
		t.Fatalf("grants %+v and %+v, want slots 0 and 1 of 2", g0, g1)
	}
	if want := fmt.Sprintf("rl1:p1/2:%d:pool", g1.Token); g1.Sequencer.String() != want {
		t.Fatalf("sequencer %s, want %s", g1.Sequencer, want)
	}
	var st api.LockState
	if err := c.do(func(n *Node) (err error) { st, err = n.LockState(ctxT(t), "pool"); return }); err != nil {
		t.Fatal(err)
	}
	if st.Permits != 2 || len(st.Holders) != 2 || st.Holders[0].Slot != 0 || st.Holders[1].Slot != 1 ||
		st.Grants[0].Permits != 2 || st.Grants[1].Slot != 1 {
		t.Fatalf("lock state %+v", st)
	}

	// The dying session expires: slot 0 waits out the lock-delay.
	var delayed api.LockState
	eventually(t, 10*time.Second, "slot 0 in lock-delay", func() error {
		err := c.do(func(n *Node) (err error) { delayed, err = n.LockState(ctxT(t), "pool"); return })
		if err != nil || len(delayed.SlotDelays) != 1 {
			return fmt.Errorf("%+v, %v", delayed, err)
		}
		return nil
	})
	if d := delayed.SlotDelays[0]; d.Slot != 0 || len(delayed.Holders) != 1 || delayed.Holders[0].Slot != 1 || !delayed.DelayUntil.IsZero() {
		t.Fatalf("after the expiry: %+v", delayed)
	}
	// A new leader restarts the slot's delay in full: it does not end
	// before the delay's length from now.
	_, li := c.leader()
	c.stop(li)
	stoppedAt := time.Now()
	err := c.do(func(n *Node) error {
		_, err := n.Acquire(ctxT(t), api.AcquireRequest{Name: "pool", Session: live.ID, Holder: "b", Permits: 2})
		return err
	})
	if !errors.Is(err, api.ErrLockBusy) {
		t.Fatalf("a try while slot 0 is delayed and slot 1 held: %v, want lock_busy", err)
	}
	var g2 api.Grant
	eventually(t, 20*time.Second, "slot 0 granted after its delay", func() error {
		return c.do(func(n *Node) (err error) {
			g2, err = n.Acquire(ctxT(t), api.AcquireRequest{Name: "pool", Session: live.ID, Holder: "b", Permits: 2})
			return err
		})
	})
	if el := time.Since(stoppedAt); el < delay {
		t.Fatalf("slot 0 granted %v after the failover, before the delay %v", el, delay)
	}
	if g2.Slot != 0 || g2.Token <= g0.Token {
		t.Fatalf("grant after the delay %+v, want slot 0 with a token above %d", g2, g0.Token)
	}

	// The cluster's check: the slot's new grant is current, its old one
	// and a plain form of the new token are not.
	check := func(seq string) api.SequencerCheck {
		var out api.SequencerCheck
		if err := c.do(func(n *Node) (err error) { out, err = n.CheckSequencer(ctxT(t), seq); return }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if r := check(g2.Sequencer.String()); !r.Valid {
		t.Fatalf("new slot 0 grant %s: %+v, want valid", g2.Sequencer, r)
	}
	if r := check(g1.Sequencer.String()); !r.Valid {
		t.Fatalf("slot 1 grant %s: %+v, want valid", g1.Sequencer, r)
	}
	if r := check(g0.Sequencer.String()); r.Valid {
		t.Fatalf("expired slot 0 grant %s: %+v, want invalid", g0.Sequencer, r)
	}
	plain := sequencer.Sequencer{Name: "pool", Mode: sequencer.Exclusive, Token: g2.Token}
	if r := check(plain.String()); r.Valid {
		t.Fatalf("plain form %s of a slot grant: %+v, want invalid", plain, r)
	}
	wrongSlot := g2.Sequencer
	wrongSlot.Slot = 1
	if r := check(wrongSlot.String()); r.Valid {
		t.Fatalf("slot 0's token named as slot 1 (%s): %+v, want invalid", wrongSlot, r)
	}
	wrongPermits := g2.Sequencer
	wrongPermits.Permits = 3
	if r := check(wrongPermits.String()); r.Valid {
		t.Fatalf("slot 0's token named as of a semaphore of 3 (%s): %+v, want invalid", wrongPermits, r)
	}
}

// Bad permits get invalid_argument with the reason and change nothing: a
// mismatch names both values, shared mode and too many permits are
// refused before any proposal.
func TestSemaphoreBadPermitsAreRefused(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	c.awaitRecords(t, fsm.Version)
	s := mustOpen(t, c, api.OpenRequest{TTL: 20 * time.Second})
	mustAcquire(t, c, api.AcquireRequest{Name: "pool", Session: s.ID, Holder: "a", Permits: 3})
	mustAcquire(t, c, api.AcquireRequest{Name: "plain", Session: s.ID, Holder: "a"})
	for _, tc := range []struct {
		req  api.AcquireRequest
		want string
	}{
		{api.AcquireRequest{Name: "pool", Holder: "b", Permits: 2}, "(3 vs 2)"},
		{api.AcquireRequest{Name: "pool", Holder: "b"}, "(3 vs 0)"},
		{api.AcquireRequest{Name: "plain", Holder: "b", Permits: 2, Wait: time.Second}, "(0 vs 2)"},
		{api.AcquireRequest{Name: "new", Holder: "b", Permits: 2, Mode: sequencer.Shared}, "exclusive mode only"},
		{api.AcquireRequest{Name: "new", Holder: "b", Permits: api.MaxPermits + 1}, "the limit is 256"},
	} {
		tc.req.Session = s.ID
		n, _ := c.leader()
		before := n.fsm.Locks("")
		_, err := n.Acquire(ctxT(t), tc.req)
		if api.CodeOf(err) != api.CodeInvalidArgument || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%+v: %v, want invalid_argument saying %q", tc.req, err, tc.want)
		}
		if after := n.fsm.Locks(""); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatalf("%+v changed the locks: %+v", tc.req, after)
		}
	}
}

// While a member reads no command version 5, an acquire with permits is
// refused with the reason, never proposed.
func TestSemaphoreNeedsEveryMemberToReadVersion5(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) {
		slowRaft(cfg)
		if cfg.ID == "n3" {
			cfg.readsUpTo = fsm.VersionTokenLimits
		}
	})
	c.awaitRecords(t, fsm.Version, fsm.Version, fsm.VersionTokenLimits)
	s := mustOpen(t, c, api.OpenRequest{TTL: 20 * time.Second})
	err := c.do(func(n *Node) error {
		_, err := n.Acquire(ctxT(t), api.AcquireRequest{Name: "pool", Session: s.ID, Holder: "a", Permits: 2})
		return err
	})
	if api.CodeOf(err) != api.CodeInvalidArgument || !strings.Contains(err.Error(), "every member must run a build that reads command version 5") {
		t.Fatalf("permits in a cluster not reading version 5: %v", err)
	}
	n, _ := c.leader()
	if _, ok := n.fsm.Lock("pool"); ok {
		t.Fatal("the refused acquire was proposed")
	}
	// A plain acquire still goes through.
	mustAcquire(t, c, api.AcquireRequest{Name: "pool", Session: s.ID, Holder: "a"})
}

// A new leader times every slot delay again, each under its own key.
func TestSlotDelaysAreRestartedEachForItsLength(t *testing.T) {
	got := delaysToRestart([]fsm.Lock{{Name: "sem", Permits: 3, SlotDelays: []fsm.SlotDelay{
		{Slot: 0, Until: 9, For: int64(2 * time.Second)}, {Slot: 2, Until: 9, For: 0}}}})
	want := []restartedDelay{{delayKey{"sem", 9, 0}, 2 * time.Second}, {delayKey{"sem", 9, 2}, api.MaxLockDelay}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("restarted %+v, want %+v", got, want)
	}
}

// The Go client over HTTP: session.Permits takes a slot, Lock.Slot and
// the sequencer name it, a third Lock of a semaphore of two waits for a
// slot and gets the one released, and a mismatch is invalid_argument.
func TestClientSemaphoreOverHTTP(t *testing.T) {
	c := newTestCluster(t, 1, nil, withHTTP)
	c.awaitRecords(t, fsm.Version)
	client := c.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// One session per slot: a Go Session holds a name once (locks are
	// not re-entrant, DESIGN.md "Re-entrancy"), a semaphore's slots too.
	var ss []*session.Session
	for range 3 {
		ss = append(ss, openSession(t, ctx, client, session.TTL(5*time.Second), session.Name("pool-user")))
	}
	s := ss[2] // the third user, who finds the pool full
	var held []*session.Lock
	for i := range 2 {
		l, err := ss[i].Lock(ctx, "pool", session.Permits(2))
		if err != nil {
			t.Fatal(err)
		}
		if l.Slot() != uint64(i) || l.Permits() != 2 || !l.Sequencer().Semaphore || l.Sequencer().Slot != uint64(i) {
			t.Fatalf("lock %d: slot %d of %d, sequencer %s", i, l.Slot(), l.Permits(), l.Sequencer())
		}
		held = append(held, l)
	}
	if _, err := s.TryLock(ctx, "pool", session.Permits(2)); !errors.Is(err, api.ErrLockBusy) {
		t.Fatalf("a third TryLock: %v, want lock_busy", err)
	}
	if _, err := s.TryLock(ctx, "pool", session.Permits(3)); api.CodeOf(err) != api.CodeInvalidArgument {
		t.Fatalf("TryLock with other permits: %v, want invalid_argument", err)
	}
	got := make(chan *session.Lock, 1)
	go func() {
		l, err := s.Lock(ctx, "pool", session.Permits(2))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	eventually(t, 10*time.Second, "the third queued", func() error {
		st, err := client.LockState(ctx, "pool")
		if err != nil || st.Waiters != 1 || st.Permits != 2 || len(st.Holders) != 2 || st.Holders[1].Slot != 1 {
			return fmt.Errorf("%+v %v", st, err)
		}
		return nil
	})
	if err := held[1].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l3 := <-got
	if l3 == nil || l3.Slot() != 1 || l3.Token() <= held[1].Token() {
		t.Fatalf("third lock %+v, want slot 1 with a larger token", l3)
	}
}

// The semaphore metrics are totals: semaphores stored, slots held, slots
// in lock-delay.
func TestSemaphoreMetricsCountSlots(t *testing.T) {
	c := newTestCluster(t, 1, nil, withHTTP)
	c.awaitRecords(t, fsm.Version)
	cl := c.client(t)
	ctx := ctxT(t)
	live, err := cl.OpenSession(ctx, api.OpenRequest{Name: "live", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	dying, err := cl.OpenSession(ctx, api.OpenRequest{Name: "dying", TTL: time.Second, LockDelay: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	stopKA := c.keepAlive(live.ID, 300*time.Millisecond)
	defer stopKA()
	for _, a := range []struct {
		lock    string
		s       api.Info
		holder  string
		permits uint64
	}{{"a", dying, "d", 3}, {"a", live, "l1", 3}, {"a", live, "l2", 3}, {"b", live, "l", 2}, {"plain", live, "l", 0}} {
		if _, err := cl.Acquire(ctx, api.AcquireRequest{Name: a.lock, Session: a.s.ID, Holder: a.holder, Permits: a.permits}); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]float64{"raftlock_semaphores": 2, "raftlock_semaphore_slots_held": 3,
		"raftlock_semaphore_slots_delayed": 1, "raftlock_locks_held": 3}
	eventually(t, 10*time.Second, "metrics after the dying holder's expiry", func() error {
		mf, status, err := scrape(ctx, c.httpAddrs[0], "")
		if err != nil || status != 200 {
			return fmt.Errorf("scrape: %d %v", status, err)
		}
		for name, v := range want {
			labels := map[string]string{}
			if name == "raftlock_locks_held" {
				labels["mode"] = "exclusive"
			}
			if got, ok := metricValue(mf, name, labels); !ok || got != v {
				return fmt.Errorf("%s = %v (present %v), want %v", name, got, ok, v)
			}
		}
		return nil
	})
}

// A queued waiter that asks again with other permits is refused
// (invalid_argument), never taken for a renewal of its place.
func TestSemaphoreQueuedRetryWithOtherPermitsIsRefused(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	c.awaitRecords(t, fsm.Version)
	n, _ := c.leader()
	ctx := ctxT(t)
	s := mustOpen(t, c, api.OpenRequest{TTL: 20 * time.Second})
	mustAcquire(t, c, api.AcquireRequest{Name: "pool", Session: s.ID, Holder: "a", Permits: 1})
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, _ = n.Acquire(wctx, api.AcquireRequest{Name: "pool", Session: s.ID, Holder: "b", Permits: 1, Wait: 20 * time.Second})
	}()
	eventually(t, 5*time.Second, "b queued", func() error {
		if l, _ := n.fsm.Lock("pool"); len(l.Waiters) != 1 {
			return errors.New("not queued yet")
		}
		return nil
	})
	_, err := n.Acquire(ctx, api.AcquireRequest{Name: "pool", Session: s.ID, Holder: "b", Permits: 2, Wait: 20 * time.Second})
	if api.CodeOf(err) != api.CodeInvalidArgument || !strings.Contains(err.Error(), "(1 vs 2)") {
		t.Fatalf("the queued holder's retry with other permits: %v, want invalid_argument naming 1 and 2", err)
	}
}

// TestRevokedSlotIsNotGrantedBeforeTTLPlusLockDelay: over HTTP, revoking
// slot 0 of a semaphore of 2 keeps that slot alone from the waiter for
// the holder's ttl + lock-delay (a slot delay, timed by the leader; slot
// 1 stays held), the holder's keepalive answers name the revocation
// until then, the waiter is then granted slot 0 and the keepalive stops
// naming it; once every holder is gone the name is forgotten and a
// plain acquire of it is granted.
func TestRevokedSlotIsNotGrantedBeforeTTLPlusLockDelay(t *testing.T) {
	c := newTestCluster(t, 3, nil, withHTTP)
	c.awaitRecords(t, fsm.Version, fsm.Version, fsm.Version)
	ctx := ctxT(t)
	cl := c.client(t)
	holder := mustOpen(t, c, api.OpenRequest{Name: "holder", TTL: time.Second, LockDelay: 2 * time.Second})
	other := mustOpen(t, c, api.OpenRequest{Name: "other", TTL: 10 * time.Second})
	waiter := mustOpen(t, c, api.OpenRequest{Name: "waiter", TTL: 10 * time.Second})
	for _, id := range []string{holder.ID, other.ID, waiter.ID} {
		stop := c.keepAlive(id, 200*time.Millisecond)
		defer stop()
	}
	g0 := mustAcquire(t, c, api.AcquireRequest{Name: "pool", Session: holder.ID, Holder: "h", Permits: 2})
	g1 := mustAcquire(t, c, api.AcquireRequest{Name: "pool", Session: other.ID, Holder: "o", Permits: 2})
	if g0.Slot != 0 || g1.Slot != 1 {
		t.Fatalf("grants in slots %d and %d, want 0 and 1", g0.Slot, g1.Slot)
	}
	type grantAt struct {
		g   api.Grant
		at  time.Time
		err error
	}
	granted := make(chan grantAt, 1)
	go func() {
		g, err := cl.Acquire(ctx, api.AcquireRequest{Name: "pool", Session: waiter.ID, Holder: "w", Permits: 2, Wait: time.Minute})
		granted <- grantAt{g, time.Now(), err}
	}()
	eventually(t, 10*time.Second, "the waiter to queue", func() error {
		if st, err := cl.LockState(ctx, "pool"); err != nil || st.Waiters != 1 {
			return fmt.Errorf("%+v %v", st, err)
		}
		return nil
	})

	start := time.Now()
	rv, err := cl.RevokeGrant(ctx, api.RevokeRequest{Name: "pool", Holder: "h", SessionHandle: api.SessionHandle(holder.ID), Reason: "stuck"})
	if err != nil {
		t.Fatal(err)
	}
	const unavailable = 3 * time.Second // ttl + lock-delay
	if rv.Token != g0.Token || rv.Unavailable != unavailable {
		t.Fatalf("revocation %+v", rv)
	}
	st, err := cl.LockState(ctx, "pool")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.SlotDelays) != 1 || st.SlotDelays[0].Slot != 0 || !st.DelayUntil.IsZero() || len(st.Holders) != 1 ||
		st.Holders[0].Slot != 1 || st.Waiters != 1 {
		t.Fatalf("after the revocation: %+v, want slot 0 delayed, slot 1 held and the waiter queued", st)
	}
	ka, err := cl.KeepAlive(ctx, holder.ID)
	want := api.RevokedGrant{Name: "pool", Holder: "h", Token: g0.Token, Kind: "admin", Reason: "stuck"}
	if err != nil || len(ka.Revoked) != 1 || ka.Revoked[0] != want {
		t.Fatalf("keepalive answer %+v %v, want it to name %+v", ka.Revoked, err, want)
	}

	var w grantAt
	select {
	case w = <-granted:
	case <-ctx.Done():
		t.Fatal("the waiter was never granted")
	}
	if w.err != nil {
		t.Fatal(w.err)
	}
	if d := w.at.Sub(start); d < unavailable {
		t.Errorf("the waiter was granted the revoked slot %v after the revocation, before ttl + lock-delay (%v)", d, unavailable)
	}
	if w.g.Slot != 0 || w.g.Token <= g1.Token {
		t.Errorf("the waiter's grant %+v, want slot 0 with a token above %d", w.g, g1.Token)
	}
	ka, err = cl.KeepAlive(ctx, holder.ID)
	if err != nil || len(ka.Revoked) != 0 {
		t.Errorf("keepalive after the slot's delay: %+v %v, want no revocation named", ka.Revoked, err)
	}

	for _, r := range []api.ReleaseRequest{{Name: "pool", Session: waiter.ID, Holder: "w"}, {Name: "pool", Session: other.ID, Holder: "o"}} {
		if err := cl.Release(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := cl.LockState(ctx, "pool"); err != nil || st.Permits != 0 || len(st.Holders) != 0 || len(st.SlotDelays) != 0 {
		t.Fatalf("the free semaphore: %+v %v, want forgotten", st, err)
	}
	if _, err := cl.Acquire(ctx, api.AcquireRequest{Name: "pool", Session: other.ID, Holder: "plain"}); err != nil {
		t.Fatalf("a plain acquire of the freed name: %v", err)
	}
}

// TestNewLeaderRestartsARevokedSlotsDelayInFull: a revoked slot's delay
// is a slot delay like an expiry's, so a new leader times it again in
// full from its promotion: the slot is not granted before ttl +
// lock-delay from the old leader's stop, and is granted after it.
func TestNewLeaderRestartsARevokedSlotsDelayInFull(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.awaitRecords(t, fsm.Version, fsm.Version, fsm.Version)
	const ttl, lockDelay = time.Second, 1500 * time.Millisecond
	holder := mustOpen(t, c, api.OpenRequest{Name: "holder", TTL: ttl, LockDelay: lockDelay})
	live := mustOpen(t, c, api.OpenRequest{Name: "live", TTL: 20 * time.Second})
	for _, id := range []string{holder.ID, live.ID} {
		stop := c.keepAlive(id, 200*time.Millisecond)
		defer stop()
	}
	g0 := mustAcquire(t, c, api.AcquireRequest{Name: "pool", Session: holder.ID, Holder: "h", Permits: 2})
	mustAcquire(t, c, api.AcquireRequest{Name: "pool", Session: live.ID, Holder: "a", Permits: 2})
	err := c.do(func(n *Node) error {
		_, err := n.RevokeGrant(ctxT(t), api.RevokeRequest{Name: "pool", Holder: "h", Reason: "stuck"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	_, li := c.leader()
	c.stop(li)
	stoppedAt := time.Now()
	try := func() (g api.Grant, err error) {
		err = c.do(func(n *Node) (err error) {
			g, err = n.Acquire(ctxT(t), api.AcquireRequest{Name: "pool", Session: live.ID, Holder: "b", Permits: 2})
			return err
		})
		return g, err
	}
	if _, err := try(); !errors.Is(err, api.ErrLockBusy) {
		t.Fatalf("a try while slot 0's revocation delay runs and slot 1 is held: %v, want lock_busy", err)
	}
	var g api.Grant
	eventually(t, 20*time.Second, "slot 0 granted after its delay", func() (err error) {
		g, err = try()
		return err
	})
	if el := time.Since(stoppedAt); el < ttl+lockDelay {
		t.Fatalf("the revoked slot was granted %v after the failover, before ttl + lock-delay %v", el, ttl+lockDelay)
	}
	if g.Slot != 0 || g.Token <= g0.Token {
		t.Fatalf("grant %+v, want slot 0 with a token above %d", g, g0.Token)
	}
}
