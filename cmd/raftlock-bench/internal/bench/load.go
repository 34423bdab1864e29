package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Worker is one benchmark client with its own session.
type Worker interface {
	// Pair acquires the worker's lock, waiting while it is held, and
	// releases it. It returns the Raft term of the leader that granted it.
	Pair(ctx context.Context) (term uint64, err error)
	// Close ends the worker's session.
	Close(ctx context.Context) error
}

// Grant is one successful pair, as the failover driver sees it.
type Grant struct {
	// At is when the acquire returned.
	At   time.Time
	Term uint64
}

// pairTimeout bounds one pair, so that a stuck call does not stall a worker
// for ever.
const pairTimeout = 30 * time.Second

// errorPause is the pause of a worker after a failed pair.
const errorPause = 20 * time.Millisecond

// Load runs workers in a loop of pairs until stopped, counting pairs and
// latencies from the moment Measure is called.
type Load struct {
	workers   []Worker
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	measuring atomic.Bool
	pairs     atomic.Int64
	errs      atomic.Int64
	lat       []*Latencies
	// grants, if set, receives every grant (non-blocking: dropped when
	// full).
	grants chan<- Grant

	mu      sync.Mutex
	lastErr error
}

// StartLoad starts one goroutine per worker. grants may be nil.
func StartLoad(ctx context.Context, workers []Worker, grants chan<- Grant) *Load {
	ctx, cancel := context.WithCancel(ctx)
	l := &Load{workers: workers, cancel: cancel, grants: grants}
	for range workers {
		l.lat = append(l.lat, &Latencies{})
	}
	for i, w := range workers {
		l.wg.Add(1)
		go l.run(ctx, w, l.lat[i])
	}
	return l
}

func (l *Load) run(ctx context.Context, w Worker, lat *Latencies) {
	defer l.wg.Done()
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, pairTimeout)
		start := time.Now()
		term, err := w.Pair(pctx)
		end := time.Now()
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if l.measuring.Load() {
				l.errs.Add(1)
			}
			l.mu.Lock()
			l.lastErr = err
			l.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-time.After(errorPause):
			}
			continue
		}
		if l.grants != nil {
			select {
			case l.grants <- Grant{At: end, Term: term}:
			default:
			}
		}
		if l.measuring.Load() {
			l.pairs.Add(1)
			lat.Add(end.Sub(start))
		}
	}
}

// Measure starts counting.
func (l *Load) Measure() { l.measuring.Store(true) }

// LastError returns the last error of a pair, if any.
func (l *Load) LastError() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastErr
}

// Stop stops the workers (cancelling pairs in flight) and returns the
// pairs and errors counted and every measured latency.
func (l *Load) Stop() (pairs, errs int64, lat *Latencies) {
	l.cancel()
	l.wg.Wait()
	all := &Latencies{}
	for _, x := range l.lat {
		all.Merge(x)
	}
	return l.pairs.Load(), l.errs.Load(), all
}

// OpenWorkers creates n workers with open, at most 16 at a time, closing
// those already open if one fails.
func OpenWorkers(ctx context.Context, n int, open func(ctx context.Context, i int) (Worker, error)) ([]Worker, error) {
	ws := make([]Worker, n)
	errs := make([]error, n)
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ws[i], errs[i] = open(ctx, i)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		CloseWorkers(context.WithoutCancel(ctx), ws)
		return nil, fmt.Errorf("open %d clients: %w", n, err)
	}
	return ws, nil
}

// CloseWorkers closes every non-nil worker, best effort, with a deadline.
func CloseWorkers(ctx context.Context, ws []Worker) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, w := range ws {
		if w == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = w.Close(ctx)
		}()
	}
	wg.Wait()
}
