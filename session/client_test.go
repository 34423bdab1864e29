package session

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/api/apitest"

	"github.com/raftlock/raftlock/sequencer"
)

// ---- helpers ----

var t0 = time.Unix(1_000_000, 0)

// eventually polls cond until it holds or 5s of real time pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	tick := time.NewTicker(50 * time.Microsecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// rig is a fake clock and the fake lock service (apitest.Backend) on it. The fake's sessions
// do not expire: the tests make keepalives fail or hang to play a client
// cut off from a cluster that keeps its session, and check what the client
// concludes by itself; Expire ends one on the fake.
type rig struct {
	t  *testing.T
	fc *FakeClock
	fb *apitest.Backend
	// kaBlocked counts the KeepAlive calls that a kaBehavior holds.
	kaBlocked atomic.Int64
}

func newRig(t *testing.T) *rig {
	fc := NewFakeClock(t0)
	return &rig{t: t, fc: fc, fb: apitest.New(apitest.WithClock(fc.Now), apitest.WithoutExpiry())}
}

// kaBehavior is what the fake's KeepAlive calls do, from the next one on
// (setKA installs it as the fake's hook).
type kaBehavior struct {
	err  error         // answer with this error
	hang bool          // block until the call's ctx is done
	gate chan struct{} // block until gate is closed, then answer normally
}

func (r *rig) setKA(b kaBehavior) {
	r.fb.SetHook(func(ctx context.Context, c apitest.Call) error {
		switch {
		case c.Method != "KeepAlive":
			return nil
		case b.err != nil:
			return b.err
		case !b.hang && b.gate == nil:
			return nil
		}
		r.kaBlocked.Add(1)
		defer r.kaBlocked.Add(-1)
		select {
		case <-b.gate: // nil when hanging
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
}

// keepAliveTimes returns when each KeepAlive call began, by the fake clock.
func (r *rig) keepAliveTimes() []time.Time {
	var out []time.Time
	for _, c := range r.fb.Log("KeepAlive") {
		out = append(out, c.At)
	}
	return out
}

// counts returns the grants the fake made and the Release and
// CloseSession calls it got.
func (r *rig) counts() (grants, releases, closes int) {
	return r.fb.Grants(), r.fb.Calls("Release"), r.fb.Calls("CloseSession")
}

// requests returns the requests of the fake's calls of method, in order.
func requests[T any](b *apitest.Backend, method string) []T {
	var out []T
	for _, c := range b.Log(method) {
		out = append(out, c.Arg.(T))
	}
	return out
}

// holders returns the holders of the lock name on the fake.
func (r *rig) holders(name string) []api.Holder { return r.fb.Peek(name).Holders }

func (r *rig) open(opts ...Option) *Session {
	r.t.Helper()
	s, err := Open(context.Background(), r.fb, append([]Option{WithClock(r.fc)}, opts...)...)
	if err != nil {
		r.t.Fatalf("Open: %v", err)
	}
	r.t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// settle waits until every goroutine of the test's bubble (the session's
// keepalive loop, its calls, the fake lock service) is blocked, so that
// advancing the fake clock cannot race with them. Every test that uses a
// rig runs in a synctest bubble.
func (r *rig) settle(s *Session) { synctest.Wait() }

// runTo advances the fake clock to target, stopping at every timer deadline
// on the way and letting the session's loop settle at each.
func (r *rig) runTo(s *Session, target time.Time) {
	r.t.Helper()
	for {
		r.settle(s)
		now := r.fc.Now()
		next, ok := r.fc.NextDeadline()
		if !ok || next.After(target) {
			r.fc.Advance(target.Sub(now))
			r.settle(s)
			return
		}
		r.fc.Advance(next.Sub(now))
	}
}

func at(d time.Duration) time.Time { return t0.Add(d) }

// drain returns the events buffered so far.
func drain(s *Session) []Event {
	var out []Event
	for {
		select {
		case ev, ok := <-s.Events():
			if !ok {
				return out
			}
			out = append(out, ev)
		default:
			return out
		}
	}
}

func states(evs []Event) []State {
	var out []State
	for _, e := range evs {
		out = append(out, e.State)
	}
	return out
}

func equalStates(a, b []State) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// ---- FakeClock ----

func TestFakeClockTimers(t *testing.T) {
	c := NewFakeClock(t0)
	a := c.NewTimer(time.Second)
	b := c.NewTimer(2 * time.Second)
	if n := c.Waiters(); n != 2 {
		t.Fatalf("Waiters = %d, want 2", n)
	}
	if next, _ := c.NextDeadline(); !next.Equal(at(time.Second)) {
		t.Fatalf("NextDeadline = %v", next)
	}
	c.Advance(999 * time.Millisecond)
	select {
	case <-a.C():
		t.Fatal("timer fired early")
	default:
	}
	c.Advance(time.Millisecond)
	select {
	case v := <-a.C():
		if !v.Equal(at(time.Second)) {
			t.Fatalf("fired with %v", v)
		}
	default:
		t.Fatal("timer did not fire at its deadline")
	}
	if n := c.Waiters(); n != 1 {
		t.Fatalf("Waiters = %d, want 1", n)
	}
	if !b.Stop() {
		t.Fatal("Stop of a pending timer returned false")
	}
	if b.Stop() {
		t.Fatal("second Stop returned true")
	}
	c.Advance(time.Hour)
	select {
	case <-b.C():
		t.Fatal("stopped timer fired")
	default:
	}
	// Reset drops an undelivered value (Go 1.23 semantics).
	a.Reset(time.Second)
	c.Advance(time.Second)
	a.Reset(time.Second)
	select {
	case <-a.C():
		t.Fatal("stale value after Reset")
	default:
	}
	// A non-positive duration fires at once.
	z := c.NewTimer(0)
	select {
	case <-z.C():
	default:
		t.Fatal("NewTimer(0) did not fire at once")
	}
	// BlockUntil wakes when enough timers are armed.
	done := make(chan struct{})
	go func() { c.BlockUntil(3); close(done) }()
	c.NewTimer(time.Minute)
	c.NewTimer(time.Minute)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("BlockUntil did not return")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.BlockUntilContext(ctx, 100); !errors.Is(err, context.Canceled) {
		t.Fatalf("BlockUntilContext = %v", err)
	}
}

func TestRealClock(t *testing.T) {
	c := RealClock()
	start := c.Now()
	tm := c.NewTimer(time.Millisecond)
	v := <-tm.C()
	if v.Sub(start) < time.Millisecond || c.Now().Sub(start) < time.Millisecond {
		t.Fatalf("timer fired after %v", v.Sub(start))
	}
	if tm.Stop() {
		t.Fatal("Stop after firing returned true")
	}
}

// ---- keepalive loop ----

func TestKeepAliveCadenceIsTTLOverThree(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		s := r.open(TTL(3 * time.Second))
		if s.TTL() != 3*time.Second || s.ID() == "" || !s.Safe() {
			t.Fatalf("TTL=%v ID=%q Safe=%v", s.TTL(), s.ID(), s.Safe())
		}
		r.runTo(s, at(6500*time.Millisecond))
		got := r.keepAliveTimes()
		if len(got) != 6 {
			t.Fatalf("%d keepalives by t0+6.5s, want 6: %v", len(got), got)
		}
		for i, ts := range got {
			if want := at(time.Duration(i+1) * time.Second); !ts.Equal(want) {
				t.Fatalf("keepalive %d at %v, want %v", i, ts.Sub(t0), want.Sub(t0))
			}
		}
		if evs := drain(s); len(evs) != 0 {
			t.Fatalf("unexpected events %v", evs)
		}
		if !s.Safe() {
			t.Fatalf("state %v", s.State())
		}
	})
}

func TestLeaseCountedFromSendTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		gate := make(chan struct{})
		r.setKA(kaBehavior{gate: gate})
		s := r.open(TTL(3*time.Second), GracePeriod(10*time.Second))
		// The keepalive sent at t0+1s is acknowledged only at t0+1.9s.
		r.runTo(s, at(1900*time.Millisecond))
		if n := len(r.keepAliveTimes()); n != 1 {
			t.Fatalf("%d keepalives, want 1", n)
		}
		r.setKA(kaBehavior{err: api.Errorf(api.CodeNoLeader, "no leader")})
		close(gate)
		eventually(t, "slow ack to be handled", func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.leaseEnd.Equal(at(4 * time.Second))
		})
		// The server extended to 1.9+3 = 4.9s, but the client's lease ends at
		// send time + ttl = 4s.
		r.runTo(s, at(4*time.Second-time.Millisecond))
		if !s.Safe() {
			t.Fatalf("state %v before send time + ttl", s.State())
		}
		r.runTo(s, at(4*time.Second))
		if st := s.State(); st != Jeopardy {
			t.Fatalf("state %v at send time + ttl, want jeopardy", st)
		}
		evs := drain(s)
		if len(evs) != 1 || evs[0].State != Jeopardy || !evs[0].At.Equal(at(4*time.Second)) {
			t.Fatalf("events %v, want one jeopardy at t0+4s", evs)
		}
		if !errors.Is(evs[0].Err, api.ErrNoLeader) {
			t.Fatalf("jeopardy cause %v, want no_leader", evs[0].Err)
		}
	})
}

func TestJeopardyThenRecoveryWithinGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		var cb []State
		var cbMu sync.Mutex
		s := r.open(TTL(3*time.Second), GracePeriod(5*time.Second), OnEvent(func(e Event) {
			cbMu.Lock()
			cb = append(cb, e.State)
			cbMu.Unlock()
		}))
		r.setKA(kaBehavior{err: errors.New("connection refused")})
		l, err := s.TryLock(context.Background(), "a")
		if err != nil {
			t.Fatal(err)
		}
		r.runTo(s, at(3*time.Second))
		if s.State() != Jeopardy || s.Safe() {
			t.Fatalf("state %v at lease end, want jeopardy", s.State())
		}
		if isClosed(l.Lost()) {
			t.Fatal("Lost closed in jeopardy")
		}
		before := len(r.keepAliveTimes())
		r.runTo(s, at(4*time.Second))
		kas := r.keepAliveTimes()[before:]
		if len(kas) < 3 {
			t.Fatalf("only %d keepalive retries in 1s of jeopardy", len(kas))
		}
		for i := 1; i < len(kas); i++ {
			if d := kas[i].Sub(kas[i-1]); d != 300*time.Millisecond {
				t.Fatalf("jeopardy retry interval %v, want ttl/10 = 300ms", d)
			}
		}
		r.setKA(kaBehavior{})
		r.runTo(s, at(4400*time.Millisecond))
		if !s.Safe() {
			t.Fatalf("state %v after ack within grace, want safe", s.State())
		}
		last := r.keepAliveTimes()
		sentAt := last[len(last)-1]
		s.mu.Lock()
		end := s.leaseEnd
		s.mu.Unlock()
		if !end.Equal(sentAt.Add(3 * time.Second)) {
			t.Fatalf("lease end %v, want send time %v + ttl", end.Sub(t0), sentAt.Sub(t0))
		}
		r.runTo(s, at(20*time.Second))
		evs := drain(s)
		if got := states(evs); !equalStates(got, []State{Jeopardy, Safe}) {
			t.Fatalf("events %v, want [jeopardy safe]", got)
		}
		if !evs[1].At.Equal(sentAt) {
			t.Fatalf("safe at %v, want %v", evs[1].At.Sub(t0), sentAt.Sub(t0))
		}
		cbMu.Lock()
		if !equalStates(cb, []State{Jeopardy, Safe}) {
			t.Fatalf("OnEvent saw %v", cb)
		}
		cbMu.Unlock()
		if isClosed(l.Lost()) || !s.Safe() {
			t.Fatal("lock lost or session unsafe after recovery")
		}
	})
}

func TestJeopardyPastGraceExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		s := r.open(TTL(3*time.Second), GracePeriod(2*time.Second))
		ctx := context.Background()
		l, err := s.Lock(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		r.setKA(kaBehavior{hang: true})
		r.runTo(s, at(3*time.Second))
		if s.State() != Jeopardy {
			t.Fatalf("state %v, want jeopardy", s.State())
		}
		r.runTo(s, at(5*time.Second-time.Nanosecond))
		if s.State() != Jeopardy || isClosed(l.Lost()) {
			t.Fatalf("state %v lost=%v before grace ends", s.State(), isClosed(l.Lost()))
		}
		r.runTo(s, at(5*time.Second))
		select {
		case <-s.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("keepalive loop still running after expiry")
		}
		if s.State() != Expired {
			t.Fatalf("state %v, want expired", s.State())
		}
		if !isClosed(l.Lost()) {
			t.Fatal("Lost not closed on expiry")
		}
		var got []Event
		for ev := range s.Events() { // closed after the final event
			got = append(got, ev)
		}
		if st := states(got); !equalStates(st, []State{Jeopardy, Expired}) {
			t.Fatalf("events %v, want [jeopardy expired]", st)
		}
		if !got[1].At.Equal(at(5 * time.Second)) {
			t.Fatalf("expired at %v", got[1].At.Sub(t0))
		}
		eventually(t, "hung keepalives to be cancelled", func() bool { return r.kaBlocked.Load() == 0 })
		if n := r.fc.Waiters(); n != 0 {
			t.Fatalf("%d timers still armed after expiry", n)
		}
		if _, err := s.TryLock(ctx, "b"); !errors.Is(err, api.ErrSessionNotFound) {
			t.Fatalf("TryLock on expired session: %v", err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("Unlock of a lost lock: %v", err)
		}
		if err := s.Close(ctx); err != nil {
			t.Fatalf("Close of expired session: %v", err)
		}
	})
}

func TestSessionNotFoundExpiresAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		s := r.open(TTL(30 * time.Second))
		l, err := s.TryLock(context.Background(), "a")
		if err != nil {
			t.Fatal(err)
		}
		r.fb.Expire(s.ID())
		r.runTo(s, at(10*time.Second))
		<-s.Done()
		if s.State() != Expired || !isClosed(l.Lost()) {
			t.Fatalf("state %v lost=%v", s.State(), isClosed(l.Lost()))
		}
		evs := drain(s)
		if len(evs) != 1 || evs[0].State != Expired || !errors.Is(evs[0].Err, api.ErrSessionNotFound) || !evs[0].At.Equal(at(10*time.Second)) {
			t.Fatalf("events %+v, want one expired(session_not_found) at t0+10s", evs)
		}
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, _, closes := r.counts(); closes != 0 {
			t.Fatalf("CloseSession called %d times for a session the server lost", closes)
		}
	})
}

// TestRevokedSessionExpiresAtOnce: a keepalive answered unauthenticated
// (the token that opened the session was deleted: its sessions ended) or
// permission_denied is the end of the session, never a passing error: the
// session expires and every lock is lost at once, not at lease end.
func TestRevokedSessionExpiresAtOnce(t *testing.T) {
	for _, code := range []api.Code{api.CodeUnauthenticated, api.CodePermissionDenied} {
		t.Run(string(code), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t)
				s := r.open(TTL(30 * time.Second))
				l, err := s.TryLock(context.Background(), "a")
				if err != nil {
					t.Fatal(err)
				}
				r.setKA(kaBehavior{err: api.Errorf(code, "token deleted")})
				r.runTo(s, at(10*time.Second))
				<-s.Done()
				if s.State() != Expired || !isClosed(l.Lost()) {
					t.Fatalf("state %v lost=%v, want expired and lost after one refused keepalive", s.State(), isClosed(l.Lost()))
				}
			})
		})
	}
}

// TestAcquireAnsweredSessionNotFoundExpiresTheSession: an acquire that
// learns the session is gone ends the session at once: its other locks
// are lost without waiting for the next keepalive.
func TestAcquireAnsweredSessionNotFoundExpiresTheSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		s := r.open(TTL(30 * time.Second))
		l, err := s.TryLock(context.Background(), "a")
		if err != nil {
			t.Fatal(err)
		}
		r.fb.Fail("Acquire", api.Errorf(api.CodeSessionNotFound, "session gone"))
		if _, err := s.TryLock(context.Background(), "b"); !errors.Is(err, api.ErrSessionNotFound) {
			t.Fatalf("TryLock: %v, want session_not_found", err)
		}
		<-s.Done()
		if s.State() != Expired || !isClosed(l.Lost()) {
			t.Fatalf("state %v lost=%v, want expired and lost", s.State(), isClosed(l.Lost()))
		}
	})
}

func TestCloseWhileKeepAliveHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		s := r.open(TTL(3 * time.Second))
		r.setKA(kaBehavior{hang: true})
		r.runTo(s, at(1*time.Second))
		if r.kaBlocked.Load() != 1 {
			t.Fatal("keepalive not hanging")
		}
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := r.kaBlocked.Load(); n != 0 {
			t.Fatalf("%d keepalives still running after Close", n)
		}
		if n := r.fc.Waiters(); n != 0 {
			t.Fatalf("%d timers armed after Close", n)
		}
	})
}

func TestOnEventMayCloseSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		var sp atomic.Pointer[Session]
		closed := make(chan error, 1)
		s := r.open(TTL(3*time.Second), OnEvent(func(e Event) {
			if e.State == Jeopardy {
				closed <- sp.Load().Close(context.Background())
			}
		}))
		sp.Store(s)
		r.setKA(kaBehavior{err: api.Errorf(api.CodeNoLeader, "no leader")})
		r.runTo(s, at(3*time.Second))
		select {
		case err := <-closed:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Close from OnEvent deadlocked")
		}
		<-s.Done()
		if s.State() != Closed {
			t.Fatalf("state %v", s.State())
		}
	})
}

func TestEventsDropOldestWhenFull(t *testing.T) {
	s := &Session{events: make(chan Event, 2)}
	for i := 0; i < 5; i++ {
		s.emit(Event{State: State(i % 2), At: at(time.Duration(i))})
	}
	evs := drain(s)
	if len(evs) != 2 || !evs[0].At.Equal(at(3)) || !evs[1].At.Equal(at(4)) {
		t.Fatalf("kept %v, want the two newest", evs)
	}
}

// The session makes one call per operation: the Backend retries what is
// transient (api.Backend), so an error it returns is the answer, passed on
// as it is, and the session's state stays as it was.
func TestSessionPassesOnTheBackendsAnswerWithoutRetrying(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		noLeader := api.Errorf(api.CodeNoLeader, "no leader")
		r.fb.Fail("OpenSession", noLeader)
		if _, err := Open(context.Background(), r.fb, WithClock(r.fc), TTL(3*time.Second)); !errors.Is(err, api.ErrNoLeader) {
			t.Fatalf("Open = %v, want the backend's no_leader", err)
		}
		r.fc.Advance(time.Second)
		s := r.open(TTL(3 * time.Second))
		// The lease counts from before the successful open's call.
		s.mu.Lock()
		end := s.leaseEnd
		s.mu.Unlock()
		if !end.Equal(at(time.Second + 3*time.Second)) {
			t.Fatalf("lease end %v", end.Sub(t0))
		}
		if _, err := Open(context.Background(), r.fb, GracePeriod(-1)); !errors.Is(err, api.ErrInvalidArgument) {
			t.Fatalf("negative grace: %v", err)
		}

		r.fb.Fail("Acquire", noLeader)
		if _, err := s.Lock(context.Background(), "a"); !errors.Is(err, api.ErrNoLeader) {
			t.Fatalf("Lock = %v, want the backend's no_leader", err)
		}
		reqs := r.fb.Calls("Acquire")
		if reqs != 1 || len(r.holders("a")) != 0 {
			t.Fatalf("%d acquire requests, holders %+v; want 1 and none", reqs, r.holders("a"))
		}
		if !s.Safe() {
			t.Fatalf("state %v after a failed call, want Safe", s.State())
		}
	})
}

// ---- locks ----

// A waiting Lock is a series of requests with one holder id: a poll slice
// that ends and a wait_timeout answer re-issue it, and the one grant it
// gets is the lock's.
func TestLockReissuesWithSameHolderAndOneGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		s := r.open(TTL(60 * time.Second))
		s0 := r.open(TTL(60 * time.Second))
		l0, err := s0.TryLock(context.Background(), "jobs/a")
		if err != nil {
			t.Fatal(err)
		}
		before, grantsBefore := r.fb.Calls("Acquire"), r.fb.Grants()
		type res struct {
			l   *Lock
			err error
		}
		done := make(chan res, 1)
		go func() {
			l, err := s.Lock(context.Background(), "jobs/a", Value("me"))
			done <- res{l, err}
		}()
		synctest.Wait() // the first request waits in the fake
		r.fb.Fail("Acquire", api.Errorf(api.CodeWaitTimeout, "wait timed out"))
		// The first request's slice ends; the second is answered
		// wait_timeout; the third waits.
		r.runTo(s, r.fc.Now().Add(lockPollSlice))
		if err := l0.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := <-done
		if got.err != nil {
			t.Fatal(got.err)
		}
		reqs := requests[api.AcquireRequest](r.fb, "Acquire")[before:]
		grants := r.fb.Grants() - grantsBefore
		if len(reqs) != 3 {
			t.Fatalf("%d acquire requests, want 3", len(reqs))
		}
		holder := reqs[0].Holder
		if b, err := hex.DecodeString(holder); err != nil || len(b) != 16 {
			t.Fatalf("holder %q is not 128-bit hex", holder)
		}
		for i, q := range reqs {
			if q.Holder != holder || q.Session != s.ID() || q.Name != "jobs/a" || q.Mode != sequencer.Exclusive || q.Value != "me" {
				t.Fatalf("request %d = %+v, want same holder %s", i, q, holder)
			}
			if q.Wait != api.MaxWait {
				t.Fatalf("request %d wait %v, want %v (a wait with no deadline keeps its place for MaxWait per request)", i, q.Wait, api.MaxWait)
			}
		}
		if grants != 1 {
			t.Fatalf("%d grants, want exactly 1", grants)
		}
		st := r.fb.Peek("jobs/a")
		hs := st.Holders
		if len(hs) != 1 || hs[0].Holder != holder {
			t.Fatalf("holders %+v", hs)
		}
		l := got.l
		grant := sequencer.Sequencer{Name: st.Name, Mode: st.Mode, Token: hs[0].Token}
		if l.Token() != grant.Token || l.Sequencer() != grant || l.Name() != "jobs/a" || l.Holder() != holder || l.Value() != "me" || l.Mode() != sequencer.Exclusive {
			t.Fatalf("lock %+v does not match grant %+v", l, grant)
		}
		if l.Sequencer().String() != fmt.Sprintf("rl1:x:%d:jobs/a", l.Token()) {
			t.Fatalf("sequencer %s", l.Sequencer())
		}
		// A second handle gets a fresh holder id.
		if err := l.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
		l2, err := s.TryLock(context.Background(), "jobs/a")
		if err != nil {
			t.Fatal(err)
		}
		if l2.Holder() == holder || l2.Token() <= l.Token() {
			t.Fatalf("second handle holder %s token %d", l2.Holder(), l2.Token())
		}
	})
}

func TestLockWaitBoundedByDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		s := r.open(TTL(60 * time.Second))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := s.Lock(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		w := requests[api.AcquireRequest](r.fb, "Acquire")[0].Wait
		if w <= 0 || w > 10*time.Second {
			t.Fatalf("wait %v, want within the ctx deadline", w)
		}
	})
}

func TestTryLockBusyAndSharedModes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		s1, s2 := r.open(TTL(60*time.Second)), r.open(TTL(60*time.Second))
		ctx := context.Background()
		a, err := s1.Lock(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s2.TryLock(ctx, "a"); !errors.Is(err, api.ErrLockBusy) || api.CodeOf(err) != api.CodeLockBusy {
			t.Fatalf("TryLock of a held lock: %v, want lock_busy", err)
		}
		if _, err := s2.TryRLock(ctx, "a"); !errors.Is(err, api.ErrLockBusy) {
			t.Fatalf("TryRLock of an exclusively held lock: %v", err)
		}
		r1, err := s1.RLock(ctx, "b")
		if err != nil {
			t.Fatal(err)
		}
		r2, err := s2.TryRLock(ctx, "b")
		if err != nil {
			t.Fatalf("second reader: %v", err)
		}
		if r1.Mode() != sequencer.Shared || r2.Sequencer().Mode != sequencer.Shared {
			t.Fatal("shared grant not in shared mode")
		}
		// (By a third session: s1 and s2 hold b, so theirs is already_held.)
		if _, err := r.open(TTL(60*time.Second)).TryLock(ctx, "b"); !errors.Is(err, api.ErrLockBusy) {
			t.Fatalf("TryLock of a shared lock: %v", err)
		}
		for _, q := range requests[api.AcquireRequest](r.fb, "Acquire") {
			if q.Name == "a" && q.Session == s2.ID() && q.Wait != 0 {
				t.Errorf("try-acquire sent wait %v", q.Wait)
			}
		}
		// A waiting Lock is granted when the holder unlocks.
		got := make(chan *Lock, 1)
		go func() {
			l, err := s2.Lock(ctx, "a")
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		eventually(t, "waiter to queue", func() bool { return r.fb.Waiting("Acquire") == 1 })
		if err := a.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if l := <-got; l == nil || l.Token() <= a.Token() {
			t.Fatalf("waiter got %v", l)
		}
	})
}

func TestLockCancelReturnsPromptly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		s1, s2 := r.open(TTL(60*time.Second)), r.open(TTL(60*time.Second))
		if _, err := s1.Lock(context.Background(), "a"); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := s2.Lock(ctx, "a")
			errc <- err
		}()
		eventually(t, "waiter to queue", func() bool { return r.fb.Waiting("Acquire") == 1 })
		cancel()
		select {
		case err := <-errc:
			if err != context.Canceled {
				t.Fatalf("Lock after cancel = %v, want context.Canceled", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Lock did not return after cancel")
		}
		if hs := r.holders("a"); len(hs) != 1 || hs[0].SessionHandle != s1.Handle() {
			t.Fatalf("holders %+v", hs)
		}
	})
}

func TestLockFailsWhenSessionExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		s1 := r.open(TTL(60 * time.Second))
		s2 := r.open(TTL(3*time.Second), GracePeriod(time.Second))
		if _, err := s1.Lock(context.Background(), "a"); err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() {
			_, err := s2.Lock(context.Background(), "a")
			errc <- err
		}()
		eventually(t, "waiter to queue", func() bool { return r.fb.Waiting("Acquire") == 1 })
		r.setKA(kaBehavior{err: api.Errorf(api.CodeNoLeader, "no leader")})
		r.runTo(s2, at(4*time.Second))
		select {
		case err := <-errc:
			if !errors.Is(err, api.ErrSessionNotFound) {
				t.Fatalf("Lock on expired session = %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Lock did not return after session expiry")
		}
	})
}

func TestCloseLosesLocksAndClosesSessionOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		s := r.open(TTL(60 * time.Second))
		ctx := context.Background()
		a, err := s.Lock(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.RLock(ctx, "b")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(ctx); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if !isClosed(a.Lost()) || !isClosed(b.Lost()) {
			t.Fatal("Lost not closed by Close")
		}
		if !isClosed(s.Done()) || r.fc.Waiters() != 0 {
			t.Fatal("keepalive loop still running after Close returned")
		}
		if s.State() != Closed {
			t.Fatalf("state %v", s.State())
		}
		var evs []Event
		for ev := range s.Events() {
			evs = append(evs, ev)
		}
		if st := states(evs); !equalStates(st, []State{Closed}) {
			t.Fatalf("events %v", st)
		}
		_, releases, closes := r.counts()
		if closes != 1 {
			t.Fatalf("CloseSession called %d times, want 1", closes)
		}
		if len(r.holders("a"))+len(r.holders("b")) != 0 {
			t.Fatal("locks still held after Close")
		}
		if err := a.Unlock(ctx); err != nil {
			t.Fatalf("Unlock after Close: %v", err)
		}
		if _, r2, _ := r.counts(); r2 != releases {
			t.Fatal("Unlock after Close called Release")
		}
		if _, err := s.Lock(ctx, "c"); !errors.Is(err, api.ErrSessionNotFound) {
			t.Fatalf("Lock after Close: %v", err)
		}
	})
}

func TestUnlockIdempotent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		s1, s2 := r.open(TTL(60*time.Second)), r.open(TTL(60*time.Second))
		ctx := context.Background()
		l, err := s1.Lock(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if isClosed(l.Lost()) {
			t.Fatal("Lost closed while held")
		}
		for i := 0; i < 3; i++ {
			if err := l.Unlock(ctx); err != nil {
				t.Fatalf("Unlock #%d: %v", i+1, err)
			}
		}
		if !isClosed(l.Lost()) {
			t.Fatal("Lost not closed by Unlock")
		}
		if _, releases, _ := r.counts(); releases != 1 {
			t.Fatalf("Release called %d times, want 1", releases)
		}
		if _, err := s2.TryLock(ctx, "a"); err != nil {
			t.Fatalf("lock not free after Unlock: %v", err)
		}
	})
}

// A failed Unlock leaves the lock the session's, and may be called again.
func TestUnlockAfterAFailedUnlockReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		s := r.open(TTL(60 * time.Second))
		ctx := context.Background()
		l, err := s.Lock(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		// The next Release fails with no_leader (as a Backend reports it
		// when ctx ends before a leader answers).
		r.fb.Fail("Release", api.Errorf(api.CodeNoLeader, "no leader"))
		if err := l.Unlock(ctx); !errors.Is(err, api.ErrNoLeader) {
			t.Fatalf("Unlock = %v, want the backend's no_leader", err)
		}
		if len(r.holders("a")) != 1 {
			t.Fatal("lock released by a failed Release")
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if len(r.holders("a")) != 0 {
			t.Fatal("lock still held")
		}
		if _, releases, _ := r.counts(); releases != 2 {
			t.Fatalf("Release called %d times, want 2", releases)
		}
	})
}

func TestStateString(t *testing.T) {
	for st, want := range map[State]string{Safe: "safe", Jeopardy: "jeopardy", Expired: "expired", Closed: "closed", State(9): "state(9)"} {
		if st.String() != want {
			t.Errorf("%d.String() = %q, want %q", int(st), st.String(), want)
		}
	}
}

// ---- when Lost closes: lease end + lock-delay − margin ----

func TestLostAfterIsLeasePlusLockDelayMinusMargin(t *testing.T) {
	for _, c := range []struct {
		ttl, delay, margin time.Duration
	}{
		{3 * time.Second, 10 * time.Second, 230 * time.Millisecond},
		{3 * time.Second, 0, 130 * time.Millisecond},
		{15 * time.Second, 60 * time.Second, 850 * time.Millisecond},
		{time.Second, 0, 110 * time.Millisecond},
	} {
		if got := LostMargin(c.ttl, c.delay); got != c.margin {
			t.Errorf("LostMargin(%v, %v) = %v, want %v", c.ttl, c.delay, got, c.margin)
		}
		if got, want := LostAfter(c.ttl, c.delay), c.ttl+c.delay-c.margin; got != want {
			t.Errorf("LostAfter(%v, %v) = %v, want %v", c.ttl, c.delay, got, want)
		}
	}
}

// lostTimeline opens a session with ttl 3s, the given lock-delay and a 30s
// grace period, takes a lock, lets every keepalive hang from the start and
// returns the lock once the clock stands just before want.
func lostTimeline(t *testing.T, delay time.Duration, want time.Duration) (*rig, *Session, *Lock) {
	t.Helper()
	r := newRig(t)
	s := r.open(TTL(3*time.Second), LockDelay(delay), GracePeriod(30*time.Second))
	l, err := s.Lock(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	r.setKA(kaBehavior{hang: true})
	r.runTo(s, at(want-time.Nanosecond))
	if isClosed(l.Lost()) {
		t.Fatalf("Lost closed before t0+%v", want)
	}
	if got := s.LostDeadline(); !got.Equal(at(want)) {
		t.Fatalf("LostDeadline t0+%v, want t0+%v", got.Sub(t0), want)
	}
	return r, s, l
}

func TestLostClosesAtLeaseEndPlusLockDelayMinusMargin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// ttl 3s, lock-delay 10s: the cluster may re-grant at 13s; Lost closes
		// 230ms (1% + 100ms) before, long before the 30s grace period ends.
		want := 13*time.Second - 230*time.Millisecond
		r, s, l := lostTimeline(t, 10*time.Second, want)
		if s.State() != Jeopardy {
			t.Fatalf("state %v before Lost, want jeopardy", s.State())
		}
		r.runTo(s, at(want))
		if !isClosed(l.Lost()) {
			t.Fatalf("Lost still open at t0+%v", want)
		}
		if s.State() != Jeopardy {
			t.Fatalf("state %v after Lost, want jeopardy (the session lives on until the grace period ends)", s.State())
		}
	})
}

func TestLostClosesByLeaseEndWithoutLockDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// No lock-delay: the cluster may re-grant at lease end (3s); Lost and
		// jeopardy come together, the margin (1% + 100ms) before it.
		want := 3*time.Second - 130*time.Millisecond
		r, s, l := lostTimeline(t, api.NoLockDelay, want)
		if s.State() != Safe {
			t.Fatalf("state %v before Lost, want safe", s.State())
		}
		r.runTo(s, at(want))
		if !isClosed(l.Lost()) || s.State() != Jeopardy {
			t.Fatalf("at t0+%v: lost=%v state=%v, want lost in jeopardy", want, isClosed(l.Lost()), s.State())
		}
	})
}

func TestLostCountsFromSendTimeOfLastAcknowledgedKeepAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		s := r.open(TTL(3*time.Second), LockDelay(10*time.Second), GracePeriod(30*time.Second))
		l, err := s.Lock(context.Background(), "a")
		if err != nil {
			t.Fatal(err)
		}
		r.runTo(s, at(time.Second)) // the keepalive sent at 1s is acknowledged
		r.setKA(kaBehavior{hang: true})
		want := time.Second + 13*time.Second - 230*time.Millisecond
		r.runTo(s, at(want-time.Nanosecond))
		if isClosed(l.Lost()) {
			t.Fatal("Lost closed before the lease of the last acknowledged keepalive plus lock-delay")
		}
		r.runTo(s, at(want))
		if !isClosed(l.Lost()) {
			t.Fatalf("Lost open at t0+%v", want)
		}
	})
}

func TestLostLockStaysLostAndIsReleasedWhenSessionRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		want := 13*time.Second - 230*time.Millisecond
		r, s, l := lostTimeline(t, 10*time.Second, want)
		r.runTo(s, at(want))
		if !isClosed(l.Lost()) {
			t.Fatal("Lost open")
		}
		// A grant that arrives while the lease is lapsed is lost at once.
		late, err := s.TryLock(context.Background(), "b")
		if err != nil {
			t.Fatal(err)
		}
		if !isClosed(late.Lost()) {
			t.Fatal("a grant received after the lease lapsed has Lost open")
		}
		r.setKA(kaBehavior{}) // the partition heals; the session is alive
		r.runTo(s, at(14*time.Second))
		if s.State() != Safe {
			t.Fatalf("state %v after an acknowledged keepalive, want safe", s.State())
		}
		if !isClosed(l.Lost()) {
			t.Fatal("a lost lock came back")
		}
		eventually(t, "the lost grants to be released", func() bool {
			return len(r.holders("a")) == 0 && len(r.holders("b")) == 0
		})
		released := map[string]string{}
		for _, rel := range requests[api.ReleaseRequest](r.fb, "Release") {
			released[rel.Name] = rel.Holder
		}
		if released["a"] != l.Holder() || released["b"] != late.Holder() {
			t.Fatalf("released %v, want a by %s and b by %s", released, l.Holder(), late.Holder())
		}
		// The session is usable again: a new grant is trusted.
		again, err := s.TryLock(context.Background(), "a")
		if err != nil {
			t.Fatal(err)
		}
		if isClosed(again.Lost()) {
			t.Fatal("a grant after recovery has Lost closed")
		}
		if err := l.Unlock(context.Background()); err != nil {
			t.Fatalf("Unlock of a lost, released lock: %v", err)
		}
	})
}

// abandonRig opens a holder of "a" and a second session (ttl 3 s) whose
// Lock of "a" is abandoned while the fake's Release calls hang, as they do
// while the cluster has no quorum: the abandoned place stays queued.
// outage turns the hang off when set to false.
func abandonRig(t *testing.T) (r *rig, holder *Lock, waiter *Session, outage *atomic.Bool) {
	r = newRig(t)
	outage = new(atomic.Bool)
	outage.Store(true)
	r.fb.SetHook(func(ctx context.Context, c apitest.Call) error {
		if c.Method != "Release" || !outage.Load() {
			return nil
		}
		<-ctx.Done()
		return ctx.Err()
	})
	s1 := r.open(TTL(60 * time.Second))
	waiter = r.open(TTL(3 * time.Second))
	holder, err := s1.Lock(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := waiter.Lock(ctx, "a")
		errc <- err
	}()
	eventually(t, "waiter to queue", func() bool { return r.fb.Waiting("Acquire") == 1 })
	cancel()
	if err := <-errc; err != context.Canceled {
		t.Fatalf("Lock after cancel = %v, want context.Canceled", err)
	}
	r.settle(waiter)
	return r, holder, waiter, outage
}

func TestAbandonedPlaceIsReleasedAfterAnOutageLongerThanTheTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, holder, waiter, outage := abandonRig(t)
		start := r.fc.Now()
		// Seven TTLs of outage: each attempt ends at its 3 s bound, and
		// the pause after it doubles from ttl/10 up to the ttl.
		r.runTo(waiter, start.Add(21*time.Second))
		var gaps []time.Duration
		calls := r.fb.Log("Release")
		for i := 1; i < len(calls); i++ {
			gaps = append(gaps, calls[i].At.Sub(calls[i-1].At))
		}
		want := []time.Duration{3300 * time.Millisecond, 3600 * time.Millisecond, 4200 * time.Millisecond, 5400 * time.Millisecond}
		if len(gaps) < len(want) {
			t.Fatalf("%d release attempts in 21 s of outage (gaps %v), want at least %d", len(calls), gaps, len(want)+1)
		}
		for i, w := range want {
			if gaps[i] != w {
				t.Fatalf("gaps between release attempts %v, want %v first", gaps, want)
			}
		}
		if st := r.fb.Peek("a"); st.Waiters != 1 {
			t.Fatalf("%d waiters during the outage, want the abandoned place", st.Waiters)
		}
		outage.Store(false) // quorum is back
		r.runTo(waiter, start.Add(30*time.Second))
		if st := r.fb.Peek("a"); st.Waiters != 0 {
			t.Fatalf("%d waiters after the outage: the abandoned place was not released", st.Waiters)
		}
		n := r.fb.Calls("Release")
		if err := holder.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
		if hs := r.holders("a"); len(hs) != 0 {
			t.Fatalf("the lock went to %+v after its holder released it, want it free", hs)
		}
		// Released: no more attempts.
		r.runTo(waiter, start.Add(60*time.Second))
		if got := r.fb.Calls("Release"); got != n+1 {
			t.Fatalf("%d Release calls after the place was released, want only the holder's Unlock", got-n)
		}
	})
}

func TestAbandonedReleaseStopsWhenTheSessionCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _, waiter, _ := abandonRig(t)
		start := r.fc.Now()
		r.runTo(waiter, start.Add(10*time.Second))
		if r.fb.Calls("Release") < 2 {
			t.Fatalf("%d release attempts in 10 s of outage, want retries", r.fb.Calls("Release"))
		}
		if err := waiter.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		// Close waited for the session's goroutines: the retry loop is
		// gone (the bubble would not end otherwise), and nothing calls.
		n := r.fb.Calls("Release")
		r.runTo(waiter, start.Add(60*time.Second))
		if got := r.fb.Calls("Release"); got != n {
			t.Fatalf("%d Release calls after Close", got-n)
		}
	})
}

func TestAbandonedReleaseStopsAtTheClustersAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _, waiter, outage := abandonRig(t)
		start := r.fc.Now()
		r.runTo(waiter, start.Add(3100*time.Millisecond)) // the first attempt was cut at 3 s
		outage.Store(false)
		r.fb.Fail("Release", api.Errorf(api.CodeNotHolder, "not the holder"))
		r.runTo(waiter, start.Add(60*time.Second))
		if got := r.fb.Calls("Release"); got != 2 {
			t.Fatalf("%d Release calls, want 2: one cut by the outage, one answered not_holder", got)
		}
	})
}

// A session id is a secret: no error the client returns, nor the cause of
// its expiry, may contain it (they name the session by its handle).
func TestErrorsNeverContainTheSessionID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		s := r.open(TTL(3*time.Second), GracePeriod(2*time.Second))
		id := s.ID()
		r.setKA(kaBehavior{err: errors.New("connection refused")})
		r.runTo(s, at(10*time.Second)) // lease and grace over: expired
		if s.State() != Expired {
			t.Fatalf("state %v, want expired", s.State())
		}
		var errs []error
		for _, e := range drain(s) {
			errs = append(errs, e.Err)
		}
		_, err := s.TryLock(context.Background(), "a")
		errs = append(errs, err)
		_, err = s.Lock(context.Background(), "a")
		errs = append(errs, err)
		if len(errs) < 3 || errs[len(errs)-1] == nil {
			t.Fatalf("errors %v: want the expiry's cause and two refusals", errs)
		}
		for _, err := range errs {
			if err != nil && strings.Contains(err.Error(), id) {
				t.Errorf("error %q contains the session id", err)
			}
		}
	})
}
