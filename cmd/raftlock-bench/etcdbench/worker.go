package main

import (
	"context"
	"fmt"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// worker is one benchmark client: its own etcd client, a concurrency
// Session (a lease kept alive by the client) and a Mutex.
type worker struct {
	c    *clientv3.Client
	ttl  int // seconds
	lock string

	mu sync.Mutex
	s  *concurrency.Session
	m  *concurrency.Mutex
}

// open opens (or reopens) the worker's session.
func (w *worker) open(ctx context.Context) error {
	s, err := concurrency.NewSession(w.c, concurrency.WithTTL(w.ttl), concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		return fmt.Errorf("etcd session: %w", err)
	}
	w.mu.Lock()
	w.s, w.m = s, concurrency.NewMutex(s, w.lock)
	w.mu.Unlock()
	return nil
}

// Pair implements bench.Worker. A session whose lease expired is reopened
// (the pair still counts as failed).
func (w *worker) Pair(ctx context.Context) (uint64, error) {
	w.mu.Lock()
	s, m := w.s, w.m
	w.mu.Unlock()
	select {
	case <-s.Done():
		if err := w.open(ctx); err != nil {
			return 0, err
		}
		return 0, fmt.Errorf("etcd session %x expired; reopened", s.Lease())
	default:
	}
	if err := m.Lock(ctx); err != nil {
		return 0, fmt.Errorf("lock %s: %w", w.lock, err)
	}
	var term uint64
	if h := m.Header(); h != nil {
		term = h.RaftTerm
	}
	if err := m.Unlock(ctx); err != nil {
		return term, fmt.Errorf("unlock %s: %w", w.lock, err)
	}
	return term, nil
}

// Close implements bench.Worker: revokes the lease and closes the client.
func (w *worker) Close(ctx context.Context) error {
	w.mu.Lock()
	s := w.s
	w.mu.Unlock()
	_, err := w.c.Revoke(ctx, s.Lease())
	s.Orphan()
	if cerr := w.c.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("close etcd session %x: %w", s.Lease(), err)
	}
	return nil
}
