package main

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftlock/raftlock/api"

	"github.com/raftlock/raftlock/cmd/raftlock-bench/internal/bench"
	"github.com/raftlock/raftlock/transport/client"
)

// keeper is the session load of scenario (c): many sessions kept alive by
// one scheduler (a heap of due times) and a fixed pool of workers calling
// Client.KeepAlive, instead of one session.Session keepalive loop per
// session. It follows the same rules as session.Session: a keepalive every
// ttl/3, the lease counted from the send time of the acknowledged
// keepalive, a retry every ttl/10 after an error.
type keeper struct {
	c       *client.Client
	ttl     time.Duration
	workers int
	prefix  string
	// openRate paces the opens (Options.OpenRate).
	openRate float64

	ctx    context.Context
	cancel context.CancelFunc
	work   chan *kaSession
	wake   chan struct{}
	wg     sync.WaitGroup

	mu       sync.Mutex
	due      dueHeap
	sessions []*kaSession
	started  bool
	closed   bool

	acked, late, spurious, lapsed, refusedAtEnd atomic.Int64
	lat                                         bench.Latencies
}

// kaSession is one kept-alive session. Its fields are guarded by keeper.mu
// except id and ttl, which never change.
type kaSession struct {
	id  string
	ttl time.Duration

	next      time.Time // when the next keepalive is due
	leaseFrom time.Time // send time of the last acknowledged keepalive (or the open)
	index     int       // in the heap; -1 when not queued
	done      bool      // gone or lapsed: counted, no longer kept alive
	holder    string    // holder id of the lock it holds, if any
}

var _ bench.SessionLoad = (*keeper)(nil)

func newKeeper(c *client.Client, ttl time.Duration, workers int, openRate float64, prefix string) *keeper {
	ctx, cancel := context.WithCancel(context.Background())
	return &keeper{c: c, ttl: ttl, workers: workers, openRate: openRate, prefix: prefix, ctx: ctx, cancel: cancel,
		work: make(chan *kaSession), wake: make(chan struct{}, 1)}
}

// start starts the scheduler and the keepalive workers once.
func (k *keeper) start() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.started {
		return
	}
	k.started = true
	k.wg.Add(1 + k.workers)
	go k.schedule()
	for range k.workers {
		go k.keepAlives()
	}
}

// Open implements bench.SessionLoad.
func (k *keeper) Open(ctx context.Context, n int, lat *bench.Latencies) (int64, error) {
	k.start()
	k.mu.Lock()
	k.sessions = make([]*kaSession, n)
	k.mu.Unlock()
	var errs atomic.Int64
	_, err := bench.ForEachPaced(ctx, n, k.workers, k.openRate, func(ctx context.Context, i int) error {
		for {
			sent := time.Now()
			info, err := k.c.OpenSession(ctx, api.OpenRequest{TTL: k.ttl, LockDelay: api.NoLockDelay})
			if err == nil {
				lat.Add(time.Since(sent))
				ttl := info.TTL
				if ttl <= 0 {
					ttl = k.ttl
				}
				s := &kaSession{id: info.ID, ttl: ttl, leaseFrom: sent, next: sent.Add(ttl / 3), index: -1}
				k.mu.Lock()
				k.sessions[i] = s
				k.push(s)
				k.mu.Unlock()
				return nil
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// Retry: an unknown outcome may leave an orphan session, which
			// expires by itself.
			errs.Add(1)
			time.Sleep(50 * time.Millisecond)
		}
	})
	return errs.Load(), err
}

// Hold implements bench.SessionLoad: each of the first n sessions tries
// once to take a lock of its own.
func (k *keeper) Hold(ctx context.Context, n int) error {
	k.mu.Lock()
	ss := k.sessions[:min(n, len(k.sessions))]
	k.mu.Unlock()
	_, err := bench.ForEach(ctx, len(ss), k.workers, func(ctx context.Context, i int) error {
		s := ss[i]
		if s == nil {
			return nil
		}
		holder := fmt.Sprintf("h%d", i)
		_, err := k.c.Acquire(ctx, api.AcquireRequest{Name: fmt.Sprintf("%s/%d", k.prefix, i), Session: s.id, Holder: holder})
		if err != nil {
			return fmt.Errorf("acquire for session %s: %w", s.id, err)
		}
		k.mu.Lock()
		s.holder = holder
		k.mu.Unlock()
		return nil
	})
	return err
}

// Stats implements bench.SessionLoad.
func (k *keeper) Stats() bench.KeepAliveStats {
	lat := &bench.Latencies{}
	lat.Merge(&k.lat)
	return bench.KeepAliveStats{Acked: k.acked.Load(), Late: k.late.Load(), Spurious: k.spurious.Load(),
		RefusedAtLeaseEnd: k.refusedAtEnd.Load(), Lapsed: k.lapsed.Load(), Latency: lat}
}

// Close implements bench.SessionLoad: stops the keepalives, then closes
// every session still kept alive; one found gone is counted as an expiry.
func (k *keeper) Close(ctx context.Context) error {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return nil
	}
	k.closed = true
	k.mu.Unlock()
	k.cancel()
	k.wg.Wait()

	k.mu.Lock()
	var open []*kaSession
	for _, s := range k.sessions {
		if s != nil && !s.done {
			open = append(open, s)
		}
	}
	k.mu.Unlock()
	_, err := bench.ForEach(ctx, len(open), k.workers, func(ctx context.Context, i int) error {
		s := open[i]
		sent := time.Now()
		err := k.c.CloseSession(ctx, s.id)
		if errors.Is(err, api.ErrSessionNotFound) {
			k.mu.Lock()
			k.gone(s, sent)
			k.mu.Unlock()
			return nil
		}
		if err != nil {
			return fmt.Errorf("close session %s: %w", s.id, err)
		}
		return nil
	})
	return err
}

// gone records that the server reported s gone for a request sent at
// sent, answered now: spurious if the client's lease still ran when the
// answer arrived (the server expired the session before the lease ended);
// refused at the lease end if it ran when the request was sent but not
// when its answer arrived (the server may have expired the session after
// the lease end); lapsed otherwise. k.mu is held.
func (k *keeper) gone(s *kaSession, sent time.Time) {
	if s.done {
		return
	}
	s.done = true
	end := s.leaseFrom.Add(s.ttl)
	switch {
	case time.Now().Before(end):
		k.spurious.Add(1)
	case sent.Before(end):
		k.refusedAtEnd.Add(1)
	default:
		k.lapsed.Add(1)
	}
}

// schedule hands due sessions to the workers in due order.
func (k *keeper) schedule() {
	defer k.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		k.mu.Lock()
		var (
			s    *kaSession
			wait = time.Hour
		)
		if len(k.due) > 0 {
			if d := time.Until(k.due[0].next); d > 0 {
				wait = d
			} else {
				s = heap.Pop(&k.due).(*kaSession)
			}
		}
		k.mu.Unlock()
		if s != nil {
			select {
			case k.work <- s:
				continue
			case <-k.ctx.Done():
				return
			}
		}
		timer.Reset(wait)
		select {
		case <-k.ctx.Done():
			return
		case <-k.wake:
		case <-timer.C:
		}
	}
}

// keepAlives is one keepalive worker.
func (k *keeper) keepAlives() {
	defer k.wg.Done()
	for {
		var s *kaSession
		select {
		case <-k.ctx.Done():
			return
		case s = <-k.work:
		}
		sent := time.Now()
		k.mu.Lock()
		if sent.Sub(s.next) > bench.LateAfter {
			k.late.Add(1)
		}
		if !sent.Before(s.leaseFrom.Add(s.ttl)) {
			// The lease ran out on the client's side before this send:
			// keepalives were sent late or not acknowledged in time.
			s.done = true
			k.lapsed.Add(1)
			k.mu.Unlock()
			continue
		}
		k.mu.Unlock()

		ctx, cancel := context.WithTimeout(k.ctx, s.ttl/3)
		ka, err := k.c.KeepAlive(ctx, s.id)
		ttl := ka.TTL
		cancel()
		k.mu.Lock()
		switch {
		case err == nil:
			k.acked.Add(1)
			k.lat.Add(time.Since(sent))
			if ttl <= 0 {
				ttl = s.ttl
			}
			if sent.After(s.leaseFrom) {
				s.leaseFrom = sent
			}
			s.next = sent.Add(ttl / 3)
			k.push(s)
		case errors.Is(err, api.ErrSessionNotFound):
			k.gone(s, sent)
		case k.ctx.Err() != nil:
		default:
			s.next = time.Now().Add(max(s.ttl/10, 100*time.Millisecond))
			k.push(s)
		}
		k.mu.Unlock()
	}
}

// push queues s and wakes the scheduler. k.mu is held.
func (k *keeper) push(s *kaSession) {
	heap.Push(&k.due, s)
	select {
	case k.wake <- struct{}{}:
	default:
	}
}
