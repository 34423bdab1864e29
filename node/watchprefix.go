package node

import (
	"context"
	"sync"
	"time"

	"github.com/raftlock/raftlock/api"
)

// WatchLocks is a prefix watch (GET /v1/locks?prefix=P&index=I&wait=D):
// it answers the locks under prefix changed since index as soon as there
// are any (at once for index 0, or when index is older than what the
// state remembers: a reset, the whole state under prefix), or no change
// once wait has passed (zero: api.DefaultWatchWait). The answer's index
// is the applied index it was read at, never below index: a leader that
// has not applied index yet (a new one, behind the old) waits until it
// has, and never answers older state. Like WatchLock it blocks on the
// node's one change notification, never polls, and confirms leadership
// before answering; it needs read access to the whole prefix, and counts
// against the node's caps on prefix watches (resource_exhausted).
func (n *Node) WatchLocks(ctx context.Context, prefix string, index uint64, wait time.Duration) (api.LocksChange, error) {
	if err := api.CheckPrefix(prefix); err != nil {
		return api.LocksChange{}, err
	}
	if wait == 0 {
		wait = api.DefaultWatchWait
	}
	if err := api.CheckWatchWait("wait", wait); err != nil {
		return api.LocksChange{}, err
	}
	if err := n.authorize(ctx, api.AccessRead, prefix); err != nil {
		return api.LocksChange{}, err
	}
	token := ""
	if p, on, _ := n.principal(ctx); on {
		token = p.TokenID
	}
	done, err := n.prefixWatches.enter(token, n.cfg.MaxPrefixWatchers, n.cfg.MaxPrefixWatchersPerToken)
	if err != nil {
		return api.LocksChange{}, err
	}
	defer done()
	if err := n.verifyRead(ctx); err != nil {
		return api.LocksChange{}, err
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		lost := n.leadershipDone()
		n.mu.Lock()
		changed := n.changed
		n.mu.Unlock()
		c := n.locksChange(prefix, index)
		if c.Reset || len(c.Locks) > 0 {
			return n.answerWatchLocks(ctx, c)
		}
		select {
		case <-changed:
		case <-timer.C:
			return n.answerWatchLocks(ctx, c)
		case <-lost:
			return api.LocksChange{}, n.noLeader()
		case <-n.stop:
			return api.LocksChange{}, n.noLeader()
		case <-ctx.Done():
			return api.LocksChange{}, ctx.Err()
		}
	}
}

// locksChange reads the changes under prefix since index from the state
// machine (fsm.FSM.LocksChangedSince).
func (n *Node) locksChange(prefix string, index uint64) api.LocksChange {
	ls, reset, applied := n.fsm.LocksChangedSince(prefix, index)
	c := api.LocksChange{Locks: make([]api.LockState, 0, len(ls)), Reset: reset, Index: max(applied, index)}
	for _, l := range ls {
		c.Locks = append(c.Locks, n.lockStateOf(l))
	}
	return c
}

// answerWatchLocks answers a prefix watch with c, read after its wait,
// as answerWatch does.
func (n *Node) answerWatchLocks(ctx context.Context, c api.LocksChange) (api.LocksChange, error) {
	if err := n.reauthorize(ctx); err != nil {
		return api.LocksChange{}, err
	}
	if err := n.verifyRead(ctx); err != nil {
		return api.LocksChange{}, err
	}
	return c, nil
}

// watchCount counts the prefix watches a node serves, in all and by ACL
// token, against its caps. The zero value is ready.
type watchCount struct {
	mu      sync.Mutex
	total   int
	byToken map[string]int
}

// enter counts one more watch by token ("" with ACLs off), or refuses it
// (resource_exhausted) past max in all or perToken for the token; done
// uncounts it.
func (w *watchCount) enter(token string, max, perToken int) (done func(), err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.total >= max {
		return nil, api.Errorf(api.CodeResourceExhausted,
			"this node serves its limit of %d prefix watches; retry later, or watch a shorter prefix with one watch instead of many", max)
	}
	if token != "" && w.byToken[token] >= perToken {
		return nil, api.Errorf(api.CodeResourceExhausted,
			"token %s holds its limit of %d prefix watches on this node; end one first", token, perToken)
	}
	if w.byToken == nil {
		w.byToken = map[string]int{}
	}
	w.total++
	if token != "" {
		w.byToken[token]++
	}
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.total--
		if token != "" {
			if w.byToken[token]--; w.byToken[token] == 0 {
				delete(w.byToken, token)
			}
		}
	}, nil
}

// resolveWatchCaps fills in and checks the caps on prefix watches.
func (c *Config) resolveWatchCaps() error {
	if c.MaxPrefixWatchers == 0 {
		c.MaxPrefixWatchers = api.DefaultMaxPrefixWatchers
	}
	if c.MaxPrefixWatchersPerToken == 0 {
		c.MaxPrefixWatchersPerToken = api.DefaultMaxPrefixWatchersPerToken
	}
	if c.MaxPrefixWatchers < 0 || c.MaxPrefixWatchersPerToken < 0 {
		return invalid("MaxPrefixWatchers %d and MaxPrefixWatchersPerToken %d must be positive", c.MaxPrefixWatchers, c.MaxPrefixWatchersPerToken)
	}
	return nil
}
