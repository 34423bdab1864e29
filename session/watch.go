package session

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/raftlock/raftlock/api"
)

// watchSlice is how long one blocking query of Watch waits for a change;
// watchSlack bounds how much longer its call may take.
const (
	watchSlice = 10 * time.Second
	watchSlack = 5 * time.Second
	// watchPause is how long Watch waits before it asks again after an
	// error. The Backend has retried transient failures already
	// (api.Backend), so this only paces a watch whose queries keep failing.
	watchPause = time.Second
)

// WatchOption configures Watch and Observe.
type WatchOption func(*watchConfig)

type watchConfig struct {
	onError func(error)
}

// OnWatchError makes a watch (or Observe) call f with the error of every
// query that failed, after the Backend's own retries, before it asks
// again: a watch whose queries keep failing (no node answers, every node
// it knows was removed from the cluster, a token deleted) says so instead
// of staying silent. An error does not end the watch. f is called from
// the watch's goroutine and must return quickly.
func OnWatchError(f func(error)) WatchOption {
	return func(c *watchConfig) { c.onError = f }
}

// Watch streams the state of the lock name as the leader sees it: first
// its current state, then each change. It is built on blocking queries
// (Backend.WatchLock), so a change arrives as soon as the leader applies
// it and nothing polls. A slow reader skips intermediate states and gets
// the latest. Transient failures (no leader, failover, unreachable nodes)
// are retried by the Backend, and the watch resumes where it was; after an
// error it asks again a second later. A node that stops answering delays
// a change by at most 15 s (one query's wait and slack) before the watch
// asks another. The channel is closed when ctx is done. Only the name is
// checked up front. Its timers run on the real clock; Session.Watch runs
// them on the session's. The channel carries states only: with
// OnWatchError the caller also learns of every query that failed.
func Watch(ctx context.Context, b api.Backend, name string, opts ...WatchOption) (<-chan api.LockState, error) {
	return watch(ctx, b, RealClock(), name, opts)
}

// watch is Watch with its timers on clock.
func watch(ctx context.Context, b api.Backend, clock Clock, name string, opts []WatchOption) (<-chan api.LockState, error) {
	var cfg watchConfig
	for _, o := range opts {
		o(&cfg)
	}
	if b == nil {
		return nil, api.Errorf(api.CodeInvalidArgument, "watch: nil backend")
	}
	if err := api.ValidateLockName(name); err != nil {
		return nil, err
	}
	out := make(chan api.LockState)
	go func() {
		defer close(out)
		var (
			last  api.LockState
			sent  bool
			index uint64
		)
		for {
			// One blocking query waits watchSlice; its call gets
			// watchSlack more, so a node that stops answering (frozen,
			// black-holed) delays the watch by at most watchSlice +
			// watchSlack before it asks again elsewhere from the same
			// index.
			qctx, cancel := withTimeout(ctx, clock, watchSlice+watchSlack)
			st, err := b.WatchLock(qctx, name, index, watchSlice)
			sliceEnded := qctx.Err() != nil
			cancel()
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				if cfg.onError != nil {
					cfg.onError(fmt.Errorf("watch %s: %w", name, err))
				}
				// A query cut by its own bound is asked again at once
				// (elsewhere: the backend skips a node that did not answer).
				if !sliceEnded && sleep(ctx, clock, watchPause) != nil {
					return
				}
				continue
			}
			if st.Index < index {
				// A replica restored from an older snapshot: start over, as a
				// Consul blocking query does when its index goes backwards.
				index = 0
				continue
			}
			index = st.Index
			if sent && SameLockState(last, st) {
				continue
			}
			select {
			case out <- st:
				last, sent = st, true
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// SameLockState reports whether two states of a lock are the same, apart
// from their Index: same mode, holders (in order), waiters, delay and grant
// history (its grants and how far back it reaches), and a semaphore's
// permits and slot delays, so that a watch reports grants made and undone
// between two of its queries.
func SameLockState(a, b api.LockState) bool {
	return a.Name == b.Name && a.Mode == b.Mode && a.Waiters == b.Waiters &&
		a.DelayUntil.Equal(b.DelayUntil) && slices.Equal(a.Holders, b.Holders) &&
		a.GrantsSince == b.GrantsSince && slices.Equal(a.Grants, b.Grants) &&
		a.Permits == b.Permits && slices.EqualFunc(a.SlotDelays, b.SlotDelays, func(x, y api.SlotDelay) bool {
		return x.Slot == y.Slot && x.Until.Equal(y.Until)
	})
}

// Watch streams the state of the lock name, with its timers on the
// session's Clock; see the package function Watch.
func (s *Session) Watch(ctx context.Context, name string, opts ...WatchOption) (<-chan api.LockState, error) {
	return watch(ctx, s.b, s.clock, name, opts)
}
