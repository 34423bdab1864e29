package main

import (
	"context"
	"time"

	"github.com/raftlock/raftlock/session"
)

// The workload drives a client library through these two interfaces: the
// Go session package (goSession, goLock) or a conformance worker speaking
// docs/CONFORMANCE.md's line protocol (workerSession, workerLock).

// clientSession is one session of the client under test.
type clientSession interface {
	// ID is the session's id (a secret: it goes to the checker only).
	ID() string
	// Safe reports whether the session is safe (not in jeopardy, not over).
	Safe() bool
	// Over reports whether the session expired or was closed.
	Over() bool
	// TryLock tries name once; Lock waits for it until ctx ends (for a
	// worker: until ctx's deadline, or wait if ctx has none).
	TryLock(ctx context.Context, name string) (clientLock, error)
	Lock(ctx context.Context, name string) (clientLock, error)
	Close(ctx context.Context) error
}

// clientLock is one grant of the client under test.
type clientLock interface {
	Name() string
	Token() uint64
	Holder() string
	// Seq is the grant's sequencer, printed.
	Seq() string
	// Lost is closed when the grant can no longer be trusted.
	Lost() <-chan struct{}
	Unlock(ctx context.Context) error
}

// goSession is a clientSession of the Go session package; permits above
// 0 takes every lock as a semaphore of that many slots; pick, if set,
// picks each acquire's kind (--mixed-kinds): shared, or its permits;
// maxHold, if set, picks each acquire's hold limit (0: none).
type goSession struct {
	*session.Session
	permits uint64
	pick    func(name string) (shared bool, permits uint64)
	maxHold func() time.Duration
}

// kind returns the next acquire's kind and options.
func (s goSession) kind(name string) (shared bool, opts []session.LockOption) {
	n := s.permits
	if s.pick != nil {
		shared, n = s.pick(name)
	}
	if n > 0 {
		opts = []session.LockOption{session.Permits(n)}
	}
	if s.maxHold != nil {
		if d := s.maxHold(); d > 0 {
			opts = append(opts, session.MaxHold(d))
		}
	}
	return shared, opts
}

func (s goSession) Over() bool {
	st := s.State()
	return st == session.Expired || st == session.Closed
}

func (s goSession) TryLock(ctx context.Context, name string) (clientLock, error) {
	try := s.Session.TryLock
	shared, opts := s.kind(name)
	if shared {
		try = s.Session.TryRLock
	}
	l, err := try(ctx, name, opts...)
	if err != nil {
		return nil, err
	}
	return goLock{l}, nil
}

func (s goSession) Lock(ctx context.Context, name string) (clientLock, error) {
	lock := s.Session.Lock
	shared, opts := s.kind(name)
	if shared {
		lock = s.Session.RLock
	}
	l, err := lock(ctx, name, opts...)
	if err != nil {
		return nil, err
	}
	return goLock{l}, nil
}

// goLock is a clientLock of the Go session package.
type goLock struct{ *session.Lock }

func (l goLock) Token() uint64 { return uint64(l.Lock.Token()) }
func (l goLock) Seq() string   { return l.Sequencer().String() }
