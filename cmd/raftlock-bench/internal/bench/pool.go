package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// ForEachPaced is ForEach with the calls' starts paced: call i starts no
// earlier than i/rate seconds after ForEachPaced began (rate per second;
// rate <= 0 paces nothing), so that n calls spread evenly over n/rate
// seconds however fast each one returns.
func ForEachPaced(ctx context.Context, n, workers int, rate float64, f func(ctx context.Context, i int) error) (failed int64, first error) {
	if rate <= 0 {
		return ForEach(ctx, n, workers, f)
	}
	start := time.Now()
	return ForEach(ctx, n, workers, func(ctx context.Context, i int) error {
		due := start.Add(time.Duration(float64(i) * float64(time.Second) / rate))
		if err := sleepCtx(ctx, time.Until(due)); err != nil {
			return err
		}
		return f(ctx, i)
	})
}

// ForEach calls f(ctx, i) for i in [0, n) from at most workers goroutines.
// It stops handing out work when ctx is done and returns the number of
// calls that failed and the first error.
func ForEach(ctx context.Context, n, workers int, f func(ctx context.Context, i int) error) (failed int64, first error) {
	var (
		next  atomic.Int64
		fails atomic.Int64
		once  sync.Once
		wg    sync.WaitGroup
	)
	workers = max(1, min(workers, n))
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(ctx, i); err != nil {
					fails.Add(1)
					once.Do(func() { first = err })
				}
			}
		}()
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil && int(next.Load()) < n {
		first = ctx.Err()
	}
	return fails.Load(), first
}
