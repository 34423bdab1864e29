package session

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftlock/raftlock/session/api"

	"github.com/raftlock/raftlock/sequencer"
)

// ---- a fake in-memory Backend driven by a Clock ----

// kaBehavior is what the fake's KeepAlive does; it is read when a call starts.
type kaBehavior struct {
	err  error         // answer with this error
	hang bool          // block until the call's ctx is done
	gate chan struct{} // block until gate is closed, then answer normally
}

type fakeSession struct {
	ttl      time.Duration
	deadline time.Time
}

type fakeHolder struct {
	session, holder, value string
	grant                  api.Grant
}

type fakeLock struct {
	mode    sequencer.Mode
	holders []fakeHolder
}

// acquireFault is injected into one Acquire call.
type acquireFault struct {
	err   error
	apply bool // apply the request before answering err
}

type fakeBackend struct {
	clock Clock

	mu         sync.Mutex
	sessions   map[string]*fakeSession
	locks      map[string]*fakeLock
	index      uint64
	changed    chan struct{} // closed and replaced on every lock change
	ka         kaBehavior
	kaTimes    []time.Time
	openFaults []error
	acqFaults  []acquireFault
	relFaults  []error
	// watchFaults are answered by the next WatchLock calls, one each.
	watchFaults []error
	watchCalls  int
	// expire makes sessions whose deadline passed unknown (the fake does not
	// extend deadlines across a leader change as a real cluster does).
	expire   bool
	acqReqs  []api.AcquireRequest
	grants   int
	releases []api.ReleaseRequest
	closes   []string
	waiting  int

	kaBlocked atomic.Int64
}

func newFakeBackend(c Clock) *fakeBackend {
	return &fakeBackend{clock: c, sessions: map[string]*fakeSession{}, locks: map[string]*fakeLock{}, changed: make(chan struct{})}
}

func (f *fakeBackend) notifyLocked() {
	f.index++ // every change moves the (global) index, as a Raft entry would
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeBackend) setKA(b kaBehavior) {
	f.mu.Lock()
	f.ka = b
	f.mu.Unlock()
}

func (f *fakeBackend) keepAliveTimes() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.kaTimes...)
}

func (f *fakeBackend) counts() (grants, releases, closes int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.grants, len(f.releases), len(f.closes)
}

func (f *fakeBackend) dropSession(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.sessions, id)
	f.releaseSessionLocked(id)
}

// liveLocked returns the session if it exists and its deadline has not passed.
func (f *fakeBackend) liveLocked(id string) (*fakeSession, error) {
	s, ok := f.sessions[id]
	if !ok || (f.expire && !f.clock.Now().Before(s.deadline)) {
		return nil, api.Errorf(api.CodeSessionNotFound, "session %q not found", id)
	}
	return s, nil
}

func (f *fakeBackend) releaseSessionLocked(id string) {
	for name, l := range f.locks {
		kept := l.holders[:0]
		for _, h := range l.holders {
			if h.session != id {
				kept = append(kept, h)
			}
		}
		l.holders = kept
		if len(kept) == 0 {
			delete(f.locks, name)
		}
	}
	f.notifyLocked()
}

func (f *fakeBackend) OpenSession(ctx context.Context, req api.OpenRequest) (api.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.openFaults) > 0 {
		err := f.openFaults[0]
		f.openFaults = f.openFaults[1:]
		return api.Info{}, err
	}
	ttl := req.TTL
	if ttl == 0 {
		ttl = api.DefaultTTL
	}
	delay := req.LockDelay // as the cluster grants it
	switch delay {
	case 0:
		delay = api.DefaultLockDelay
	case api.NoLockDelay:
		delay = 0
	}
	id := fmt.Sprintf("s%d", len(f.sessions)+len(f.closes)+1)
	f.sessions[id] = &fakeSession{ttl: ttl, deadline: f.clock.Now().Add(ttl)}
	return api.Info{ID: id, Name: req.Name, TTL: ttl, LockDelay: delay}, nil
}

func (f *fakeBackend) KeepAlive(ctx context.Context, id string) (time.Duration, error) {
	f.mu.Lock()
	f.kaTimes = append(f.kaTimes, f.clock.Now())
	b := f.ka
	f.mu.Unlock()
	switch {
	case b.err != nil:
		return 0, b.err
	case b.hang:
		f.kaBlocked.Add(1)
		defer f.kaBlocked.Add(-1)
		<-ctx.Done()
		return 0, ctx.Err()
	case b.gate != nil:
		f.kaBlocked.Add(1)
		select {
		case <-b.gate:
			f.kaBlocked.Add(-1)
		case <-ctx.Done():
			f.kaBlocked.Add(-1)
			return 0, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.liveLocked(id)
	if err != nil {
		return 0, err
	}
	s.deadline = f.clock.Now().Add(s.ttl)
	return s.ttl, nil
}

func (f *fakeBackend) CloseSession(ctx context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closes = append(f.closes, id)
	if _, ok := f.sessions[id]; !ok {
		return api.Errorf(api.CodeSessionNotFound, "session %q not found", id)
	}
	delete(f.sessions, id)
	f.releaseSessionLocked(id)
	return nil
}

func (f *fakeBackend) SessionInfo(ctx context.Context, id string) (api.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.liveLocked(id)
	if err != nil {
		return api.Info{}, err
	}
	return api.Info{ID: id, TTL: s.ttl}, nil
}

// tryGrantLocked grants req if possible (or returns the existing grant of
// the same holder).
func (f *fakeBackend) tryGrantLocked(req api.AcquireRequest) (api.Grant, bool) {
	l := f.locks[req.Name]
	if l != nil {
		for _, h := range l.holders {
			if h.session == req.Session && h.holder == req.Holder {
				return h.grant, true
			}
		}
		if req.Mode == sequencer.Exclusive || l.mode == sequencer.Exclusive {
			return api.Grant{}, false
		}
	} else {
		l = &fakeLock{mode: req.Mode}
		f.locks[req.Name] = l
	}
	f.index++
	f.grants++
	tok := sequencer.Token(f.index)
	g := api.Grant{Name: req.Name, Mode: req.Mode, Token: tok, Sequencer: sequencer.Sequencer{Name: req.Name, Mode: req.Mode, Token: tok}, Term: 1}
	l.holders = append(l.holders, fakeHolder{session: req.Session, holder: req.Holder, value: req.Value, grant: g})
	f.notifyLocked()
	return g, true
}

func (f *fakeBackend) Acquire(ctx context.Context, req api.AcquireRequest) (api.Grant, error) {
	f.mu.Lock()
	f.acqReqs = append(f.acqReqs, req)
	if len(f.acqFaults) > 0 {
		fault := f.acqFaults[0]
		f.acqFaults = f.acqFaults[1:]
		if fault.apply {
			f.tryGrantLocked(req)
		}
		f.mu.Unlock()
		return api.Grant{}, fault.err
	}
	for {
		if _, err := f.liveLocked(req.Session); err != nil {
			f.mu.Unlock()
			return api.Grant{}, err
		}
		if g, ok := f.tryGrantLocked(req); ok {
			f.mu.Unlock()
			return g, nil
		}
		if req.Wait == 0 {
			f.mu.Unlock()
			return api.Grant{}, api.Errorf(api.CodeLockBusy, "lock %q is busy", req.Name)
		}
		ch := f.changed
		f.waiting++
		f.mu.Unlock()
		select {
		case <-ch:
			f.mu.Lock()
			f.waiting--
		case <-ctx.Done():
			f.mu.Lock()
			f.waiting--
			f.mu.Unlock()
			return api.Grant{}, ctx.Err()
		}
	}
}

func (f *fakeBackend) Release(ctx context.Context, req api.ReleaseRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.releases = append(f.releases, req)
	if len(f.relFaults) > 0 {
		err := f.relFaults[0]
		f.relFaults = f.relFaults[1:]
		return err
	}
	l := f.locks[req.Name]
	if l != nil {
		for i, h := range l.holders {
			if h.session == req.Session && h.holder == req.Holder {
				l.holders = append(l.holders[:i], l.holders[i+1:]...)
				if len(l.holders) == 0 {
					delete(f.locks, req.Name)
				}
				f.notifyLocked()
				return nil
			}
		}
	}
	return api.Errorf(api.CodeNotHolder, "not a holder of %q", req.Name)
}

func (f *fakeBackend) holders(name string) []fakeHolder {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l := f.locks[name]; l != nil {
		return append([]fakeHolder(nil), l.holders...)
	}
	return nil
}

// lockStateLocked describes a lock; the fake's index is global.
func (f *fakeBackend) lockStateLocked(name string) api.LockState {
	st := api.LockState{Name: name, Holders: []api.Holder{}, Index: f.index}
	if l := f.locks[name]; l != nil {
		st.Mode = l.mode
		for _, h := range l.holders {
			st.Holders = append(st.Holders, api.Holder{Session: h.session, Holder: h.holder, Token: h.grant.Token, Value: h.value})
		}
	}
	return st
}

func (f *fakeBackend) LockState(ctx context.Context, name string) (api.LockState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lockStateLocked(name), nil
}

// WatchLock blocks on the fake's change channel; watchFaults are answered
// first, one per call.
func (f *fakeBackend) WatchLock(ctx context.Context, name string, index uint64, wait time.Duration) (api.LockState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.watchCalls++
	if len(f.watchFaults) > 0 {
		err := f.watchFaults[0]
		f.watchFaults = f.watchFaults[1:]
		return api.LockState{}, err
	}
	for {
		st := f.lockStateLocked(name)
		if index == 0 || st.Index > index {
			return st, nil
		}
		ch := f.changed
		f.mu.Unlock()
		select {
		case <-ch:
			f.mu.Lock()
		case <-ctx.Done():
			f.mu.Lock()
			return api.LockState{}, ctx.Err()
		}
	}
}
func (f *fakeBackend) Locks(ctx context.Context, prefix string) ([]api.LockState, error) {
	return nil, api.Errorf(api.CodeInternal, "not implemented")
}
func (f *fakeBackend) CheckSequencer(ctx context.Context, seq string) (api.SequencerCheck, error) {
	return api.SequencerCheck{}, api.Errorf(api.CodeInternal, "not implemented")
}

var _ api.Backend = (*fakeBackend)(nil)

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

type rig struct {
	t  *testing.T
	fc *FakeClock
	fb *fakeBackend
}

func newRig(t *testing.T) *rig {
	fc := NewFakeClock(t0)
	return &rig{t: t, fc: fc, fb: newFakeBackend(fc)}
}

func (r *rig) open(opts ...Option) *Session {
	r.t.Helper()
	s, err := Open(context.Background(), r.fb, append([]Option{WithClock(r.fc)}, opts...)...)
	if err != nil {
		r.t.Fatalf("Open: %v", err)
	}
	r.t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// settled reports whether s's keepalive loop is parked in its select with
// every keepalive it sent either answered and handled or parked in the fake
// backend, so that advancing the clock cannot race with the loop.
func (r *rig) settled(s *Session) bool {
	select {
	case <-s.Done():
		return true
	default:
	}
	p := &s.probe
	p.mu.Lock()
	parked1, gen1, pending, timer := p.parked, p.gen, p.sent-p.handled, p.timer
	p.mu.Unlock()
	if !parked1 {
		return false
	}
	// The loop's timer must be armed, not fired and waiting to be received.
	ft := timer.(*fakeTimer)
	r.fc.mu.Lock()
	_, armed := r.fc.armed[ft]
	r.fc.mu.Unlock()
	blocked := uint64(r.fb.kaBlocked.Load())
	p.mu.Lock()
	parked2, gen2 := p.parked, p.gen
	p.mu.Unlock()
	return armed && len(ft.ch) == 0 && parked2 && gen1 == gen2 && pending == blocked
}

func (r *rig) settle(s *Session) {
	r.t.Helper()
	eventually(r.t, "keepalive loop to settle", func() bool { return r.settled(s) })
}

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
	r := newRig(t)
	s := r.open(TTL(3 * time.Second))
	if s.TTL() != 3*time.Second || s.ID() == "" || !s.Safe() {
		t.Fatalf("TTL=%v ID=%q Safe=%v", s.TTL(), s.ID(), s.Safe())
	}
	r.runTo(s, at(6500*time.Millisecond))
	got := r.fb.keepAliveTimes()
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
}

func TestLeaseCountedFromSendTime(t *testing.T) {
	r := newRig(t)
	gate := make(chan struct{})
	r.fb.setKA(kaBehavior{gate: gate})
	s := r.open(TTL(3*time.Second), GracePeriod(10*time.Second))
	// The keepalive sent at t0+1s is acknowledged only at t0+1.9s.
	r.runTo(s, at(1900*time.Millisecond))
	if n := len(r.fb.keepAliveTimes()); n != 1 {
		t.Fatalf("%d keepalives, want 1", n)
	}
	r.fb.setKA(kaBehavior{err: api.Errorf(api.CodeNoLeader, "no leader")})
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
}

func TestJeopardyThenRecoveryWithinGrace(t *testing.T) {
	r := newRig(t)
	var cb []State
	var cbMu sync.Mutex
	s := r.open(TTL(3*time.Second), GracePeriod(5*time.Second), OnEvent(func(e Event) {
		cbMu.Lock()
		cb = append(cb, e.State)
		cbMu.Unlock()
	}))
	r.fb.setKA(kaBehavior{err: errors.New("connection refused")})
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
	before := len(r.fb.keepAliveTimes())
	r.runTo(s, at(4*time.Second))
	kas := r.fb.keepAliveTimes()[before:]
	if len(kas) < 3 {
		t.Fatalf("only %d keepalive retries in 1s of jeopardy", len(kas))
	}
	for i := 1; i < len(kas); i++ {
		if d := kas[i].Sub(kas[i-1]); d != 300*time.Millisecond {
			t.Fatalf("jeopardy retry interval %v, want ttl/10 = 300ms", d)
		}
	}
	r.fb.setKA(kaBehavior{})
	r.runTo(s, at(4400*time.Millisecond))
	if !s.Safe() {
		t.Fatalf("state %v after ack within grace, want safe", s.State())
	}
	last := r.fb.keepAliveTimes()
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
}

func TestJeopardyPastGraceExpires(t *testing.T) {
	r := newRig(t)
	s := r.open(TTL(3*time.Second), GracePeriod(2*time.Second))
	ctx := context.Background()
	l, err := s.Lock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	r.fb.setKA(kaBehavior{hang: true})
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
	eventually(t, "hung keepalives to be cancelled", func() bool { return r.fb.kaBlocked.Load() == 0 })
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
}

func TestSessionNotFoundExpiresAtOnce(t *testing.T) {
	r := newRig(t)
	s := r.open(TTL(30 * time.Second))
	l, err := s.TryLock(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	r.fb.dropSession(s.ID())
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
	if _, _, closes := r.fb.counts(); closes != 0 {
		t.Fatalf("CloseSession called %d times for a session the server lost", closes)
	}
}

func TestCloseWhileKeepAliveHangs(t *testing.T) {
	r := newRig(t)
	s := r.open(TTL(3 * time.Second))
	r.fb.setKA(kaBehavior{hang: true})
	r.runTo(s, at(1*time.Second))
	if r.fb.kaBlocked.Load() != 1 {
		t.Fatal("keepalive not hanging")
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := r.fb.kaBlocked.Load(); n != 0 {
		t.Fatalf("%d keepalives still running after Close", n)
	}
	if n := r.fc.Waiters(); n != 0 {
		t.Fatalf("%d timers armed after Close", n)
	}
}

func TestOnEventMayCloseSession(t *testing.T) {
	r := newRig(t)
	var sp atomic.Pointer[Session]
	closed := make(chan error, 1)
	s := r.open(TTL(3*time.Second), OnEvent(func(e Event) {
		if e.State == Jeopardy {
			closed <- sp.Load().Close(context.Background())
		}
	}))
	sp.Store(s)
	r.fb.setKA(kaBehavior{err: api.Errorf(api.CodeNoLeader, "no leader")})
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

func TestOpenRetriesTransientErrors(t *testing.T) {
	r := newRig(t)
	r.fb.openFaults = []error{api.Errorf(api.CodeNoLeader, "no leader"), errors.New("connection reset")}
	done := make(chan *Session, 1)
	go func() {
		s, err := Open(context.Background(), r.fb, WithClock(r.fc), TTL(3*time.Second))
		if err != nil {
			t.Error(err)
		}
		done <- s
	}()
	for i := 0; i < 2; i++ {
		r.fc.BlockUntil(1)
		r.fc.Advance(time.Second)
	}
	s := <-done
	if s == nil {
		return
	}
	defer s.Close(context.Background())
	// The lease counts from the successful open's send time.
	s.mu.Lock()
	end := s.leaseEnd
	s.mu.Unlock()
	if !end.Equal(at(2*time.Second + 3*time.Second)) {
		t.Fatalf("lease end %v", end.Sub(t0))
	}
	r.fb.openFaults = nil
	if _, err := Open(context.Background(), r.fb, GracePeriod(-1)); !errors.Is(err, api.ErrInvalidArgument) {
		t.Fatalf("negative grace: %v", err)
	}
}

// ---- locks ----

func TestLockRetriesWithSameHolderAndOneGrant(t *testing.T) {
	r := newRig(t)
	s := r.open(TTL(60 * time.Second))
	r.fb.mu.Lock()
	r.fb.acqFaults = []acquireFault{
		{err: api.Errorf(api.CodeNoLeader, "no leader")},
		{err: errors.New("read tcp: connection reset by peer")},
		{err: api.Errorf(api.CodeWaitTimeout, "wait timed out")},
		{err: api.Errorf(api.CodeUnknownOutcome, "leadership lost"), apply: true},
		{err: api.Errorf(api.CodeNoLeader, "no leader")},
	}
	r.fb.mu.Unlock()
	type res struct {
		l   *Lock
		err error
	}
	done := make(chan res, 1)
	go func() {
		l, err := s.Lock(context.Background(), "jobs/a", Value("me"))
		done <- res{l, err}
	}()
	var got res
	for waiting := true; waiting; {
		// The loop's timer plus the acquire's backoff timer.
		select {
		case got = <-done:
			waiting = false
			continue
		default:
		}
		if r.fc.Waiters() >= 2 {
			r.fc.Advance(time.Second)
		}
		<-time.After(50 * time.Microsecond)
	}
	if got.err != nil {
		t.Fatal(got.err)
	}
	r.fb.mu.Lock()
	reqs := append([]api.AcquireRequest(nil), r.fb.acqReqs...)
	grants := r.fb.grants
	r.fb.mu.Unlock()
	if len(reqs) != 6 {
		t.Fatalf("%d acquire requests, want 6", len(reqs))
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
	hs := r.fb.holders("jobs/a")
	if len(hs) != 1 || hs[0].holder != holder {
		t.Fatalf("holders %+v", hs)
	}
	l := got.l
	if l.Token() != hs[0].grant.Token || l.Sequencer() != hs[0].grant.Sequencer || l.Name() != "jobs/a" || l.Holder() != holder || l.Value() != "me" || l.Mode() != sequencer.Exclusive {
		t.Fatalf("lock %+v does not match grant %+v", l, hs[0].grant)
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
}

func TestLockWaitBoundedByDeadline(t *testing.T) {
	r := newRig(t)
	s := r.open(TTL(60 * time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.Lock(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	r.fb.mu.Lock()
	w := r.fb.acqReqs[0].Wait
	r.fb.mu.Unlock()
	if w <= 0 || w > 10*time.Second {
		t.Fatalf("wait %v, want within the ctx deadline", w)
	}
}

func TestTryLockBusyAndSharedModes(t *testing.T) {
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
	if _, err := s2.TryLock(ctx, "b"); !errors.Is(err, api.ErrLockBusy) {
		t.Fatalf("TryLock of a shared lock: %v", err)
	}
	r.fb.mu.Lock()
	for _, q := range r.fb.acqReqs {
		if q.Name == "a" && q.Session == s2.ID() && q.Wait != 0 {
			t.Errorf("try-acquire sent wait %v", q.Wait)
		}
	}
	r.fb.mu.Unlock()
	// A waiting Lock is granted when the holder unlocks.
	got := make(chan *Lock, 1)
	go func() {
		l, err := s2.Lock(ctx, "a")
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	eventually(t, "waiter to queue", func() bool { r.fb.mu.Lock(); defer r.fb.mu.Unlock(); return r.fb.waiting == 1 })
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if l := <-got; l == nil || l.Token() <= a.Token() {
		t.Fatalf("waiter got %v", l)
	}
}

func TestLockCancelReturnsPromptly(t *testing.T) {
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
	eventually(t, "waiter to queue", func() bool { r.fb.mu.Lock(); defer r.fb.mu.Unlock(); return r.fb.waiting == 1 })
	cancel()
	select {
	case err := <-errc:
		if err != context.Canceled {
			t.Fatalf("Lock after cancel = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Lock did not return after cancel")
	}
	if hs := r.fb.holders("a"); len(hs) != 1 || hs[0].session != s1.ID() {
		t.Fatalf("holders %+v", hs)
	}
	// Cancel during backoff too.
	r.fb.mu.Lock()
	r.fb.acqFaults = []acquireFault{{err: api.Errorf(api.CodeNoLeader, "no leader")}}
	r.fb.mu.Unlock()
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() {
		_, err := s2.Lock(ctx2, "b")
		errc <- err
	}()
	r.fc.BlockUntil(3) // two keepalive loops and the backoff timer
	cancel2()
	if err := <-errc; err != context.Canceled {
		t.Fatalf("Lock cancelled in backoff = %v", err)
	}
}

func TestLockFailsWhenSessionExpires(t *testing.T) {
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
	eventually(t, "waiter to queue", func() bool { r.fb.mu.Lock(); defer r.fb.mu.Unlock(); return r.fb.waiting == 1 })
	r.fb.setKA(kaBehavior{err: api.Errorf(api.CodeNoLeader, "no leader")})
	r.runTo(s2, at(4*time.Second))
	select {
	case err := <-errc:
		if !errors.Is(err, api.ErrSessionNotFound) {
			t.Fatalf("Lock on expired session = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Lock did not return after session expiry")
	}
}

func TestCloseLosesLocksAndClosesSessionOnce(t *testing.T) {
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
	_, releases, closes := r.fb.counts()
	if closes != 1 {
		t.Fatalf("CloseSession called %d times, want 1", closes)
	}
	if len(r.fb.holders("a"))+len(r.fb.holders("b")) != 0 {
		t.Fatal("locks still held after Close")
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatalf("Unlock after Close: %v", err)
	}
	if _, r2, _ := r.fb.counts(); r2 != releases {
		t.Fatal("Unlock after Close called Release")
	}
	if _, err := s.Lock(ctx, "c"); !errors.Is(err, api.ErrSessionNotFound) {
		t.Fatalf("Lock after Close: %v", err)
	}
}

func TestUnlockIdempotent(t *testing.T) {
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
	if _, releases, _ := r.fb.counts(); releases != 1 {
		t.Fatalf("Release called %d times, want 1", releases)
	}
	if _, err := s2.TryLock(ctx, "a"); err != nil {
		t.Fatalf("lock not free after Unlock: %v", err)
	}
}

func TestUnlockRetriesTransientErrors(t *testing.T) {
	r := newRig(t)
	s := r.open(TTL(60 * time.Second))
	ctx := context.Background()
	l, err := s.Lock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	// The next Release fails once with no_leader.
	r.fb.mu.Lock()
	r.fb.relFaults = []error{api.Errorf(api.CodeNoLeader, "no leader")}
	r.fb.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- l.Unlock(ctx) }()
	r.fc.BlockUntil(2) // the keepalive loop and the backoff timer
	r.fc.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(r.fb.holders("a")) != 0 {
		t.Fatal("lock still held")
	}
	if _, releases, _ := r.fb.counts(); releases != 2 {
		t.Fatalf("Release called %d times, want 2", releases)
	}
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
	r.fb.setKA(kaBehavior{hang: true})
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
}

func TestLostClosesByLeaseEndWithoutLockDelay(t *testing.T) {
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
}

func TestLostCountsFromSendTimeOfLastAcknowledgedKeepAlive(t *testing.T) {
	r := newRig(t)
	s := r.open(TTL(3*time.Second), LockDelay(10*time.Second), GracePeriod(30*time.Second))
	l, err := s.Lock(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	r.runTo(s, at(time.Second)) // the keepalive sent at 1s is acknowledged
	r.fb.setKA(kaBehavior{hang: true})
	want := time.Second + 13*time.Second - 230*time.Millisecond
	r.runTo(s, at(want-time.Nanosecond))
	if isClosed(l.Lost()) {
		t.Fatal("Lost closed before the lease of the last acknowledged keepalive plus lock-delay")
	}
	r.runTo(s, at(want))
	if !isClosed(l.Lost()) {
		t.Fatalf("Lost open at t0+%v", want)
	}
}

func TestLostLockStaysLostAndIsReleasedWhenSessionRecovers(t *testing.T) {
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
	r.fb.setKA(kaBehavior{}) // the partition heals; the session is alive
	r.runTo(s, at(14*time.Second))
	if s.State() != Safe {
		t.Fatalf("state %v after an acknowledged keepalive, want safe", s.State())
	}
	if !isClosed(l.Lost()) {
		t.Fatal("a lost lock came back")
	}
	eventually(t, "the lost grants to be released", func() bool {
		return len(r.fb.holders("a")) == 0 && len(r.fb.holders("b")) == 0
	})
	r.fb.mu.Lock()
	released := map[string]string{}
	for _, rel := range r.fb.releases {
		released[rel.Name] = rel.Holder
	}
	r.fb.mu.Unlock()
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
}
