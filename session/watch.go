package session

import (
	"context"
	"slices"
	"time"

	"github.com/raftlock/raftlock/session/api"
)

// watchSlice is how long one blocking query of Watch waits for a change;
// watchSlack bounds how much longer its call may take.
const (
	watchSlice = 10 * time.Second
	watchSlack = 5 * time.Second
)

// Watch streams the state of the lock name as the leader sees it: first
// its current state, then each change. It is built on blocking queries
// (Backend.WatchLock), so a change arrives as soon as the leader applies
// it and nothing polls. A slow reader skips intermediate states and gets
// the latest. Transient failures (no leader, failover, unreachable nodes)
// are retried with backoff, and the watch resumes where it was. A node that
// stops answering delays a change by at most 15 s (one query's wait and
// slack) before the watch asks another. The channel
// is closed when ctx is done. Only the name is checked up front.
func Watch(ctx context.Context, b api.Backend, name string) (<-chan api.LockState, error) {
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
			last    api.LockState
			sent    bool
			index   uint64
			backoff = minRetryBackoff
		)
		for {
			// One blocking query waits watchSlice; its call gets
			// watchSlack more, so a node that stops answering (frozen,
			// black-holed) delays the watch by at most watchSlice +
			// watchSlack before it asks again elsewhere from the same
			// index.
			qctx, cancel := context.WithTimeout(ctx, watchSlice+watchSlack)
			st, err := b.WatchLock(qctx, name, index, watchSlice)
			cancel()
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				if sleepCtx(ctx, backoff) != nil {
					return
				}
				backoff = min(2*backoff, maxRetryBackoff)
				continue
			}
			backoff = minRetryBackoff
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
// history (its grants and how far back it reaches), so that a watch reports
// grants made and undone between two of its queries.
func SameLockState(a, b api.LockState) bool {
	return a.Name == b.Name && a.Mode == b.Mode && a.Waiters == b.Waiters &&
		a.DelayUntil.Equal(b.DelayUntil) && slices.Equal(a.Holders, b.Holders) &&
		a.GrantsSince == b.GrantsSince && slices.Equal(a.Grants, b.Grants)
}

// sleepCtx waits d or until ctx is done (then it returns ctx's error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	return sleepClock(ctx, RealClock(), d)
}

// Watch streams the state of the lock name; see the package function Watch.
func (s *Session) Watch(ctx context.Context, name string) (<-chan api.LockState, error) {
	return Watch(ctx, s.b, name)
}
