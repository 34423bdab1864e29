package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftlock/raftlock/api"

	"github.com/raftlock/raftlock/sequencer"
)

// This file is the client side of sessions: Session (keepalive loop,
// jeopardy, grace, expiry) and Lock (a handle on one grant).

// DefaultGracePeriod is how long a session stays in jeopardy, retrying
// keepalives, before the client declares it expired.
const DefaultGracePeriod = 15 * time.Second

const (
	// lockPollSlice bounds one blocking Acquire request. A longer wait is a
	// series of requests with the same holder id: each finds the waiter's
	// place in the queue (the leader renews its wait, MaxWait at most, once
	// less than half of it is left), so the place is kept for as long as
	// the caller waits, and a node that stops answering delays a grant by
	// at most one slice before the client asks another.
	lockPollSlice = 10 * time.Second
	// minJeopardyRetry bounds the keepalive cadence in jeopardy from below.
	minJeopardyRetry = 100 * time.Millisecond
	// eventBuffer is the capacity of Session.Events.
	eventBuffer = 16
	// lostLatency is the part of LostMargin that covers the latency of the
	// client's own timer and of the code that acts on Lost.
	lostLatency = 100 * time.Millisecond
)

// LostMargin is how long before the earliest moment the cluster could grant
// a lock of a session with lease ttl and the given lock-delay to someone
// else the client's Lost() closes: 1% of ttl + lock-delay, for a client
// clock running up to 1% slower than the leader's (quartz drifts by about
// 0.01%), plus 100 ms for the latency of the client's own timer and of the
// code that acts on Lost.
func LostMargin(ttl, lockDelay time.Duration) time.Duration {
	return (ttl+lockDelay)/100 + lostLatency
}

// LostAfter is how long after the send time of its last acknowledged
// keepalive a session's locks are lost if no later keepalive is
// acknowledged: ttl + lockDelay − LostMargin. The cluster cannot expire the
// session before ttl has passed on its own clock from the moment it
// received that keepalive, and a lock of an expired session stays
// unavailable for lockDelay after that, so no one else can be granted the
// lock before ttl + lockDelay.
func LostAfter(ttl, lockDelay time.Duration) time.Duration {
	return ttl + lockDelay - LostMargin(ttl, lockDelay)
}

// State is a session's state as its client sees it.
type State int

const (
	// Safe: the lease, counted from the send time of the last acknowledged
	// keepalive, has not run out. Locks can be trusted.
	Safe State = iota
	// Jeopardy: the lease ran out without an acknowledgement. The server may
	// already have expired the session, so locks must not be trusted, but the
	// client keeps retrying keepalives until the grace period ends.
	Jeopardy
	// Expired: jeopardy outlasted the grace period, or the server reported
	// the session gone. Every lock is lost; the session is over.
	Expired
	// Closed: Close was called. Every lock is released; the session is over.
	Closed
)

// String returns "safe", "jeopardy", "expired" or "closed".
func (st State) String() string {
	switch st {
	case Safe:
		return "safe"
	case Jeopardy:
		return "jeopardy"
	case Expired:
		return "expired"
	case Closed:
		return "closed"
	default:
		return fmt.Sprintf("state(%d)", int(st))
	}
}

func (st State) over() bool { return st == Expired || st == Closed }

// Event is a change of a session's State.
type Event struct {
	State State
	// At is the session Clock's time of the change.
	At time.Time
	// Err is the cause, if any: the last keepalive error for Jeopardy and
	// Expired (matching ErrSessionNotFound when the server reported the
	// session gone), nil for Safe and Closed.
	Err error
}

// Option configures Open.
type Option func(*sessionConfig)

type sessionConfig struct {
	name      string
	ttl       time.Duration
	lockDelay time.Duration
	grace     time.Duration
	clock     Clock
	onEvent   func(Event)
	faults    faults
}

// TTL asks for a session lease of d (MinTTL..MaxTTL; zero: DefaultTTL).
func TTL(d time.Duration) Option { return func(c *sessionConfig) { c.ttl = d } }

// LockDelay asks for a lock-delay of d (up to MaxLockDelay; zero:
// DefaultLockDelay; NoLockDelay: none).
func LockDelay(d time.Duration) Option { return func(c *sessionConfig) { c.lockDelay = d } }

// Name gives the session a descriptive name (up to MaxSessionNameBytes).
func Name(s string) Option { return func(c *sessionConfig) { c.name = s } }

// GracePeriod sets how long jeopardy may last before the session is declared
// expired (default DefaultGracePeriod).
func GracePeriod(d time.Duration) Option { return func(c *sessionConfig) { c.grace = d } }

// WithClock makes the session run on c instead of RealClock (tests).
func WithClock(c Clock) Option { return func(cfg *sessionConfig) { cfg.clock = c } }

// OnEvent registers f to be called with every Event, in order, on the
// session's keepalive goroutine. f must return quickly; it may call any
// method of the session, including Close.
func OnEvent(f func(Event)) Option { return func(c *sessionConfig) { c.onEvent = f } }

// Session is a client session: it keeps its lease alive on the cluster with
// keepalives from one goroutine, tracks Safe/Jeopardy/Expired, and acquires
// locks on the session's behalf. Its methods are safe for concurrent use.
type Session struct {
	b         api.Backend
	clock     Clock
	id        string
	name      string
	lockDelay time.Duration
	grace     time.Duration
	onEvent   func(Event)
	faults    faults // none but in a build with -tags raftlock_faults

	ctx    context.Context // done when the session is over
	cancel context.CancelFunc
	events chan Event
	// results carries keepalive answers to the loop; loopDone is closed
	// when the loop exits; wg counts the loop and every helper goroutine.
	results    chan kaResult
	loopDone   chan struct{}
	wg         sync.WaitGroup
	inCallback atomic.Bool

	mu       sync.Mutex
	state    State
	ttl      time.Duration
	leaseEnd time.Time
	locks    map[*Lock]struct{}
	// acquiring names the locks an acquire of this session is under way
	// for (claim): with locks, one grant per lock name.
	acquiring map[string]struct{}
	closing   bool // Close was called
	gone      bool // the server reported the session not found
	// lapsed is set while the lease, counted from the last acknowledged
	// keepalive, has run past LostAfter: every lock is lost, and a grant
	// that arrives now is lost at once. An acknowledged keepalive clears
	// it and the lost grants are released.
	lapsed bool
	// revoked are the revoked grants the last acknowledged keepalive
	// named: a grant registered after that answer is checked against
	// them too.
	revoked []api.RevokedGrant
}

// Open opens a session on b and starts its keepalive loop. It makes one
// call: the Backend retries what fails transiently (api.Backend), so an
// error is the answer.
func Open(ctx context.Context, b api.Backend, opts ...Option) (*Session, error) {
	cfg := sessionConfig{grace: DefaultGracePeriod}
	for _, o := range opts {
		o(&cfg)
	}
	if b == nil {
		return nil, api.Errorf(api.CodeInvalidArgument, "session: nil backend")
	}
	if cfg.grace < 0 {
		return nil, api.Errorf(api.CodeInvalidArgument, "session: negative grace period %v", cfg.grace)
	}
	if cfg.clock == nil {
		cfg.clock = RealClock()
	}
	// The lease counts from before the call: the leader starts it later.
	sent := cfg.clock.Now()
	info, err := b.OpenSession(ctx, api.OpenRequest{Name: cfg.name, TTL: cfg.ttl, LockDelay: cfg.lockDelay})
	if err != nil {
		return nil, err
	}
	ttl := info.TTL
	if ttl <= 0 {
		ttl = cfg.ttl
	}
	if ttl <= 0 {
		ttl = api.DefaultTTL
	}
	s := &Session{
		b:         b,
		clock:     cfg.clock,
		id:        info.ID,
		name:      info.Name,
		lockDelay: info.LockDelay,
		grace:     cfg.grace,
		onEvent:   cfg.onEvent,
		faults:    cfg.faults,
		events:    make(chan Event, eventBuffer),
		results:   make(chan kaResult),
		loopDone:  make(chan struct{}),
		state:     Safe,
		ttl:       ttl,
		leaseEnd:  sent.Add(ttl),
		locks:     make(map[*Lock]struct{}),
	}
	if s.name == "" {
		s.name = cfg.name
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Add(1)
	go s.run(sent)
	return s, nil
}

// ID returns the session id: a secret capability (whoever knows it can keep
// the session alive, release its locks or close it); show Handle instead.
func (s *Session) ID() string { return s.id }

// Handle returns the session's public handle (api.SessionHandle of its
// id): how lock states, election leaders and the cluster's logs name it.
func (s *Session) Handle() string { return api.SessionHandle(s.id) }

// Name returns the session's descriptive name.
func (s *Session) Name() string { return s.name }

// TTL returns the session's lease as last granted by the cluster.
func (s *Session) TTL() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ttl
}

// LockDelay returns the session's lock-delay as granted at Open.
func (s *Session) LockDelay() time.Duration { return s.lockDelay }

// State returns the session's current state.
func (s *Session) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// Safe reports whether the session is in state Safe, i.e. its locks can be
// trusted now.
func (s *Session) Safe() bool { return s.State() == Safe }

// Events returns the session's state changes. The channel is buffered and
// never blocks the keepalive loop: when it is full the oldest event is
// dropped. It is closed after the final event (Expired or Closed).
func (s *Session) Events() <-chan Event { return s.events }

// Done is closed when the session is over (expired or closed) and its
// keepalive loop has stopped.
func (s *Session) Done() <-chan struct{} { return s.loopDone }

// Close ends the session: it stops the keepalive loop, marks every lock lost
// (closing its Lost channel) and asks the cluster to close the session,
// which releases its locks at once, without lock-delay (one call; the
// Backend retries transient failures until ctx is done). Close waits for the session's goroutines to
// stop (unless called from an OnEvent callback). Repeated calls return nil.
func (s *Session) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil
	}
	s.closing = true
	expired, gone := s.state == Expired, s.gone
	if !expired {
		s.state = Closed
	}
	s.loseAllLocked()
	s.mu.Unlock()

	s.cancel()
	if !s.inCallback.Load() {
		stopped := make(chan struct{})
		go func() { s.wg.Wait(); close(stopped) }()
		select {
		case <-stopped:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	switch {
	case gone:
		return nil
	case expired:
		// The client gave up on the session; tell the cluster, best effort.
		_ = s.b.CloseSession(ctx, s.id)
		return nil
	}
	err := s.b.CloseSession(ctx, s.id)
	if errors.Is(err, api.ErrSessionNotFound) {
		return nil
	}
	return err
}

// loseAllLocked marks every lock of the session lost and forgets them.
func (s *Session) loseAllLocked() {
	for l := range s.locks {
		l.loseLocked()
		delete(s.locks, l)
	}
}

// overErr is the error of an operation on a session that is over.
func (s *Session) overErr() error {
	return api.Errorf(api.CodeSessionNotFound, "session (handle %s) is %s", api.SessionHandle(s.id), s.State())
}

// ---- keepalive loop ----

type kaResult struct {
	seq       uint64
	sent      time.Time
	ttl       time.Duration
	revoked   []api.RevokedGrant
	requested []api.ReleaseRequestedGrant
	err       error
}

type kaCall struct {
	seq    uint64
	cancel context.CancelFunc
}

// retryInterval is the keepalive cadence in jeopardy and after an error.
func retryInterval(ttl time.Duration) time.Duration {
	d := ttl / 10
	if d < minJeopardyRetry {
		d = minJeopardyRetry
	}
	if d > ttl/3 {
		d = ttl / 3
	}
	if d <= 0 {
		d = minJeopardyRetry
	}
	return d
}

// run is the keepalive loop. It sends a keepalive every ttl/3 (every
// retryInterval in jeopardy or after an error), each in a short-lived
// goroutine so that a hung call never delays the loop's timers; a call still
// pending when the next one is due is cancelled. The lease is counted from
// the send time of the acknowledged keepalive.
//
// The timeline, from the send time of the last acknowledged keepalive:
// jeopardy at ttl (at lostAt if that comes first), every lock lost at
// lostAt = LostAfter(ttl, lockDelay), the session expired at ttl + grace.
func (s *Session) run(opened time.Time) {
	defer s.wg.Done()
	defer close(s.loopDone)

	s.mu.Lock()
	ttl, leaseEnd := s.ttl, s.leaseEnd
	s.mu.Unlock()

	var (
		state       = Safe
		lapsed      bool // every lock was lost at lostAt
		lastSend    = opened
		nextSend    = opened.Add(ttl / 3)
		jeopardyEnd time.Time
		cur         *kaCall
		seq         uint64
		lastErr     error
	)
	// lostAt and jeopardyAt follow leaseEnd and ttl.
	lostAt := func() time.Time { return leaseEnd.Add(s.lockDelay - LostMargin(ttl, s.lockDelay)) }
	jeopardyAt := func() time.Time {
		if l := lostAt(); l.Before(leaseEnd) {
			return l
		}
		return leaseEnd
	}
	timer := s.clock.NewTimer(nextSend.Sub(s.clock.Now()))
	defer timer.Stop()
	defer func() {
		if cur != nil {
			cur.cancel()
		}
	}()

	for {
		now := s.clock.Now()
		if state == Safe && !now.Before(jeopardyAt()) {
			if !s.setState(Jeopardy, now, lastErr) {
				s.finishClosed()
				return
			}
			state = Jeopardy
			jeopardyEnd = leaseEnd.Add(s.grace)
			if next := lastSend.Add(retryInterval(ttl)); next.Before(nextSend) {
				nextSend = next
			}
		}
		if state == Jeopardy && !lapsed && !now.Before(lostAt()) {
			s.lapse()
			lapsed = true
		}
		if state == Jeopardy && !now.Before(jeopardyEnd) {
			cause := fmt.Errorf("session (handle %s): no keepalive acknowledged within the %v grace period after the lease ended", api.SessionHandle(s.id), s.grace)
			if lastErr != nil {
				cause = fmt.Errorf("%w (last keepalive error: %w)", cause, lastErr)
			}
			s.expire(now, cause)
			return
		}
		if !now.Before(nextSend) {
			if cur != nil {
				cur.cancel() // overdue: abandon it, its answer is still used if it comes
			}
			seq++
			cur = s.startKeepAlive(seq, now, ttl)
			lastSend = now
			if state == Safe {
				nextSend = now.Add(ttl / 3)
			} else {
				nextSend = now.Add(retryInterval(ttl))
			}
		}
		wake := nextSend
		if j := jeopardyAt(); state == Safe && j.Before(wake) {
			wake = j
		}
		if l := lostAt(); state == Jeopardy && !lapsed && l.Before(wake) {
			wake = l
		}
		if state == Jeopardy && jeopardyEnd.Before(wake) {
			wake = jeopardyEnd
		}
		timer.Reset(wake.Sub(s.clock.Now()))

		select {
		case <-s.ctx.Done():
			s.finishClosed()
			return
		case <-timer.C():
		case r := <-s.results:
			current := cur != nil && r.seq == cur.seq
			if current {
				cur.cancel()
				cur = nil
			}
			switch {
			case r.err == nil:
				// Before the lease moves on: a revoked grant is lost
				// whatever the lease says.
				s.revoke(r.revoked)
				s.releaseRequested(r.requested)
				if r.ttl > 0 {
					ttl = r.ttl
				}
				if end := r.sent.Add(ttl); end.After(leaseEnd) {
					leaseEnd = end
				}
				s.mu.Lock()
				s.ttl, s.leaseEnd = ttl, leaseEnd
				s.mu.Unlock()
				lastErr = nil
				if current {
					nextSend = r.sent.Add(ttl / 3)
				}
				if now := s.clock.Now(); state == Jeopardy && now.Before(jeopardyAt()) {
					if !s.setState(Safe, now, nil) {
						s.finishClosed()
						return
					}
					state = Safe
					if lapsed {
						lapsed = false
						s.releaseLapsed(ttl)
					}
				}
			case sessionGone(r.err):
				s.mu.Lock()
				s.gone = true
				s.mu.Unlock()
				s.expire(s.clock.Now(), r.err)
				return
			case current:
				// Try again soon, or when the next keepalive was due
				// anyway (an attempt cut by its deadline fails then).
				lastErr = r.err
				if next := s.clock.Now().Add(retryInterval(ttl)); next.Before(nextSend) {
					nextSend = next
				}
			}
		}
	}
}

// sessionGone reports whether a keepalive's (or any call's) answer says
// the session is over on the cluster: session_not_found, or, from the
// leader that authenticates every call, unauthenticated or
// permission_denied, which mean that the token that opened the session is
// deleted (deleting a token ends its sessions) or no longer owns it. None
// of them is a passing failure: retrying would keep the session "safe"
// with locks the cluster has taken back.
func sessionGone(err error) bool {
	switch api.CodeOf(err) {
	case api.CodeSessionNotFound, api.CodeUnauthenticated, api.CodePermissionDenied:
		return true
	}
	return false
}

// reportGone hands the loop an answer that says the session is over (an
// acquire's or a release's), so that it expires the session and loses
// every lock at once instead of at the next keepalive.
func (s *Session) reportGone(err error) {
	select {
	case s.results <- kaResult{err: err}:
	case <-s.loopDone:
	}
}

// lapse loses every lock of the session: its lease ran past LostAfter
// without an acknowledged keepalive, so the cluster may soon grant them to
// someone else. The grants stay registered until the session recovers
// (releaseLapsed) or ends.
func (s *Session) lapse() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lapsed = true
	for l := range s.locks {
		l.loseLocked()
	}
}

// releaseLapsed runs when a keepalive is acknowledged after the lease
// lapsed: the session survived, so the cluster still holds the grants whose
// Lost() closed; they are released in the background, each as Unlock would.
func (s *Session) releaseLapsed(ttl time.Duration) {
	s.mu.Lock()
	s.lapsed = false
	var lost []*Lock
	for l := range s.locks {
		if l.isLost && !l.released {
			lost = append(lost, l)
		}
	}
	s.wg.Add(len(lost))
	s.mu.Unlock()
	for _, l := range lost {
		go func() {
			defer s.wg.Done()
			ctx, cancel := withTimeout(s.ctx, s.clock, ttl)
			defer cancel()
			_ = l.Unlock(ctx)
		}()
	}
}

// LostDeadline returns the moment, on the session's Clock, when every lock
// of the session is lost unless a keepalive is acknowledged before:
// LostAfter(ttl, lockDelay) after the send time of the last acknowledged
// keepalive. It moves forward with every acknowledged keepalive. A program
// that needs time to stop using a lock (exec's child, a flush) starts
// stopping that long before it, once the session is in jeopardy.
func (s *Session) LostDeadline() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leaseEnd.Add(s.lockDelay - LostMargin(s.ttl, s.lockDelay))
}

// startKeepAlive sends one keepalive from its own goroutine; the answer
// comes back on s.results. The call has a deadline of ttl/3, the keepalive
// cadence: a backend that splits it between attempts (client.Client)
// moves on from a node that does not answer in time, so that a frozen or
// black-holed node costs one late keepalive, never the lease.
func (s *Session) startKeepAlive(seq uint64, sent time.Time, ttl time.Duration) *kaCall {
	ctx, cancel := withTimeout(s.ctx, s.clock, ttl/3)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		a, err := s.b.KeepAlive(ctx, s.id)
		select {
		case s.results <- kaResult{seq: seq, sent: sent, ttl: a.TTL, revoked: a.Revoked, requested: a.ReleaseRequested, err: err}:
		case <-s.loopDone:
		}
	}()
	return &kaCall{seq: seq, cancel: cancel}
}

// setState moves the session to st and emits the event, unless the session
// is already over (Close won the race), in which case it reports false.
// Only the loop calls it.
func (s *Session) setState(st State, at time.Time, err error) bool {
	s.mu.Lock()
	if s.state.over() {
		s.mu.Unlock()
		return false
	}
	s.state = st
	if st == Expired {
		s.loseAllLocked()
	}
	s.mu.Unlock()
	s.emit(Event{State: st, At: at, Err: err})
	return true
}

// expire ends the session as Expired (or as Closed if Close won the race).
func (s *Session) expire(at time.Time, err error) {
	if !s.setState(Expired, at, err) {
		s.finishClosed()
		return
	}
	s.cancel()
	close(s.events)
}

// finishClosed emits the final Closed event after Close.
func (s *Session) finishClosed() {
	s.emit(Event{State: Closed, At: s.clock.Now()})
	close(s.events)
}

// emit delivers ev to the Events channel, dropping the oldest event if it is
// full, then to the OnEvent callback. Only the loop goroutine emits.
func (s *Session) emit(ev Event) {
	for {
		select {
		case s.events <- ev:
		default:
			select {
			case <-s.events:
			default:
			}
			continue
		}
		break
	}
	if s.onEvent != nil {
		s.inCallback.Store(true)
		defer s.inCallback.Store(false)
		s.onEvent(ev)
	}
}

// ---- locks ----

// LockOption configures an acquisition.
type LockOption func(*lockConfig)

type lockConfig struct {
	value   string
	maxHold time.Duration
	permits uint64
}

// MaxHold sets the grant's hold limit (api.MinMaxHold to api.MaxMaxHold):
// the cluster revokes the grant d after it was made. The client closes
// the lock's Lost() first, d − 1% after the send time of the latest
// acquire request the cluster answered "not granted" (else of the first),
// which came before the grant, with a *RevokedError of Kind "max_hold"
// from Err. A wait with a hold limit asks once without waiting (a probe)
// at the end of each slice of at most d/2, so at least half of d is left
// when the grant comes. Every member must run a build that reads command
// version 5.
func MaxHold(d time.Duration) LockOption { return func(c *lockConfig) { c.maxHold = d } }

// Value sets the value the holder attaches to the lock (up to
// MaxValueBytes), e.g. an elected leader's address.
func Value(v string) LockOption { return func(c *lockConfig) { c.value = v } }

// Permits takes one slot of a semaphore of n slots (1 to api.MaxPermits)
// rather than the plain lock: at most n handles hold the name at once,
// each in its own slot (Lock.Slot) with its own token, and its sequencer
// names the slot. Exclusive only (Lock, TryLock); every holder and waiter
// of the name must pass the same n, or the acquire fails with
// invalid_argument.
func Permits(n uint64) LockOption { return func(c *lockConfig) { c.permits = n } }

// Lock is a handle on one grant of a lock to this session. Lost is closed
// when the grant can no longer be trusted.
type Lock struct {
	s      *Session
	name   string
	holder string
	mode   sequencer.Mode
	value  string
	grant  api.Grant
	lost   chan struct{}

	unlockMu sync.Mutex // serialises Unlock
	// guarded by s.mu
	isLost   bool
	released bool
	// revokedBy is set when the cluster revoked the grant (Err).
	revokedBy *RevokedError
	// requested is closed when another session asked for the lock
	// (ReleaseRequested); requestedBy says who.
	requested   chan struct{}
	requestedBy *api.ReleaseRequestedGrant
}

// ReleaseRequested returns a channel closed when another session asked
// this grant's holder to release it (POST /v1/locks/request-release), as
// a keepalive's answer said: the holder chooses whether and when to
// Unlock. RequestedBy says who asked.
func (l *Lock) ReleaseRequested() <-chan struct{} { return l.requested }

// RequestedBy returns who asked the holder to release the grant, and
// when; false until someone did.
func (l *Lock) RequestedBy() (api.ReleaseRequestedGrant, bool) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.requestedBy == nil {
		return api.ReleaseRequestedGrant{}, false
	}
	return *l.requestedBy, true
}

// releaseRequested closes ReleaseRequested of the session's locks that a
// keepalive answer names.
func (s *Session) releaseRequested(rs []api.ReleaseRequestedGrant) {
	if len(rs) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for l := range s.locks {
		for _, r := range rs {
			if r.Name == l.name && r.Holder == l.holder && r.Token == l.grant.Token && l.requestedBy == nil {
				r := r
				l.requestedBy = &r
				close(l.requested)
			}
		}
	}
}

// RequestRelease asks the holders of lock name to release it on behalf of
// this session (write on the lock): each sees it at its next keepalive
// (Lock.ReleaseRequested) and chooses. A lock not held is not_found.
func (s *Session) RequestRelease(ctx context.Context, name string) error {
	if s.State().over() {
		return s.overErr()
	}
	rb, ok := s.b.(interface {
		RequestRelease(context.Context, api.RequestReleaseRequest) error
	})
	if !ok {
		return api.Errorf(api.CodeInvalidArgument, "session: this backend does not pass release requests")
	}
	return rb.RequestRelease(ctx, api.RequestReleaseRequest{Name: name, Session: s.id, Holder: "request-" + newHolderID()[:16]})
}

// RevokedError says that a lock's grant was revoked by the cluster: an
// operator's revocation (Kind "admin", with the operator's Reason) or
// the end of its hold limit (Kind "max_hold"). Its Lost() closed when
// the session's keepalive answer named it, before the cluster can grant
// the lock again.
type RevokedError struct {
	Name   string
	Token  sequencer.Token
	Kind   string
	Reason string
}

func (e *RevokedError) Error() string {
	if e.Kind == "max_hold" {
		return fmt.Sprintf("lock %q (token %d) revoked: its hold limit (max_hold) ran out", e.Name, e.Token)
	}
	return fmt.Sprintf("lock %q (token %d) revoked by an operator: %s", e.Name, e.Token, e.Reason)
}

// revoke loses the session's locks that a keepalive answer names as
// revoked (their Lost closes at once; the grant is gone on the cluster,
// so no release is needed) and remembers the answer for later grants.
func (s *Session) revoke(revoked []api.RevokedGrant) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revoked = revoked
	if len(revoked) == 0 {
		return
	}
	for l := range s.locks {
		for _, g := range revoked {
			if g.Name == l.name && g.Holder == l.holder && g.Token == l.grant.Token {
				s.revokeLocked(l, g)
			}
		}
	}
}

// revokeLocked loses l, revoked as g; s.mu is held.
func (s *Session) revokeLocked(l *Lock, g api.RevokedGrant) {
	if l.revokedBy == nil {
		l.revokedBy = &RevokedError{Name: g.Name, Token: g.Token, Kind: g.Kind, Reason: g.Reason}
	}
	l.loseLocked()
	l.released = true // the cluster ended the grant: nothing to release
	delete(s.locks, l)
}

// Lock acquires name exclusively, waiting as long as ctx allows. It returns
// ctx.Err() if ctx ends first. Locks are not re-entrant (like sync.Mutex):
// while the session holds name (a Lock not yet unlocked) or acquires it
// already, Lock, TryLock, RLock and TryRLock of name fail at once with an
// error matching api.ErrAlreadyHeld (code already_held) naming the lock
// and the holder id, instead of waiting on the session's own grant.
//
// A grant answered LostAfter(ttl, lockDelay) or more after its request was
// sent is not trusted (a revocation may have come and gone from the
// keepalive answers meanwhile): the request is sent again, and only an
// answer in time counts. If the grant is gone by then, Lock waits on and
// TryLock (TryRLock) returns lock_busy.
func (s *Session) Lock(ctx context.Context, name string, opts ...LockOption) (*Lock, error) {
	return s.acquire(ctx, name, sequencer.Exclusive, true, opts)
}

// TryLock acquires name exclusively if it is free now; otherwise it returns
// an error matching ErrLockBusy.
func (s *Session) TryLock(ctx context.Context, name string, opts ...LockOption) (*Lock, error) {
	return s.acquire(ctx, name, sequencer.Exclusive, false, opts)
}

// RLock acquires name in shared mode, waiting as long as ctx allows.
func (s *Session) RLock(ctx context.Context, name string, opts ...LockOption) (*Lock, error) {
	return s.acquire(ctx, name, sequencer.Shared, true, opts)
}

// TryRLock acquires name in shared mode if possible now; otherwise it
// returns an error matching ErrLockBusy.
func (s *Session) TryRLock(ctx context.Context, name string, opts ...LockOption) (*Lock, error) {
	return s.acquire(ctx, name, sequencer.Shared, false, opts)
}

// claim marks an acquire of name under way, or refuses it at once
// (already_held) while the session holds name (a Lock not yet unlocked,
// lost or not) or another acquire of name is under way: locks are not
// re-entrant, and a second grant to the same session would wait on the
// first forever (DESIGN.md, "Re-entrancy").
func (s *Session) claim(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for l := range s.locks {
		if l.name == name && !l.released {
			return api.Errorf(api.CodeAlreadyHeld,
				"lock %s: this session (handle %s) already holds it (holder %s, token %d); locks are not re-entrant: Unlock it first, or use the Lock you have",
				name, api.SessionHandle(s.id), l.holder, l.grant.Token)
		}
	}
	if _, ok := s.acquiring[name]; ok {
		return api.Errorf(api.CodeAlreadyHeld,
			"lock %s: this session (handle %s) is acquiring it already; locks are not re-entrant: one grant (or attempt) per session and lock", name, api.SessionHandle(s.id))
	}
	if s.acquiring == nil {
		s.acquiring = map[string]struct{}{}
	}
	s.acquiring[name] = struct{}{}
	return nil
}

// unclaim ends the acquire of name that claim marked.
func (s *Session) unclaim(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.acquiring, name)
}

// register turns a grant into a Lock handle of the session. notBefore is
// a moment the grant cannot have been made before (acquire): its hold
// limit counts from there.
func (s *Session) register(req api.AcquireRequest, g api.Grant, notBefore time.Time) (*Lock, error) {
	if g.Name == "" {
		g.Name = req.Name
	}
	if g.Mode == 0 {
		g.Mode = req.Mode
	}
	if g.Sequencer == (sequencer.Sequencer{}) {
		g.Sequencer = sequencer.Sequencer{Name: g.Name, Mode: g.Mode, Token: g.Token}
		if req.Permits > 0 {
			g.Sequencer.Semaphore, g.Sequencer.Slot, g.Sequencer.Permits = true, g.Slot, req.Permits
		}
	}
	if g.Permits == 0 {
		g.Permits = req.Permits
	}
	l := &Lock{s: s, name: req.Name, holder: req.Holder, mode: g.Mode, value: req.Value, grant: g, lost: make(chan struct{}),
		requested: make(chan struct{})}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state.over() {
		// Closed: CloseSession released it; expired: it is gone anyway.
		return nil, api.Errorf(api.CodeSessionNotFound, "session (handle %s) is %s", api.SessionHandle(s.id), s.state)
	}
	s.locks[l] = struct{}{}
	for _, g := range s.revoked {
		if g.Name == l.name && g.Holder == l.holder && g.Token == l.grant.Token {
			s.revokeLocked(l, g)
		}
	}
	if s.lapsed {
		// Granted while the lease is past LostAfter: not to be trusted; it
		// is released when the session recovers.
		l.loseLocked()
	}
	if req.MaxHold > 0 {
		s.wg.Add(1)
		go s.holdLimit(l, notBefore.Add(req.MaxHold-req.MaxHold/100))
	}
	return l, nil
}

// holdLimit loses l at deadline (its hold limit, counted from before its
// grant), unless it is lost or the session ends first.
func (s *Session) holdLimit(l *Lock, deadline time.Time) {
	defer s.wg.Done()
	t := s.clock.NewTimer(deadline.Sub(s.clock.Now()))
	defer t.Stop()
	select {
	case <-t.C():
	case <-l.lost:
		return
	case <-s.ctx.Done():
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.revokedBy == nil && !l.isLost {
		l.revokedBy = &RevokedError{Name: l.name, Token: l.grant.Token, Kind: "max_hold"}
	}
	l.loseLocked()
}

// releaseAbandoned releases, in the background, a grant or a queue place
// that an abandoned acquire may have obtained. It keeps trying until the
// cluster answers (released, or not_holder: there was nothing to give back)
// or the session is over (expired or closed: the cluster frees the
// session's grants and places itself), because a place left behind is
// granted later and then held by nobody for as long as the session lives.
// Each attempt is bounded by the session's TTL (the Backend retries
// transient failures within it); the pause between attempts doubles from
// retryInterval(ttl) to ttl. An outage longer than one TTL (a quorum loss,
// a lost-quorum recovery) therefore delays the release, never drops it.
func (s *Session) releaseAbandoned(name, holder string) {
	s.mu.Lock()
	if s.state.over() {
		s.mu.Unlock()
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		req := api.ReleaseRequest{Name: name, Session: s.id, Holder: holder}
		var pause time.Duration
		for {
			ttl := s.TTL()
			ctx, cancel := withTimeout(s.ctx, s.clock, ttl)
			err := s.b.Release(ctx, req)
			cancel()
			if s.ctx.Err() != nil || !releaseRetryable(err) {
				return
			}
			if pause == 0 {
				pause = retryInterval(ttl)
			} else {
				pause = min(2*pause, ttl)
			}
			if sleep(s.ctx, s.clock, pause) != nil {
				return
			}
		}
	}()
}

// releaseRetryable reports whether a background release that failed with
// err should be tried again: the cluster did not answer (no leader, an
// unknown outcome, no node reachable, the attempt's deadline, any error
// that is not the cluster's answer) or answered that it is out of a
// resource for now. Any other answer is final: released (nil), not_holder
// (nothing to give back), session_not_found (the session is gone, and its
// grants with it), or a refusal that a retry would meet again.
func releaseRetryable(err error) bool {
	if err == nil {
		return false
	}
	switch api.CodeOf(err) {
	case api.CodeNoLeader, api.CodeUnknownOutcome, api.CodeUnreachable, api.CodeInternal, api.CodeResourceExhausted:
		return true
	}
	return false
}

// link returns a context done when ctx is done or the session is over.
func (s *Session) link(ctx context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.ctx, cancel)
	return c, func() { stop(); cancel() }
}

// Name returns the lock's name.
func (l *Lock) Name() string { return l.name }

// Mode returns the mode the lock was granted in.
func (l *Lock) Mode() sequencer.Mode { return l.mode }

// Holder returns the handle's holder id (128 random bits, hex).
func (l *Lock) Holder() string { return l.holder }

// Value returns the value set at acquisition.
func (l *Lock) Value() string { return l.value }

// Sequencer returns the grant's fencing sequencer.
func (l *Lock) Sequencer() sequencer.Sequencer { return l.grant.Sequencer }

// Permits returns the semaphore's permits the lock was taken with (0: a
// plain lock; see Permits).
func (l *Lock) Permits() uint64 { return l.grant.Permits }

// Slot returns the semaphore slot granted (0 to Permits()-1; 0 on a plain
// lock). Its sequencer names it.
func (l *Lock) Slot() uint64 { return l.grant.Slot }

// Token returns the grant's fencing token.
func (l *Lock) Token() sequencer.Token { return l.grant.Token }

// Term returns the Raft term of the leader that granted the lock.
func (l *Lock) Term() uint64 { return l.grant.Term }

// Session returns the session holding the lock.
func (l *Lock) Session() *Session { return l.s }

// Lost returns a channel closed when the lock can no longer be trusted,
// always before the cluster could grant it to anyone else: when the
// session's lease, counted from the send time of its last acknowledged
// keepalive, has run for LostAfter(ttl, lockDelay) (lease end + lock-delay −
// LostMargin; by lease end with no lock-delay), when the session expires or
// is closed, or when Unlock is called. Between lease end and that moment the
// session is in jeopardy (Session.Safe reports false) and the channel is
// still open. A lock whose Lost closed stays lost: if the session recovers,
// the client releases the grant. A grant that arrives while the session's
// lease is past LostAfter comes back with Lost already closed.
func (l *Lock) Lost() <-chan struct{} { return l.lost }

// Err returns why Lost closed: a *RevokedError when the cluster revoked
// the grant (an operator, or its hold limit), else nil (the lease, the
// session's end or Unlock).
func (l *Lock) Err() error {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.revokedBy == nil {
		return nil
	}
	return l.revokedBy
}

// loseLocked closes Lost once; s.mu is held.
func (l *Lock) loseLocked() {
	if !l.isLost {
		l.isLost = true
		close(l.lost)
	}
}

// Unlock releases the lock (closing Lost first), in one call: the Backend
// retries transient failures until ctx is done. A failed Unlock may be
// called again. Once it
// has succeeded, or once the session is over (its locks are released or
// gone already), Unlock returns nil without contacting the cluster.
func (l *Lock) Unlock(ctx context.Context) error {
	l.unlockMu.Lock()
	defer l.unlockMu.Unlock()
	s := l.s
	s.mu.Lock()
	if l.released {
		s.mu.Unlock()
		return nil
	}
	l.loseLocked()
	if s.state.over() {
		l.released = true
		delete(s.locks, l)
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()

	actx, stop := s.link(ctx)
	defer stop()
	err := s.b.Release(actx, api.ReleaseRequest{Name: l.name, Session: s.id, Holder: l.holder})
	definitive := err == nil || errors.Is(err, api.ErrNotHolder) || errors.Is(err, api.ErrSessionNotFound)
	if err != nil && !definitive {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if s.State().over() {
			definitive, err = true, nil
		}
	}
	if definitive {
		s.mu.Lock()
		l.released = true
		delete(s.locks, l)
		s.mu.Unlock()
	}
	return err
}

// ---- helpers ----

// newHolderID returns 128 random bits in hex.
func newHolderID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}
