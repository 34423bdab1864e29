package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/raftlock/raftlock/cmd/raftlock-bench/internal/bench"
)

// conns is the session load of scenario (c) on ZooKeeper. A ZooKeeper
// session lives on one TCP connection (the client moves it to another
// server only when its connection breaks), so S sessions are S
// connections, each kept alive by the library's own pings, one every
// TTL/3. The pings are seen through pingConn: acknowledged keepalives,
// their round trips, late ones. A session the server expired is reported
// by the library on reconnection (StateExpired).
type conns struct {
	endpoints []string
	ttl       time.Duration
	workers   int
	openRate  float64 // paces the opens (bench.Options.OpenRate)
	prefix    string

	mu     sync.Mutex
	list   []*zsession
	closed bool

	lat                           bench.Latencies
	acked, late, spurious, lapsed atomic.Int64
}

// zsession is one kept-alive session.
type zsession struct {
	cs *conns
	c  *zk.Conn
	// lastAck is the send time (unix nanos) of the last acknowledged ping,
	// or of the session's connect request: the lease the client may count
	// on runs a TTL from it.
	lastAck atomic.Int64
	// lastPing is the send time of the last ping (0: none yet).
	lastPing atomic.Int64
	done     atomic.Bool // gone: counted
}

var _ bench.SessionLoad = (*conns)(nil)

func newConns(endpoints []string, ttl time.Duration, workers int, openRate float64, prefix string) *conns {
	return &conns{endpoints: endpoints, ttl: ttl, workers: workers, openRate: openRate, prefix: prefix}
}

// Open implements bench.SessionLoad.
func (cs *conns) Open(ctx context.Context, n int, lat *bench.Latencies) (int64, error) {
	cs.mu.Lock()
	cs.list = make([]*zsession, n)
	cs.mu.Unlock()
	var errs atomic.Int64
	_, err := bench.ForEachPaced(ctx, n, cs.workers, cs.openRate, func(ctx context.Context, i int) error {
		for {
			s := &zsession{cs: cs}
			start := time.Now()
			s.lastAck.Store(start.UnixNano())
			c, err := connect(ctx, cs.endpoints, cs.ttl, sessionBuffer, s, s.event)
			if err == nil {
				lat.Add(time.Since(start))
				s.c = c
				cs.mu.Lock()
				cs.list[i] = s
				cs.mu.Unlock()
				return nil
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			errs.Add(1)
			time.Sleep(50 * time.Millisecond)
		}
	})
	return errs.Load(), err
}

// pingSent implements pingObserver.
func (s *zsession) pingSent(at time.Time) {
	prev := s.lastPing.Swap(at.UnixNano())
	if prev != 0 && at.Sub(time.Unix(0, prev)) > s.cs.ttl/3+bench.LateAfter {
		s.cs.late.Add(1)
	}
}

// pingAcked implements pingObserver.
func (s *zsession) pingAcked(sent, at time.Time) {
	s.lastAck.Store(sent.UnixNano())
	s.cs.acked.Add(1)
	s.cs.lat.Add(at.Sub(sent))
}

// event notes the expiry of the session (the library then opens a new
// one, which this load does not count on).
func (s *zsession) event(ev zk.Event) {
	if ev.State != zk.StateExpired {
		return
	}
	s.cs.mu.Lock()
	closed := s.cs.closed
	s.cs.mu.Unlock()
	if !closed {
		s.cs.gone(s, time.Now())
	}
}

// gone records that session s was found gone at t: spurious if the client
// still counted on its lease, lapsed otherwise.
func (cs *conns) gone(s *zsession, t time.Time) {
	if s.done.Swap(true) {
		return
	}
	if t.Sub(time.Unix(0, s.lastAck.Load())) < cs.ttl {
		cs.spurious.Add(1)
	} else {
		cs.lapsed.Add(1)
	}
}

// Hold implements bench.SessionLoad: the first n sessions each take a
// lock of their own with the lock recipe.
func (cs *conns) Hold(ctx context.Context, n int) error {
	cs.mu.Lock()
	list := cs.list[:min(n, len(cs.list))]
	cs.mu.Unlock()
	_, err := bench.ForEach(ctx, len(list), cs.workers, func(ctx context.Context, i int) error {
		s := list[i]
		if s == nil {
			return nil
		}
		path := fmt.Sprintf("%s/%d", cs.prefix, i)
		if err := ensurePath(s.c, path); err != nil {
			return err
		}
		l := &lock{c: s.c, path: path}
		return retry(ctx, holdRetryFor, func() error {
			_, err := l.acquire(ctx)
			return err
		})
	})
	return err
}

// holdRetryFor is how long Hold retries a session's acquire: a connection
// loss (a leader election of the ensemble, a server that stalled) fails
// the call, and the session stays valid for its TTL meanwhile.
const holdRetryFor = 30 * time.Second

// retry calls f until it succeeds, ctx ends or d has passed since the
// first failure, pausing 100 ms between calls; it returns f's last error.
func retry(ctx context.Context, d time.Duration, f func() error) error {
	var deadline time.Time
	for {
		err := f()
		if err == nil {
			return nil
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(d)
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stats implements bench.SessionLoad.
func (cs *conns) Stats() bench.KeepAliveStats {
	lat := &bench.Latencies{}
	lat.Merge(&cs.lat)
	return bench.KeepAliveStats{Acked: cs.acked.Load(), Late: cs.late.Load(), Spurious: cs.spurious.Load(),
		Lapsed: cs.lapsed.Load(), Latency: lat}
}

// Close implements bench.SessionLoad: closes every session (a
// closeSession request each, which also deletes its lock node).
func (cs *conns) Close(ctx context.Context) error {
	cs.mu.Lock()
	if cs.closed {
		cs.mu.Unlock()
		return nil
	}
	cs.closed = true
	list := cs.list
	cs.mu.Unlock()
	_, err := bench.ForEach(ctx, len(list), cs.workers, func(ctx context.Context, i int) error {
		if s := list[i]; s != nil {
			s.c.Close()
		}
		return nil
	})
	return err
}
