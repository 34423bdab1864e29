// Package apitest is an in-memory lock service for tests, as
// net/http/httptest is a web server for them: Backend implements
// api.Backend on the real state machine (fsm.FSM) and adds the hooks that
// tests need (injected faults, a hook that sees or blocks every call, a
// log and counters of the calls, an injectable clock). It is for tests
// only: it keeps everything in memory, forever, and trusts its caller.
//
// It plays the part of a one-node cluster's leader without Raft: every
// request is checked by the api package's validators, then turned into
// the command the node would propose, stamped with the fake's clock and
// ids, and applied to an fsm.FSM; the lock rules are the state machine's
// own (docs/DESIGN.md). What a leader keeps outside the state machine the
// fake keeps too: session leases (KeepAlive; a session whose lease runs
// out is expired, its locks then in their lock-delay), the deadlines of
// waits and lock-delays, and the requests waiting for a place in a queue
// to be granted. An entry that changes nothing (a try that finds the
// lock busy, a retried wait) moves no index: Index counts the changes.
// What it leaves out: grant histories (its answers carry none, as a
// server from before histories), limits and ACLs, and session ids are
// "s1", "s2", ... rather than random.
package apitest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/fsm"
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

	mu    sync.Mutex
	term  uint64
	index uint64
	// fsm is the state; every change is a command applied to it at
	// index+1, which becomes the index if the command changed anything
	// (dirty, set by onEvent).
	fsm    *fsm.FSM
	dirty  bool
	nextID int
	// leases are the open sessions' lease deadlines, kept by the leader
	// (not replicated), as a node keeps them.
	leases map[string]time.Time
	// places are the queued (lock, session, holder) places: their wait
	// deadlines, and the outcome that the requests waiting on them read.
	places map[place]*waiter
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

// place names a waiter in a lock's queue.
type place struct{ lock, session, holder string }

// waiter is what the fake keeps of a place in a lock's queue: when its
// wait runs out, and its outcome, which every request waiting on it reads
// once done.
type waiter struct {
	wait     time.Duration
	deadline time.Time

	done  bool
	token sequencer.Token // granted, when err is nil
	mode  sequencer.Mode
	slot  uint64
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
		leases: map[string]time.Time{}, places: map[place]*waiter{},
		changed: make(chan struct{}), faults: map[string][]fault{}, waiting: map[string]int{}}
	b.fsm = fsm.New(b.onEvent)
	for _, o := range opts {
		o(b)
	}
	return b
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
		id := fmt.Sprintf("s%d", b.nextID)
		r := b.applyLocked(fsm.Command{Type: fsm.CmdOpenSession, OpenSession: &fsm.OpenSession{ID: id, Name: req.Name,
			TTL: int64(req.TTL), LockDelay: int64(req.LockDelay)}})
		if r.Status != fsm.StatusOK {
			return api.Info{}, unexpected("open session", r)
		}
		b.leases[id] = b.now().Add(req.TTL)
		return api.Info{ID: id, Name: req.Name, TTL: req.TTL, LockDelay: req.LockDelay, Locks: []string{}}, nil
	})
}

// KeepAlive extends the session's lease to now + its TTL (no change to the
// index, as it is no Raft write).
func (b *Backend) KeepAlive(ctx context.Context, id string) (api.KeepAliveAnswer, error) {
	return call(b, ctx, "KeepAlive", id, func(context.Context) (api.KeepAliveAnswer, error) {
		b.lock()
		defer b.unlock()
		s, err := b.sessionLocked(id)
		if err != nil {
			return api.KeepAliveAnswer{}, err
		}
		ttl := time.Duration(s.TTL)
		b.leases[id] = b.now().Add(ttl)
		return api.KeepAliveAnswer{TTL: ttl, Revoked: revokedGrants(b.fsm.Revoked(id))}, nil
	})
}

// revokedGrants is the wire form of a session's revoked grants.
func revokedGrants(rs []fsm.RevokedGrant) []api.RevokedGrant {
	var out []api.RevokedGrant
	for _, r := range rs {
		out = append(out, api.RevokedGrant{Name: r.Lock, Holder: r.Holder, Token: sequencer.Token(r.Token), Kind: r.Kind, Reason: r.Reason})
	}
	return out
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
		b.endSessionLocked(id, false)
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
		return b.grant(req.Name, w.token, w.mode, req.Permits, w.slot), nil
	})
}

// Release gives a lock up, or the holder's place in its queue (whose wait
// then answers wait_cancelled). Releasing a free lock is a no-op, and so
// is repeating a release the session made lately (its first attempt took
// effect); one held by others only is refused (not_holder).
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
		r := b.applyLocked(fsm.Command{Type: fsm.CmdRelease, Release: &fsm.LockRef{Lock: req.Name, Session: req.Session, Holder: req.Holder}})
		switch r.Status {
		case fsm.StatusOK:
			return nil
		case fsm.StatusNotHolder:
			return api.Errorf(api.CodeNotHolder, "release %s: this session/holder does not hold the lock", req.Name)
		}
		return unexpected("release "+req.Name, r)
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
		for _, l := range b.fsm.Locks(prefix) {
			out = append(out, b.stateOf(l))
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
		l, ok := b.fsm.Lock(seq.Name)
		if !ok {
			return out, nil
		}
		var matched sequencer.Token
		for _, h := range l.Holders {
			out.CurrentToken = max(out.CurrentToken, sequencer.Token(h.Token))
			if sequencer.Token(h.Token) == seq.Token && (!seq.Semaphore || h.Slot == seq.Slot) {
				matched = seq.Token
			}
		}
		out.Valid = sequencer.IsCurrent(seq, matched, len(l.Holders) > 0 && l.Mode == seq.Mode && l.Permits == seq.Permits)
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
