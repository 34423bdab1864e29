package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/raftlock/raftlock/cmd/raftlock-bench/internal/bench"
)

// leases is the session load of scenario (c) on etcd: leases granted by
// one client and kept alive by that client's lease keepalive stream (the
// etcd client multiplexes every lease's keepalives, one every TTL/3, on one
// gRPC stream). One goroutine per lease drains its keepalive channel and
// notes the time of the last answer; the channel closing early means the
// lease is gone.
type leases struct {
	endpoints []string
	ttl       time.Duration
	workers   int
	openRate  float64 // paces the opens (bench.Options.OpenRate)
	prefix    string

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	c      *clientv3.Client
	list   []*lease
	closed bool

	acked, spurious, lapsed atomic.Int64
}

// lease is one kept-alive lease.
type lease struct {
	id      clientv3.LeaseID
	lastAck atomic.Int64 // unix nanos of the last keepalive answer (or the grant)
	done    atomic.Bool  // gone: counted
}

var _ bench.SessionLoad = (*leases)(nil)

func newLeases(endpoints []string, ttl time.Duration, workers int, openRate float64, prefix string) *leases {
	ctx, cancel := context.WithCancel(context.Background())
	return &leases{endpoints: endpoints, ttl: ttl, workers: workers, openRate: openRate, prefix: prefix, ctx: ctx, cancel: cancel}
}

// Open implements bench.SessionLoad.
func (l *leases) Open(ctx context.Context, n int, lat *bench.Latencies) (int64, error) {
	c, err := newClient(l.endpoints)
	if err != nil {
		return 0, err
	}
	l.mu.Lock()
	l.c = c
	l.list = make([]*lease, n)
	l.mu.Unlock()
	var errs atomic.Int64
	_, err = bench.ForEachPaced(ctx, n, l.workers, l.openRate, func(ctx context.Context, i int) error {
		for {
			start := time.Now()
			resp, err := c.Grant(ctx, int64(l.ttl/time.Second))
			if err == nil {
				lat.Add(time.Since(start))
				return l.keep(i, resp.ID, start)
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

// keep starts keeping lease id alive.
func (l *leases) keep(i int, id clientv3.LeaseID, granted time.Time) error {
	ch, err := l.c.KeepAlive(l.ctx, id)
	if err != nil {
		return fmt.Errorf("keepalive of lease %x: %w", id, err)
	}
	ls := &lease{id: id}
	ls.lastAck.Store(granted.UnixNano())
	l.mu.Lock()
	l.list[i] = ls
	l.mu.Unlock()
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for range ch {
			ls.lastAck.Store(time.Now().UnixNano())
			l.acked.Add(1)
		}
		if l.ctx.Err() == nil {
			l.gone(ls, time.Now())
		}
	}()
	return nil
}

// gone records that lease ls was found gone at t: spurious if the client
// had an answer within the TTL before t, lapsed otherwise.
func (l *leases) gone(ls *lease, t time.Time) {
	if ls.done.Swap(true) {
		return
	}
	if t.Sub(time.Unix(0, ls.lastAck.Load())) < l.ttl {
		l.spurious.Add(1)
	} else {
		l.lapsed.Add(1)
	}
}

// Hold implements bench.SessionLoad: the first n leases each lock a mutex
// of their own through a concurrency.Session on the lease.
func (l *leases) Hold(ctx context.Context, n int) error {
	l.mu.Lock()
	list := l.list[:min(n, len(l.list))]
	l.mu.Unlock()
	_, err := bench.ForEach(ctx, len(list), l.workers, func(ctx context.Context, i int) error {
		if list[i] == nil {
			return nil
		}
		s, err := concurrency.NewSession(l.c, concurrency.WithLease(list[i].id), concurrency.WithContext(l.ctx))
		if err != nil {
			return fmt.Errorf("session on lease %x: %w", list[i].id, err)
		}
		if err := concurrency.NewMutex(s, fmt.Sprintf("%s/%d", l.prefix, i)).Lock(ctx); err != nil {
			return fmt.Errorf("lock with lease %x: %w", list[i].id, err)
		}
		return nil
	})
	return err
}

// Stats implements bench.SessionLoad. Late keepalives and their latency
// are not visible through the etcd client.
func (l *leases) Stats() bench.KeepAliveStats {
	return bench.KeepAliveStats{Acked: l.acked.Load(), Spurious: l.spurious.Load(), Lapsed: l.lapsed.Load()}
}

// Close implements bench.SessionLoad: stops the keepalives and revokes
// every lease still kept alive; one found gone counts as an expiry.
func (l *leases) Close(ctx context.Context) error {
	l.mu.Lock()
	if l.closed || l.c == nil {
		l.closed = true
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	list := l.list
	l.mu.Unlock()
	l.cancel()
	l.wg.Wait()
	defer l.c.Close()
	_, err := bench.ForEach(ctx, len(list), l.workers, func(ctx context.Context, i int) error {
		ls := list[i]
		if ls == nil || ls.done.Load() {
			return nil
		}
		t := time.Now()
		_, err := l.c.Revoke(ctx, ls.id)
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			l.gone(ls, t)
			return nil
		}
		if err != nil {
			return fmt.Errorf("revoke lease %x: %w", ls.id, err)
		}
		return nil
	})
	return err
}
