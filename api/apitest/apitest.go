// Package apitest is an in-memory lock service for tests, as
// net/http/httptest is a web server for them: Backend implements
// api.Backend with the contract's semantics (docs/DESIGN.md) and adds the
// hooks that tests need (injected faults, a hook that sees or blocks every
// call, a log and counters of the calls, an injectable clock). It is for
// tests only: it keeps everything in memory, forever, and trusts its
// caller.
//
// What it keeps of the contract: every request is checked by the api
// package's validators; sessions with a TTL, kept alive by KeepAlive and
// expiring (their locks then in their lock-delay) when it runs out;
// exclusive and shared locks; holders (session, holder id) whose retried
// acquire gets the same grant; a FIFO queue per lock whose places belong
// to the state, not to the waiting request (a try by a queued holder finds
// the lock busy, a wait sets its deadline again; a release by it cancels
// its wait); fencing tokens that are the index of the change that granted
// them; one global index that every change moves; WatchLock blocking until
// the lock's index passes the caller's. What it leaves out: grant
// histories (its answers carry none, as a server from before histories),
// and session ids are "s1", "s2", ... rather than random.
package apitest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/sequencer"
)

// Backend is the fake lock service. Make one with New; it is safe for
// concurrent use. Its methods of api.Backend each count as a call of the
// method of that name ("Acquire", "LockState", ...) for the test hooks.
type Backend struct {
	now func() time.Time
	// real is true when now is the real clock: deadlines are then also
	// timed by real timers. An injected clock moves only when its test
	// says so (see Sweep).
	real   bool
	expire bool

	mu       sync.Mutex
	term     uint64
	index    uint64
	nextID   int
	sessions map[string]*session
	locks    map[string]*lock
	// changed is closed and replaced whenever the state changes (or
	// Sweep runs), waking every blocked call to look again.
	changed  chan struct{}
	timer    *time.Timer
	timerDue time.Time

	hook   Hook
	faults map[string][]fault
	log    []Call
	// grants counts the grants made; waiting, by method, the calls now
	// waiting for a change.
	grants  int
	waiting map[string]int
}

type session struct {
	info     api.Info
	deadline time.Time
}

// lock is a lock the fake stores: held, waited for or in a lock-delay.
type lock struct {
	mode       sequencer.Mode
	holders    []api.Holder
	queue      []*waiter
	delayUntil time.Time // zero: no lock-delay runs
	index      uint64
}

// waiter is a place in a lock's queue; every request waiting on it reads
// its outcome once done.
type waiter struct {
	session, holder, value string
	mode                   sequencer.Mode
	wait                   time.Duration
	deadline               time.Time

	done  bool
	token sequencer.Token // granted, when err is nil
	err   error
}

type fault struct {
	err   error
	apply bool
}

// Option configures a Backend made by New.
type Option func(*Backend)

// WithClock makes now the fake's time source: the start of every call
// (Call.At), session deadlines, lock-delays, and the deadlines of waits
// and watches. Such a clock moves only when the test moves it: the fake
// then arms no real timers, and notices what has come due at its next
// call or when the test calls Sweep. Without it the fake runs on
// time.Now and real timers.
func WithClock(now func() time.Time) Option {
	return func(b *Backend) { b.now, b.real = now, false }
}

// WithoutExpiry keeps sessions open however long they go without a
// keepalive (as when a test's clock jumps past TTLs that a real cluster
// would extend across a failover). Expire still ends one.
func WithoutExpiry() Option {
	return func(b *Backend) { b.expire = false }
}

// New returns an empty fake lock service: no sessions, no locks, index 0,
// term 1, sessions that expire, the real clock.
func New(opts ...Option) *Backend {
	b := &Backend{now: time.Now, real: true, expire: true, term: 1,
		sessions: map[string]*session{}, locks: map[string]*lock{},
		changed: make(chan struct{}), faults: map[string][]fault{}, waiting: map[string]int{}}
	for _, o := range opts {
		o(b)
	}
	return b
}

// ---- the test hooks ----

// Call is one call of a method of the fake, as its log keeps it and its
// hook sees it.
type Call struct {
	// Method is the name of the method: "OpenSession", "Acquire", ...,
	// or the name a service built on the fake gave Do.
	Method string
	// Arg is the request as the caller passed it: an api.OpenRequest,
	// api.AcquireRequest or api.ReleaseRequest; the session id
	// (KeepAlive, CloseSession, SessionInfo), the lock name (LockState),
	// the prefix (Locks) or the sequencer's text (CheckSequencer); a
	// WatchRequest (WatchLock); what was given to Do.
	Arg any
	// At is when the call began, by the fake's clock.
	At time.Time
	// Err is the error the call answered, once Done.
	Err error
	// Done is true once the call has returned.
	Done bool
}

// WatchRequest is the Arg of a WatchLock call.
type WatchRequest struct {
	Name  string
	Index uint64
	Wait  time.Duration
}

// Hook is run at the start of every call, after the call is logged and
// before any injected fault or the call's own work, without the fake's
// lock held. It may block (on a gate, until ctx is done); a non-nil error
// is the call's answer and the state is left untouched.
type Hook func(ctx context.Context, c Call) error

// SetHook installs h for the calls that start from now on (nil: none).
func (b *Backend) SetHook(h Hook) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hook = h
}

// Fail makes the next calls of method answer errs, one error each, in
// order, leaving the state untouched. Method "*" matches every method;
// a method's own faults come before those of "*".
func (b *Backend) Fail(method string, errs ...error) { b.inject(method, false, errs) }

// FailApplied makes the next calls of method take effect and then answer
// errs, one error each (an outcome the caller cannot know, such as
// unknown_outcome after a leadership loss). An applied Acquire that has to
// wait keeps its place in the queue but does not wait.
func (b *Backend) FailApplied(method string, errs ...error) { b.inject(method, true, errs) }

func (b *Backend) inject(method string, apply bool, errs []error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, err := range errs {
		b.faults[method] = append(b.faults[method], fault{err: err, apply: apply})
	}
}

// ClearFaults drops every fault not yet answered.
func (b *Backend) ClearFaults() {
	b.mu.Lock()
	defer b.mu.Unlock()
	clear(b.faults)
}

// Calls returns how many calls of method have begun ("*": of every
// method), those answered by a hook or a fault included.
func (b *Backend) Calls(method string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, c := range b.log {
		if method == "*" || c.Method == method {
			n++
		}
	}
	return n
}

// Log returns the calls of method ("*": of every method), in the order
// they began.
func (b *Backend) Log(method string) []Call {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Call
	for _, c := range b.log {
		if method == "*" || c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// Answered returns how many calls of method ("*": of every method) have
// returned an error that matches target under errors.Is (for instance
// context.Canceled: the waits their callers gave up).
func (b *Backend) Answered(method string, target error) int {
	n := 0
	for _, c := range b.Log(method) {
		if c.Done && errors.Is(c.Err, target) {
			n++
		}
	}
	return n
}

// Grants returns how many grants the fake has made: holders it added to a
// lock, at once or from its queue, those of applied faults included (a
// retry answered with its holder's grant is none).
func (b *Backend) Grants() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.grants
}

// Waiting returns how many calls of method ("*": of every method) are now
// waiting in the fake for the state to change: acquires for their turn in
// a queue, watches for a change past their index. Calls that a hook holds
// are not counted, nor places whose request has gone (Peek counts those).
func (b *Backend) Waiting(method string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if method == "*" {
		n := 0
		for _, w := range b.waiting {
			n += w
		}
		return n
	}
	return b.waiting[method]
}

// SetTerm sets the Raft term that grants carry (1 at first).
func (b *Backend) SetTerm(term uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.term = term
}

// Index returns the fake's log index: the number of changes so far.
func (b *Backend) Index() uint64 {
	b.lock()
	defer b.unlock()
	return b.index
}

// Peek returns the state of a lock as LockState would answer it, without
// a call: nothing is counted, logged, hooked or failed.
func (b *Backend) Peek(name string) api.LockState {
	b.lock()
	defer b.unlock()
	return b.stateLocked(name)
}

// Dump returns the whole state (index, sessions, locks and their queues)
// as text: two dumps are equal exactly when nothing changed in between
// but deadlines (of leases and waits).
func (b *Backend) Dump() string {
	b.lock()
	defer b.unlock()
	var d struct {
		Index    uint64
		Sessions []api.Info
		Locks    []api.LockState
	}
	d.Index = b.index
	for _, id := range slices.Sorted(maps.Keys(b.sessions)) {
		d.Sessions = append(d.Sessions, b.infoLocked(id))
	}
	for _, name := range slices.Sorted(maps.Keys(b.locks)) {
		d.Locks = append(d.Locks, b.stateLocked(name))
	}
	out, err := json.Marshal(d)
	if err != nil {
		panic(err) // not reached: the state is plain data
	}
	return string(out)
}

// Expire ends session id as the end of its lease would: its locks go into
// its lock-delay and its waits end. It reports whether the session was
// open.
func (b *Backend) Expire(id string) bool {
	b.lock()
	defer b.unlock()
	if b.sessions[id] == nil {
		return false
	}
	b.removeSessionLocked(id, true)
	return true
}

// Sweep applies what the clock has made due (expiries, ends of lock-delays
// and of waits) and wakes every blocked call to look at the clock again.
// Every call sweeps first, and with the real clock timers sweep on time; a
// test that moves an injected clock calls Sweep to let blocked calls see
// it.
func (b *Backend) Sweep() {
	b.lock()
	defer b.unlock()
	b.notifyLocked()
	b.timerDue = time.Time{} // re-arm even for the same deadline
}

// Do runs one call of a method the fake does not have, for services built
// on it (a transport.Service adds Cluster, ...): the call is logged and
// counted, the hook sees it, an injected fault answers it, and otherwise
// apply (nil: nothing) does the work. For a fault of FailApplied, apply
// runs with a ctx already done: it takes effect, and does not wait.
func (b *Backend) Do(ctx context.Context, method string, arg any, apply func(context.Context) error) error {
	b.mu.Lock()
	c := Call{Method: method, Arg: arg, At: b.now()}
	i := len(b.log)
	b.log = append(b.log, c)
	hook := b.hook
	b.mu.Unlock()
	err := b.serve(ctx, c, hook, apply)
	b.mu.Lock()
	b.log[i].Err, b.log[i].Done = err, true
	b.mu.Unlock()
	return err
}

func (b *Backend) serve(ctx context.Context, c Call, hook Hook, apply func(context.Context) error) error {
	if hook != nil {
		if err := hook(ctx, c); err != nil {
			return err
		}
	}
	if apply == nil {
		apply = func(context.Context) error { return nil }
	}
	b.mu.Lock()
	f, ok := b.takeFaultLocked(c.Method)
	b.mu.Unlock()
	if !ok {
		return apply(ctx)
	}
	if f.apply {
		done, cancel := context.WithCancel(ctx)
		cancel()
		_ = apply(done)
	}
	return f.err
}

func (b *Backend) takeFaultLocked(method string) (fault, bool) {
	for _, k := range []string{method, "*"} {
		if fs := b.faults[k]; len(fs) > 0 {
			b.faults[k] = fs[1:]
			return fs[0], true
		}
	}
	return fault{}, false
}

// first returns the first of the checks' errors (nil if none).
func first(checks ...error) error {
	for _, err := range checks {
		if err != nil {
			return err
		}
	}
	return nil
}

// call is Do for a method with a result: the zero result with an error.
func call[T any](b *Backend, ctx context.Context, method string, arg any, op func(context.Context) (T, error)) (T, error) {
	var out T
	err := b.Do(ctx, method, arg, func(ctx context.Context) error {
		var err error
		out, err = op(ctx)
		return err
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return out, nil
}

// ---- api.Backend ----

var _ api.Backend = (*Backend)(nil)

// OpenSession opens a session (req resolved and checked by
// api.OpenRequest.Resolve) whose lease runs from now. Ids are "s1", "s2",
// ... in order.
func (b *Backend) OpenSession(ctx context.Context, req api.OpenRequest) (api.Info, error) {
	return call(b, ctx, "OpenSession", req, func(context.Context) (api.Info, error) {
		if err := req.Resolve(); err != nil {
			return api.Info{}, err
		}
		b.lock()
		defer b.unlock()
		b.nextID++
		info := api.Info{ID: fmt.Sprintf("s%d", b.nextID), Name: req.Name, TTL: req.TTL, LockDelay: req.LockDelay, Locks: []string{}}
		b.sessions[info.ID] = &session{info: info, deadline: b.now().Add(req.TTL)}
		b.entryLocked()
		return info, nil
	})
}

// KeepAlive extends the session's lease to now + its TTL (no change to the
// index, as it is no Raft write).
func (b *Backend) KeepAlive(ctx context.Context, id string) (time.Duration, error) {
	return call(b, ctx, "KeepAlive", id, func(context.Context) (time.Duration, error) {
		b.lock()
		defer b.unlock()
		s, err := b.sessionLocked(id)
		if err != nil {
			return 0, err
		}
		s.deadline = b.now().Add(s.info.TTL)
		return s.info.TTL, nil
	})
}

// CloseSession ends a session and releases its locks at once, without
// lock-delay; its waits end with session_not_found.
func (b *Backend) CloseSession(ctx context.Context, id string) error {
	return b.Do(ctx, "CloseSession", id, func(context.Context) error {
		b.lock()
		defer b.unlock()
		if _, err := b.sessionLocked(id); err != nil {
			return err
		}
		b.removeSessionLocked(id, false)
		return nil
	})
}

// SessionInfo describes a session and the locks it holds.
func (b *Backend) SessionInfo(ctx context.Context, id string) (api.Info, error) {
	return call(b, ctx, "SessionInfo", id, func(context.Context) (api.Info, error) {
		b.lock()
		defer b.unlock()
		if _, err := b.sessionLocked(id); err != nil {
			return api.Info{}, err
		}
		return b.infoLocked(id), nil
	})
}

// Acquire takes a lock (req resolved and checked by
// api.AcquireRequest.Resolve): at once, or with a Wait in the lock's FIFO
// queue until it is granted, the wait runs out (wait_timeout), its holder
// releases it (wait_cancelled), its session ends (session_not_found) or
// ctx is done (the place is then kept, as a cluster keeps it).
func (b *Backend) Acquire(ctx context.Context, req api.AcquireRequest) (api.Grant, error) {
	return call(b, ctx, "Acquire", req, func(ctx context.Context) (api.Grant, error) {
		if err := req.Resolve(); err != nil {
			return api.Grant{}, err
		}
		b.lock()
		defer b.unlock()
		w, g, err := b.acquireLocked(req)
		if err != nil || w == nil {
			return g, err
		}
		for !w.done {
			if err := b.waitLocked(ctx, "Acquire", time.Time{}); err != nil {
				return api.Grant{}, err
			}
		}
		if w.err != nil {
			return api.Grant{}, w.err
		}
		return b.grant(req.Name, w.token, w.mode), nil
	})
}

// Release gives a lock up, or the holder's place in its queue (whose wait
// then answers wait_cancelled). Releasing a free lock is a no-op; one held
// by others only is refused (not_holder).
func (b *Backend) Release(ctx context.Context, req api.ReleaseRequest) error {
	return b.Do(ctx, "Release", req, func(context.Context) error {
		if err := req.Check(); err != nil {
			return err
		}
		b.lock()
		defer b.unlock()
		if _, err := b.sessionLocked(req.Session); err != nil {
			return err
		}
		l := b.locks[req.Name]
		if l == nil {
			return nil
		}
		if i := l.holding(req.Session, req.Holder); i >= 0 {
			idx := b.entryLocked()
			l.holders = slices.Delete(l.holders, i, i+1)
			b.changedLocked(req.Name, l, idx)
			return nil
		}
		if i := l.queued(req.Session, req.Holder); i >= 0 {
			idx := b.entryLocked()
			l.endWait(i, api.Errorf(api.CodeWaitCancelled, "acquire %s: the wait was cancelled by its holder (released while queued)", req.Name))
			b.changedLocked(req.Name, l, idx)
			return nil
		}
		if len(l.holders) > 0 {
			return api.Errorf(api.CodeNotHolder, "release %s: this session/holder does not hold the lock", req.Name)
		}
		return nil
	})
}

// LockState returns the state of one lock (a free one has no holders and
// the current index).
func (b *Backend) LockState(ctx context.Context, name string) (api.LockState, error) {
	return call(b, ctx, "LockState", name, func(context.Context) (api.LockState, error) {
		if err := api.ValidateLockName(name); err != nil {
			return api.LockState{}, err
		}
		return b.Peek(name), nil
	})
}

// Locks lists the locks held, waited for or delayed whose names start with
// prefix, by name.
func (b *Backend) Locks(ctx context.Context, prefix string) ([]api.LockState, error) {
	return call(b, ctx, "Locks", prefix, func(context.Context) ([]api.LockState, error) {
		if err := api.CheckPrefix(prefix); err != nil {
			return nil, err
		}
		b.lock()
		defer b.unlock()
		out := []api.LockState{}
		for _, name := range slices.Sorted(maps.Keys(b.locks)) {
			if strings.HasPrefix(name, prefix) {
				out = append(out, b.stateLocked(name))
			}
		}
		return out, nil
	})
}

// CheckSequencer tells whether a sequencer is current: its lock held in
// its mode by the grant with its token (sequencer.IsCurrent).
func (b *Backend) CheckSequencer(ctx context.Context, text string) (api.SequencerCheck, error) {
	return call(b, ctx, "CheckSequencer", text, func(context.Context) (api.SequencerCheck, error) {
		seq, err := sequencer.Parse(text)
		if err != nil {
			err = api.Errorf(api.CodeInvalidArgument, "%v", err)
		}
		if err := first(err, api.ValidateLockName(seq.Name)); err != nil {
			return api.SequencerCheck{}, err
		}
		b.lock()
		defer b.unlock()
		var out api.SequencerCheck
		l := b.locks[seq.Name]
		if l == nil {
			return out, nil
		}
		var matched sequencer.Token
		for _, h := range l.holders {
			out.CurrentToken = max(out.CurrentToken, h.Token)
			if h.Token == seq.Token {
				matched = h.Token
			}
		}
		out.Valid = sequencer.IsCurrent(seq, matched, len(l.holders) > 0 && l.mode == seq.Mode)
		return out, nil
	})
}

// WatchLock answers the lock's state once its Index is above index (at
// once for index 0), or when wait has passed (zero: api.DefaultWatchWait;
// checked by api.CheckWatchWait).
func (b *Backend) WatchLock(ctx context.Context, name string, index uint64, wait time.Duration) (api.LockState, error) {
	return call(b, ctx, "WatchLock", WatchRequest{Name: name, Index: index, Wait: wait}, func(ctx context.Context) (api.LockState, error) {
		if wait == 0 {
			wait = api.DefaultWatchWait
		}
		if err := first(api.ValidateLockName(name), api.CheckWatchWait("wait", wait)); err != nil {
			return api.LockState{}, err
		}
		b.lock()
		defer b.unlock()
		deadline := b.now().Add(wait)
		for {
			st := b.stateLocked(name)
			if index == 0 || st.Index > index || !b.now().Before(deadline) {
				return st, nil
			}
			if err := b.waitLocked(ctx, "WatchLock", deadline); err != nil {
				return api.LockState{}, err
			}
		}
	})
}

// ---- the state ----

// lock takes the fake's lock and applies what the clock has made due.
func (b *Backend) lock() {
	b.mu.Lock()
	b.sweepLocked()
}

// unlock arms the timer for the next deadline and lets the lock go.
func (b *Backend) unlock() {
	b.armLocked()
	b.mu.Unlock()
}

// waitLocked lets the lock go until the state changes, ctx is done or
// (with the real clock) deadline passes (zero: none), and takes it again;
// meanwhile the call, of method, counts as waiting.
func (b *Backend) waitLocked(ctx context.Context, method string, deadline time.Time) error {
	changed := b.changed
	var expired <-chan time.Time
	if b.real && !deadline.IsZero() {
		t := time.NewTimer(deadline.Sub(b.now()))
		defer t.Stop()
		expired = t.C
	}
	b.waiting[method]++
	b.unlock()
	defer func() {
		b.lock()
		b.waiting[method]--
	}()
	select {
	case <-changed:
	case <-expired:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

func (b *Backend) notifyLocked() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// entryLocked is one change, as one Raft entry: it moves the index and
// returns it.
func (b *Backend) entryLocked() uint64 {
	b.index++
	b.notifyLocked()
	return b.index
}

func (b *Backend) sessionLocked(id string) (*session, error) {
	if err := api.CheckSessionID(id); err != nil {
		return nil, err
	}
	s := b.sessions[id]
	if s == nil {
		return nil, api.Errorf(api.CodeSessionNotFound, "session (handle %s): unknown, closed or expired", api.SessionHandle(id))
	}
	return s, nil
}

func (b *Backend) infoLocked(id string) api.Info {
	info := b.sessions[id].info
	info.Locks = []string{}
	for _, name := range slices.Sorted(maps.Keys(b.locks)) {
		if slices.ContainsFunc(b.locks[name].holders, func(h api.Holder) bool { return h.SessionHandle == api.SessionHandle(id) }) {
			info.Locks = append(info.Locks, name)
		}
	}
	return info
}

func (b *Backend) grant(name string, tok sequencer.Token, m sequencer.Mode) api.Grant {
	return api.Grant{Name: name, Mode: m, Token: tok,
		Sequencer: sequencer.Sequencer{Name: name, Mode: m, Token: tok}, Term: b.term}
}

func modeMismatch(req api.AcquireRequest, has sequencer.Mode) error {
	return api.Errorf(api.CodeInvalidArgument, "acquire %s: holder %s already holds or waits for the lock in %s mode; it asked for %s",
		req.Name, req.Holder, has, req.Mode)
}

// acquireLocked applies an acquire: a grant, an error, or the place (new
// or kept) whose outcome the request waits for.
func (b *Backend) acquireLocked(req api.AcquireRequest) (*waiter, api.Grant, error) {
	busy := api.Errorf(api.CodeLockBusy, "acquire %s: lock is held or in its lock-delay", req.Name)
	if _, err := b.sessionLocked(req.Session); err != nil {
		return nil, api.Grant{}, err
	}
	l := b.locks[req.Name]
	if l == nil {
		l = &lock{}
	}
	if i := l.holding(req.Session, req.Holder); i >= 0 {
		if l.mode != req.Mode {
			return nil, api.Grant{}, modeMismatch(req, l.mode)
		}
		return nil, b.grant(req.Name, l.holders[i].Token, l.mode), nil
	}
	if i := l.queued(req.Session, req.Holder); i >= 0 {
		w := l.queue[i]
		switch {
		case w.mode != req.Mode:
			return nil, api.Grant{}, modeMismatch(req, w.mode)
		case req.Wait == 0:
			return nil, api.Grant{}, busy
		}
		w.wait, w.deadline = req.Wait, b.now().Add(req.Wait)
		return w, api.Grant{}, nil
	}
	if l.delayUntil.IsZero() && len(l.queue) == 0 && l.compatible(req.Mode) {
		idx := b.entryLocked()
		b.locks[req.Name] = l
		b.grantLocked(l, b.holderLocked(req.Session, req.Holder, req.Value), req.Mode, idx)
		b.changedLocked(req.Name, l, idx)
		return nil, b.grant(req.Name, sequencer.Token(idx), req.Mode), nil
	}
	if req.Wait == 0 {
		return nil, api.Grant{}, busy
	}
	idx := b.entryLocked()
	b.locks[req.Name] = l
	w := &waiter{session: req.Session, holder: req.Holder, value: req.Value, mode: req.Mode,
		wait: req.Wait, deadline: b.now().Add(req.Wait)}
	l.queue = append(l.queue, w)
	b.changedLocked(req.Name, l, idx)
	return w, api.Grant{}, nil
}

func (l *lock) compatible(m sequencer.Mode) bool {
	return len(l.holders) == 0 || (l.mode == sequencer.Shared && m == sequencer.Shared)
}

// grantLocked makes h a holder of l in mode m by the change at index idx
// (its token), and counts the grant.
func (b *Backend) grantLocked(l *lock, h api.Holder, m sequencer.Mode, idx uint64) {
	h.Token = sequencer.Token(idx)
	l.mode = m
	l.holders = append(l.holders, h)
	b.grants++
}

// holderLocked is holder holder of session id with value, as readers see
// it: the session named by its handle and name.
func (b *Backend) holderLocked(id, holder, value string) api.Holder {
	h := api.Holder{SessionHandle: api.SessionHandle(id), Holder: holder, Value: value}
	if s := b.sessions[id]; s != nil {
		h.SessionName = s.info.Name
	}
	return h
}

// holding returns the index of (session, holder) among l's holders, -1 if
// none.
func (l *lock) holding(session, holder string) int {
	return slices.IndexFunc(l.holders, func(h api.Holder) bool {
		return h.SessionHandle == api.SessionHandle(session) && h.Holder == holder
	})
}

// queued returns the place of (session, holder) in l's queue, -1 if none.
func (l *lock) queued(session, holder string) int {
	return slices.IndexFunc(l.queue, func(w *waiter) bool { return w.session == session && w.holder == holder })
}

// endWait takes the i-th waiter out of the queue; its requests answer err.
func (l *lock) endWait(i int, err error) {
	w := l.queue[i]
	l.queue = slices.Delete(l.queue, i, i+1)
	w.done, w.err = true, err
}

// changedLocked finishes a change of lock name at index idx: it grants the
// head of the queue what it can (one exclusive waiter or a run of shared
// ones, all with the token idx), and forgets the lock if nothing is left
// of it.
func (b *Backend) changedLocked(name string, l *lock, idx uint64) {
	for len(l.queue) > 0 && l.delayUntil.IsZero() && l.compatible(l.queue[0].mode) {
		w := l.queue[0]
		l.queue = l.queue[1:]
		b.grantLocked(l, b.holderLocked(w.session, w.holder, w.value), w.mode, idx)
		w.done, w.token = true, sequencer.Token(idx)
	}
	l.index = idx
	if len(l.holders) == 0 && len(l.queue) == 0 && l.delayUntil.IsZero() {
		delete(b.locks, name)
	}
}

// removeSessionLocked closes or (expire) expires a session in one change:
// its holds are released, on expiry into its lock-delay, and its waits end.
func (b *Backend) removeSessionLocked(id string, expire bool) {
	s := b.sessions[id]
	delete(b.sessions, id)
	idx := b.entryLocked()
	for _, name := range slices.Sorted(maps.Keys(b.locks)) {
		l := b.locks[name]
		n := len(l.holders) + len(l.queue)
		held := slices.ContainsFunc(l.holders, func(h api.Holder) bool { return h.SessionHandle == api.SessionHandle(id) })
		l.holders = slices.DeleteFunc(l.holders, func(h api.Holder) bool { return h.SessionHandle == api.SessionHandle(id) })
		for i := len(l.queue) - 1; i >= 0; i-- {
			if l.queue[i].session == id {
				l.endWait(i, api.Errorf(api.CodeSessionNotFound, "acquire %s: the wait ended: session closed or expired", name))
			}
		}
		if held && expire && s.info.LockDelay > 0 {
			if until := b.now().Add(s.info.LockDelay); until.After(l.delayUntil) {
				l.delayUntil = until
			}
		}
		if len(l.holders)+len(l.queue) != n {
			b.changedLocked(name, l, idx)
		}
	}
}

// sweepLocked applies what is due by the clock: expiries (unless
// WithoutExpiry), ends of lock-delays, waits that ran out.
func (b *Backend) sweepLocked() {
	now := b.now()
	if b.expire {
		for _, id := range slices.Sorted(maps.Keys(b.sessions)) {
			if !now.Before(b.sessions[id].deadline) {
				b.removeSessionLocked(id, true)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(b.locks)) {
		l := b.locks[name]
		if !l.delayUntil.IsZero() && !now.Before(l.delayUntil) {
			idx := b.entryLocked()
			l.delayUntil = time.Time{}
			b.changedLocked(name, l, idx)
		}
		for {
			i := slices.IndexFunc(l.queue, func(w *waiter) bool { return !now.Before(w.deadline) })
			if i < 0 {
				break
			}
			idx := b.entryLocked()
			w := l.queue[i]
			l.endWait(i, api.Errorf(api.CodeWaitTimeout, "acquire %s: not granted within %v; no longer queued", name, w.wait))
			b.changedLocked(name, l, idx)
		}
	}
}

// armLocked sets the real timer (none with an injected clock) to sweep at
// the next deadline.
func (b *Backend) armLocked() {
	if !b.real {
		return
	}
	var due time.Time
	next := func(t time.Time) {
		if !t.IsZero() && (due.IsZero() || t.Before(due)) {
			due = t
		}
	}
	if b.expire {
		for _, s := range b.sessions {
			next(s.deadline)
		}
	}
	for _, l := range b.locks {
		next(l.delayUntil)
		for _, w := range l.queue {
			next(w.deadline)
		}
	}
	if due.Equal(b.timerDue) {
		return
	}
	if b.timer != nil {
		b.timer.Stop()
	}
	b.timer, b.timerDue = nil, due
	if !due.IsZero() {
		b.timer = time.AfterFunc(due.Sub(b.now()), b.Sweep)
	}
}

// stateLocked describes a lock as the contract does: a free one with no
// holders and the current index.
func (b *Backend) stateLocked(name string) api.LockState {
	l := b.locks[name]
	if l == nil {
		return api.LockState{Name: name, Holders: []api.Holder{}, Index: b.index}
	}
	st := api.LockState{Name: name, Mode: l.mode, Holders: slices.Clone(l.holders), Waiters: len(l.queue), Index: l.index}
	if len(l.holders) == 0 {
		st.Mode, st.Holders = 0, []api.Holder{}
	}
	for _, w := range l.queue {
		st.Queue = append(st.Queue, api.QueuedHolder{Holder: w.holder, Mode: w.mode})
	}
	if !l.delayUntil.IsZero() {
		st.DelayUntil = l.delayUntil.UTC()
	}
	return st
}
