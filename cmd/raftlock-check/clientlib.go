package main

import (
	"context"

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
// 0 takes every lock as a semaphore of that many slots.
type goSession struct {
	*session.Session
	permits uint64
}

// opts are the options of every acquire.
func (s goSession) opts() []session.LockOption {
	if s.permits > 0 {
		return []session.LockOption{session.Permits(s.permits)}
	}
	return nil
}

func (s goSession) Over() bool {
	st := s.State()
	return st == session.Expired || st == session.Closed
}

func (s goSession) TryLock(ctx context.Context, name string) (clientLock, error) {
	l, err := s.Session.TryLock(ctx, name, s.opts()...)
	if err != nil {
		return nil, err
	}
	return goLock{l}, nil
}

func (s goSession) Lock(ctx context.Context, name string) (clientLock, error) {
	l, err := s.Session.Lock(ctx, name, s.opts()...)
	if err != nil {
		return nil, err
	}
	return goLock{l}, nil
}

// goLock is a clientLock of the Go session package.
type goLock struct{ *session.Lock }

func (l goLock) Token() uint64 { return uint64(l.Lock.Token()) }
func (l goLock) Seq() string   { return l.Sequencer().String() }
