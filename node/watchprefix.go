package node

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/sequencer"
)

// WatchLocks is a prefix watch (GET /v1/locks?prefix=P&index=I&wait=D):
// it answers the locks under prefix changed since index as soon as there
// are any (at once for index 0, or when index is older than what the
// state remembers: a reset, the whole state under prefix), or no change
// once wait has passed (zero: api.DefaultWatchWait). Answers are bounded
// by api.MaxAnswerBytes: a reset names its next page (ResetPage), a
// change answer cut by the bound answers the index of its last change.
// The answer's index
// is the applied index it was read at, never below index: a leader that
// has not applied index yet (a new one, behind the old) waits until it
// has, and never answers older state. Like WatchLock it blocks on the
// node's one change notification, never polls, and confirms leadership
// before answering; woken, it reads the state machine only when the
// node's ring of recent changes (changeRing) says a lock under prefix
// changed, or cannot say; it needs read access to the whole prefix, and counts
// against the node's caps on prefix watches and on blocking queries
// (resource_exhausted).
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
	done, err := n.prefixWatches.enter(token, n.cfg.MaxPrefixWatchers, n.cfg.MaxPrefixWatchersPerToken,
		"prefix watches", "; retry later, or watch a shorter prefix with one watch instead of many")
	if err != nil {
		return api.LocksChange{}, err
	}
	defer done()
	bdone, err := n.enterBlocking(token)
	if err != nil {
		return api.LocksChange{}, err
	}
	defer bdone()
	free, err := n.step(ctx)
	if err != nil {
		return api.LocksChange{}, err
	}
	if err := n.confirmWatch(ctx); err != nil {
		free()
		return api.LocksChange{}, err
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	scan := true // the first look reads the state machine
	for {
		lost := n.leadershipDone()
		n.mu.Lock()
		changed := n.changed
		n.mu.Unlock()
		if scan || n.prefixChanges.changedSince(prefix, index) {
			// The answer's bytes are taken before the state machine is
			// read, without a step held while waiting for them.
			free()
			keep, drop, err := n.holdAnswer(ctx)
			if err != nil {
				return api.LocksChange{}, err
			}
			if free, err = n.step(ctx); err != nil {
				drop()
				return api.LocksChange{}, err
			}
			c := n.locksChange(prefix, index)
			if c.Reset || len(c.Locks) > 0 {
				defer free()
				return n.answerWatchLocks(ctx, c, keep, drop)
			}
			drop()
		}
		scan = false
		free()
		select {
		case <-changed:
			if free, err = n.step(ctx); err != nil {
				return api.LocksChange{}, err
			}
		case <-timer.C:
			keep, drop, err := n.holdAnswer(ctx)
			if err != nil {
				return api.LocksChange{}, err
			}
			if free, err = n.step(ctx); err != nil {
				drop()
				return api.LocksChange{}, err
			}
			defer free()
			return n.answerWatchLocks(ctx, n.locksChange(prefix, index), keep, drop)
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
// machine, within api.MaxAnswerBytes (fsm.FSM.LocksChangedSince).
func (n *Node) locksChange(prefix string, index uint64) api.LocksChange {
	ch := n.fsm.LocksChangedSince(prefix, index, api.MaxAnswerBytes)
	c := api.LocksChange{Locks: make([]api.LockState, 0, len(ch.Locks)), Reset: ch.Reset, Next: ch.Next, Index: max(ch.Index, index)}
	for _, l := range ch.Locks {
		c.Locks = append(c.Locks, n.lockStateOf(l))
	}
	if n.cfg.Faults.watchDropsChanges() && !ch.Reset && len(c.Locks) > 0 {
		c.Locks = c.Locks[1:] // testing the checker: a change never seen
	}
	return c
}

// answerWatchLocks answers a prefix watch with c, read after its wait,
// as answerWatch does; keep and drop are what holdAnswer gave for it.
func (n *Node) answerWatchLocks(ctx context.Context, c api.LocksChange, keep, drop func()) (api.LocksChange, error) {
	if err := n.reauthorize(ctx); err != nil {
		drop()
		return api.LocksChange{}, err
	}
	if err := n.confirmWatch(ctx); err != nil {
		drop()
		return api.LocksChange{}, err
	}
	keep()
	return c, nil
}

// ResetPage reads one page of the rest of a prefix watch's reset
// (GET /v1/locks?prefix=P&index=I&after=N; api.LocksChange): the locks
// under prefix named after after whose last change is at or below index
// (the reset's Index), in name order, within api.MaxAnswerBytes, with
// Next set when more follow. The locks changed above index are left out:
// the watch from index answers them. It answers at once (a read, not a
// blocking query), with the read access a prefix watch needs, and holds
// its bytes of the node's answer budget like a listing page.
func (n *Node) ResetPage(ctx context.Context, prefix string, index uint64, after string) (api.LocksChange, error) {
	if err := api.CheckPrefix(prefix); err != nil {
		return api.LocksChange{}, err
	}
	if err := api.CheckText("after", after, 1, sequencer.MaxNameBytes); err != nil {
		return api.LocksChange{}, err
	}
	if index == 0 {
		return api.LocksChange{}, invalid("a reset's page needs the reset's index (above 0)")
	}
	if err := n.authorize(ctx, api.AccessRead, prefix); err != nil {
		return api.LocksChange{}, err
	}
	if err := n.verifyRead(ctx); err != nil {
		return api.LocksChange{}, err
	}
	if applied := n.fsm.AppliedIndex(); applied < index {
		return api.LocksChange{}, api.Errorf(api.CodeNoLeader,
			"this node has applied index %d, not yet the reset's %d; retry", applied, index)
	}
	keep, _, err := n.holdAnswer(ctx)
	if err != nil {
		return api.LocksChange{}, err
	}
	defer keep()
	ls, next := n.fsm.ResetPage(prefix, after, index, api.MaxAnswerBytes)
	c := api.LocksChange{Locks: make([]api.LockState, 0, len(ls)), Reset: true, Next: next, Index: index}
	for _, l := range ls {
		c.Locks = append(c.Locks, n.lockStateOf(l))
	}
	return c, nil
}

// changeRing is the node's recent lock changes (name and index), fed from
// Apply's events: what lets a woken prefix watch tell, without reading
// the state machine, that nothing under its prefix changed. It holds
// every lock change above since (the index of the last change it dropped
// at capacity, or the applied index of the last snapshot restored: it
// knows nothing at or below it). The zero value is ready and knows every
// change (since 0), as a node that applies its log from the start.
type changeRing struct {
	mu      sync.Mutex
	entries []ringEntry // a circular buffer: n entries from head, oldest first
	head, n int
	since   uint64
}

type ringEntry struct {
	name  string
	index uint64
}

// changeRingSize bounds the ring: about 4096 × (name + 24 B).
const changeRingSize = 4096

// note records one event of Apply (called from onEvent: it must not block).
func (r *changeRing) note(e fsm.Event) {
	switch e.Kind {
	case fsm.EventLockChanged:
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.entries == nil {
			r.entries = make([]ringEntry, changeRingSize)
		}
		if r.n == len(r.entries) {
			r.since = r.entries[r.head].index
			r.head, r.n = (r.head+1)%len(r.entries), r.n-1
		}
		r.entries[(r.head+r.n)%len(r.entries)] = ringEntry{e.Lock, e.Index}
		r.n++
	case fsm.EventRestored:
		r.mu.Lock()
		defer r.mu.Unlock()
		r.head, r.n, r.since = 0, 0, e.Index
	}
}

// changedSince reports whether a lock under prefix may have changed after
// index: true when one did, or when the ring no longer reaches back to
// index (it cannot tell: the caller reads the state machine).
func (r *changeRing) changedSince(prefix string, index uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if index < r.since {
		return true
	}
	for i := r.n - 1; i >= 0; i-- {
		e := r.entries[(r.head+i)%len(r.entries)]
		if e.index <= index {
			break
		}
		if strings.HasPrefix(e.name, prefix) {
			return true
		}
	}
	return false
}

// watchCount counts the requests of one kind a node serves at once (prefix
// watches, blocking queries), in all and by ACL token, against its caps.
// The zero value is ready.
type watchCount struct {
	mu      sync.Mutex
	total   int
	byToken map[string]int
}

// enter counts one more request by token ("" with ACLs off), or refuses
// it (resource_exhausted naming what, the requests counted, and its cap;
// hint ends the node-wide refusal) past max in all or perToken for the
// token; done uncounts it (once: later calls do nothing).
func (w *watchCount) enter(token string, max, perToken int, what, hint string) (done func(), err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.total >= max {
		return nil, api.Errorf(api.CodeResourceExhausted,
			"this node serves its limit of %d %s%s", max, what, hint)
	}
	if token != "" && w.byToken[token] >= perToken {
		return nil, api.Errorf(api.CodeResourceExhausted,
			"token %s holds its limit of %d %s on this node; end one first", token, perToken, what)
	}
	if w.byToken == nil {
		w.byToken = map[string]int{}
	}
	w.total++
	if token != "" {
		w.byToken[token]++
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.total--
			if token != "" {
				if w.byToken[token]--; w.byToken[token] == 0 {
					delete(w.byToken, token)
				}
			}
		})
	}, nil
}

// resolveWatchCaps fills in and checks the caps on prefix watches and
// blocking queries.
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
	if c.MaxBlockingQueries == 0 {
		c.MaxBlockingQueries = api.DefaultMaxBlockingQueries
	}
	if c.MaxBlockingQueriesPerToken == 0 {
		c.MaxBlockingQueriesPerToken = api.DefaultMaxBlockingQueriesPerToken
	}
	if c.MaxBlockingQueries < 0 || c.MaxBlockingQueriesPerToken < 0 {
		return invalid("MaxBlockingQueries %d and MaxBlockingQueriesPerToken %d must be positive", c.MaxBlockingQueries, c.MaxBlockingQueriesPerToken)
	}
	return nil
}
