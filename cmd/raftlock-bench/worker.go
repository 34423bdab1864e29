package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/raftlock/raftlock/api"

	"github.com/raftlock/raftlock/session"
)

// worker is one benchmark client: a Session (with its own keepalive loop)
// doing acquire+release pairs on one lock with a blocking Lock.
type worker struct {
	b    api.Backend
	lock string
	ttl  time.Duration
	name string

	mu sync.Mutex
	s  *session.Session
}

// open opens (or reopens) the worker's session.
func (w *worker) open(ctx context.Context) error {
	s, err := session.Open(ctx, w.b, openOptions(w.ttl, w.name)...)
	if err != nil {
		return fmt.Errorf("open session: %w", err)
	}
	w.mu.Lock()
	w.s = s
	w.mu.Unlock()
	return nil
}

// Pair implements bench.Worker. A session that expired is reopened (the
// pair still counts as failed).
func (w *worker) Pair(ctx context.Context) (uint64, error) {
	w.mu.Lock()
	s := w.s
	w.mu.Unlock()
	if s.State() == session.Expired {
		if err := w.open(ctx); err != nil {
			return 0, err
		}
		return 0, fmt.Errorf("session %s expired; reopened", s.ID())
	}
	l, err := s.Lock(ctx, w.lock)
	if err != nil {
		return 0, fmt.Errorf("lock %s: %w", w.lock, err)
	}
	term := l.Term()
	if err := l.Unlock(ctx); err != nil {
		return term, fmt.Errorf("unlock %s: %w", w.lock, err)
	}
	return term, nil
}

// Close implements bench.Worker.
func (w *worker) Close(ctx context.Context) error {
	w.mu.Lock()
	s := w.s
	w.mu.Unlock()
	if err := s.Close(ctx); err != nil {
		return fmt.Errorf("close session %s: %w", s.ID(), err)
	}
	return nil
}
