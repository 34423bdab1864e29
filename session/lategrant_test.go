package session

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/api/apitest"
)

// heldAnswer is the fake lock service with the answer of its first
// Acquire held back: the call takes effect on the fake at once, and
// returns only when release is closed (a stalled follower, a proxy that
// holds the answer).
type heldAnswer struct {
	*apitest.Backend
	release chan struct{}
	calls   atomic.Int64
}

func (h *heldAnswer) Acquire(ctx context.Context, req api.AcquireRequest) (api.Grant, error) {
	g, err := h.Backend.Acquire(ctx, req)
	if h.calls.Add(1) == 1 {
		<-h.release
	}
	return g, err
}

// openHeld opens a session (ttl 3 s, lock-delay 2 s: LostAfter 4.85 s)
// whose first acquire answer is held back.
func (r *rig) openHeld() (*Session, *heldAnswer) {
	r.t.Helper()
	h := &heldAnswer{Backend: r.fb, release: make(chan struct{})}
	s, err := Open(context.Background(), h, WithClock(r.fc), TTL(3*time.Second), LockDelay(2*time.Second))
	if err != nil {
		r.t.Fatalf("Open: %v", err)
	}
	r.t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s, h
}

type acquired struct {
	l   *Lock
	err error
}

// TestLateGrantAnswerAfterARevocationIsNotHeld: a grant answered after
// the revocation that ended it has dropped out of the keepalive answers
// (its ttl + lock-delay over) and the lock went to another session is not
// reported held: the client asks again, and a try finds the lock busy. The
// other session's grant is not released.
func TestLateGrantAnswerAfterARevocationIsNotHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		s, h := r.openHeld()
		done := make(chan acquired, 1)
		go func() {
			l, err := s.TryLock(context.Background(), "a")
			done <- acquired{l, err}
		}()
		r.settle(s)
		hs := r.holders("a")
		if len(hs) != 1 {
			t.Fatalf("holders %+v, want the held-back grant", hs)
		}
		if !r.fb.Revoke("a", hs[0].Holder, "stuck job") {
			t.Fatal("the fake found no grant to revoke")
		}
		r.runTo(s, at(6*time.Second)) // past the revocation's ttl + lock-delay
		other := r.open(TTL(3 * time.Second))
		ol, err := other.TryLock(context.Background(), "a")
		if err != nil {
			t.Fatalf("the other session's try: %v", err)
		}
		close(h.release)
		r.settle(s)
		got := <-done
		if got.err == nil {
			t.Fatalf("the late grant (token %d) was reported held while token %d is the other session's", got.l.Token(), ol.Token())
		}
		if !errors.Is(got.err, api.ErrLockBusy) {
			t.Fatalf("err = %v, want lock_busy", got.err)
		}
		if hs := r.holders("a"); len(hs) != 1 || hs[0].Holder != ol.Holder() {
			t.Fatalf("holders %+v, want the other session's grant only", hs)
		}
		for _, rq := range requests[api.ReleaseRequest](r.fb, "Release") {
			if rq.Holder == ol.Holder() {
				t.Fatal("the other session's grant was released")
			}
		}
	})
}

// TestLateGrantAnswerAfterARevocationKeepsWaiting: a waiting Lock whose
// grant answer comes too late after a revocation waits on in the queue
// and comes back with the next grant, made after the other holder's
// unlock.
func TestLateGrantAnswerAfterARevocationKeepsWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		s, h := r.openHeld()
		done := make(chan acquired, 1)
		go func() {
			l, err := s.Lock(context.Background(), "a")
			done <- acquired{l, err}
		}()
		r.settle(s)
		hs := r.holders("a")
		if len(hs) != 1 || !r.fb.Revoke("a", hs[0].Holder, "stuck job") {
			t.Fatalf("holders %+v: nothing to revoke", hs)
		}
		revoked := hs[0].Token
		r.runTo(s, at(6*time.Second))
		other := r.open(TTL(3 * time.Second))
		ol, err := other.TryLock(context.Background(), "a")
		if err != nil {
			t.Fatalf("the other session's try: %v", err)
		}
		close(h.release)
		r.runTo(s, at(7*time.Second))
		select {
		case got := <-done:
			t.Fatalf("Lock returned (%v, %v) while the other session holds the lock", got.l, got.err)
		default:
		}
		if err := ol.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
		r.settle(s)
		got := <-done
		if got.err != nil {
			t.Fatalf("Lock after the other's unlock: %v", got.err)
		}
		if got.l.Token() <= ol.Token() || got.l.Token() == revoked || isClosed(got.l.Lost()) {
			t.Fatalf("token %d (lost %v), want a new grant after the other's %d", got.l.Token(), isClosed(got.l.Lost()), ol.Token())
		}
	})
}

// TestLateGrantAnswerOfAHeldGrantIsConfirmed: a grant answered too late to
// trust, but still held, is confirmed by asking again (the same grant,
// answered in time) and reported held.
func TestLateGrantAnswerOfAHeldGrantIsConfirmed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		s, h := r.openHeld()
		done := make(chan acquired, 1)
		go func() {
			l, err := s.TryLock(context.Background(), "a")
			done <- acquired{l, err}
		}()
		r.settle(s)
		hs := r.holders("a")
		if len(hs) != 1 {
			t.Fatalf("holders %+v, want the held-back grant", hs)
		}
		r.runTo(s, at(6*time.Second))
		close(h.release)
		r.settle(s)
		got := <-done
		if got.err != nil {
			t.Fatalf("TryLock: %v", got.err)
		}
		if got.l.Token() != hs[0].Token || got.l.Holder() != hs[0].Holder || isClosed(got.l.Lost()) {
			t.Fatalf("lock (token %d, lost %v), want grant %d held", got.l.Token(), isClosed(got.l.Lost()), hs[0].Token)
		}
		if n := h.calls.Load(); n != 2 {
			t.Fatalf("%d acquire calls, want the late one and its confirmation", n)
		}
		if g, _, _ := r.counts(); g != 1 {
			t.Fatalf("%d grants, want one", g)
		}
	})
}

// TestTimelyGrantAnswerIsNotAskedAgain: an answer that comes before
// LostAfter(ttl, lock-delay) has passed since its request is taken as it
// is, with one call.
func TestTimelyGrantAnswerIsNotAskedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		s, h := r.openHeld()
		done := make(chan acquired, 1)
		go func() {
			l, err := s.TryLock(context.Background(), "a")
			done <- acquired{l, err}
		}()
		r.runTo(s, at(4800*time.Millisecond)) // LostAfter is 4.85 s
		close(h.release)
		got := <-done
		if got.err != nil || isClosed(got.l.Lost()) {
			t.Fatalf("TryLock: %v", got.err)
		}
		if n := h.calls.Load(); n != 1 {
			t.Fatalf("%d acquire calls, want one", n)
		}
	})
}

// TestMaxHoldWaiterComesBackHeldAfterAWaitLongerThanTheLimit: a waiter
// with a hold limit shorter than its wait comes back held, and loses the
// lock 1% before the limit, counted from the send of the request granted
// (the probe at the end of the slice before the grant), not from its
// first request.
func TestMaxHoldWaiterComesBackHeldAfterAWaitLongerThanTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		holder := r.open(TTL(30 * time.Second))
		waiter := r.open(TTL(30 * time.Second))
		hl, err := holder.TryLock(context.Background(), "a")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan acquired, 1)
		go func() {
			l, err := waiter.Lock(context.Background(), "a", MaxHold(30*time.Second))
			done <- acquired{l, err}
		}()
		r.runTo(waiter, at(55*time.Second)) // slices of 10 s, each ending in a probe
		if err := hl.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
		r.settle(waiter)
		got := <-done
		if got.err != nil {
			t.Fatal(got.err)
		}
		if isClosed(got.l.Lost()) {
			t.Fatalf("came back lost (%v): the hold limit was counted from the first request", got.l.Err())
		}
		// The probe and the request granted were sent at 50 s: lost at 50 + 29.7 s.
		r.runTo(waiter, at(79600*time.Millisecond))
		if isClosed(got.l.Lost()) {
			t.Fatal("lost before the hold limit (less 1%) from the granted request's send")
		}
		r.runTo(waiter, at(79700*time.Millisecond))
		if !isClosed(got.l.Lost()) {
			t.Fatal("Lost() still open 1% before the hold limit from the granted request's send")
		}
		var re *RevokedError
		if !errors.As(got.l.Err(), &re) || re.Kind != "max_hold" {
			t.Fatalf("Err() = %v, want a max_hold RevokedError", got.l.Err())
		}
	})
}

// TestMaxHoldShorterThanASliceLeavesHalfTheLimit: a waiter whose hold
// limit is shorter than a wait slice waits in slices of half the limit,
// each ending in a probe, so its grant comes back held with at least half
// the limit left; its place in the queue is kept throughout.
func TestMaxHoldShorterThanASliceLeavesHalfTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		holder := r.open(TTL(30 * time.Second))
		waiter := r.open(TTL(30 * time.Second))
		late := r.open(TTL(30 * time.Second))
		hl, err := holder.TryLock(context.Background(), "a")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan acquired, 1)
		go func() {
			l, err := waiter.Lock(context.Background(), "a", MaxHold(4*time.Second))
			done <- acquired{l, err}
		}()
		r.settle(waiter)
		go func() { _, _ = late.Lock(context.Background(), "a") }()
		r.runTo(waiter, at(25*time.Second)) // slices of 2 s: the last probe at 24 s
		if err := hl.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
		r.settle(waiter)
		got := <-done
		if got.err != nil {
			t.Fatal(got.err)
		}
		if isClosed(got.l.Lost()) {
			t.Fatal("came back lost: less than half the hold limit was left")
		}
		r.runTo(waiter, at(27900*time.Millisecond))
		if isClosed(got.l.Lost()) {
			t.Fatal("lost before 24 s + 4 s less 1%")
		}
		r.runTo(waiter, at(27960*time.Millisecond))
		if !isClosed(got.l.Lost()) {
			t.Fatal("Lost() still open at 24 s + 4 s less 1%")
		}
	})
}
