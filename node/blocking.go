package node

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/api"
)

// Blocking queries (a watch of a lock or a prefix, a blocking overview)
// wait on the leader for minutes, each holding a request, a goroutine and
// a timer. Issue 40: a read-only token's burst of 7,000 lock watches made
// the leader step down. Reproduced with three raftlockd processes and a
// writer taking locks meanwhile: every lock change woke every watch of
// every lock (one channel for all), so each write woke 7,000 goroutines
// that each read the state machine, and the leader, its CPU taken, missed
// its 250 ms lease ("failed to contact quorum of nodes, stepping down").
// Three things fix it, here:
//   - caps per node and per ACL token (enterBlocking; a follower counts
//     the blocking queries it forwards, AdmitForwardedQuery), past which a
//     new one is refused at once, without a goroutine of its own;
//   - a lock's watches wake only on a change of that lock (lockWakers);
//   - the watches confirming leadership at once share one confirmation
//     (confirmWatch), so that a burst costs Raft one VerifyLeader per
//     round, not one per watch.

// enterBlocking counts one blocking query of token ("" with ACLs off)
// against the node's caps (Config.MaxBlockingQueries,
// MaxBlockingQueriesPerToken), or refuses it (resource_exhausted); done
// uncounts it, on every way the query ends.
func (n *Node) enterBlocking(token string) (done func(), err error) {
	return n.blocking.enter(token, n.cfg.MaxBlockingQueries, n.cfg.MaxBlockingQueriesPerToken,
		"blocking queries (watches)", "; retry later, or watch a prefix with one watch instead of many locks with one each")
}

// blockingToken is the token a blocking query counts against: the
// caller's with ACLs on, "" with them off.
func (n *Node) blockingToken(ctx context.Context) string {
	if p, on, _ := n.principal(ctx); on {
		return p.TokenID
	}
	return ""
}

// AdmitForwardedQuery counts a blocking query a follower forwards to the
// leader against this node's caps on blocking queries, before it is
// forwarded (httpapi), so that one client's watches sent to a follower
// cannot fill the follower's way to the leader, which its other clients'
// acquires share. The follower does not authenticate (the leader does):
// the query counts against the token whose secret it carries (by a hash
// of it; "" with ACLs off). done uncounts it once the forwarded query
// ended, however it ended.
func (n *Node) AdmitForwardedQuery(secret string) (done func(), err error) {
	token := ""
	if n.cfg.ACL {
		sum := sha256.Sum256([]byte(secret))
		token = "secret " + hex.EncodeToString(sum[:6])
	}
	return n.enterBlocking(token)
}

// confirmWatch is verifyRead for a blocking query: the confirmation is
// shared with every blocking query confirming at the same time
// (keepAliveConfirmer's rounds: each is answered by a confirmation that
// began after it asked).
func (n *Node) confirmWatch(ctx context.Context) error {
	if n.cfg.Faults.localReads() {
		return ctx.Err()
	}
	if !n.ready.Load() {
		return n.noLeader()
	}
	err := n.watchConfirm.confirm(ctx, func() raft.Future { return n.raft.VerifyLeader() }, n.stop)
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
		return cerr
	}
	if errors.Is(err, errShutdown) {
		return n.noLeader()
	}
	return api.Errorf(api.CodeNoLeader, "leadership not confirmed: %v", err)
}

// WatchLock answers the lock's state once its Index is above index, or the
// current state when wait has passed. It blocks on the lock's own change
// notification (lockWakers: a change of another lock does not wake it),
// never polls, and confirms leadership before answering (confirmWatch:
// shared with the watches confirming at the same time). It counts against
// the node's caps on blocking queries (resource_exhausted).
func (n *Node) WatchLock(ctx context.Context, name string, index uint64, wait time.Duration) (api.LockState, error) {
	if err := api.ValidateLockName(name); err != nil {
		return api.LockState{}, err
	}
	if wait == 0 {
		wait = api.DefaultWatchWait
	}
	if err := api.CheckWatchWait("wait", wait); err != nil {
		return api.LockState{}, err
	}
	if err := n.authorize(ctx, api.AccessRead, name); err != nil {
		return api.LockState{}, err
	}
	done, err := n.enterBlocking(n.blockingToken(ctx))
	if err != nil {
		return api.LockState{}, err
	}
	defer done()
	free, err := n.step(ctx)
	if err != nil {
		return api.LockState{}, err
	}
	if err := n.confirmWatch(ctx); err != nil {
		free()
		return api.LockState{}, err
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		lost := n.leadershipDone()
		changed, release := n.lockWakers.wait(name)
		st := n.lockState(name)
		if index == 0 || st.Index > index {
			release()
			defer free()
			return n.answerWatch(ctx, st)
		}
		free()
		select {
		case <-changed:
			release()
			if free, err = n.step(ctx); err != nil {
				return api.LockState{}, err
			}
		case <-timer.C:
			release()
			if free, err = n.step(ctx); err != nil {
				return api.LockState{}, err
			}
			defer free()
			return n.answerWatch(ctx, st)
		case <-lost:
			release()
			return api.LockState{}, n.noLeader()
		case <-n.stop:
			release()
			return api.LockState{}, n.noLeader()
		case <-ctx.Done():
			release()
			return api.LockState{}, ctx.Err()
		}
	}
}

// answerWatch answers a watch with st, read after its wait: once the
// caller's token is known to still exist (reauthorize) and leadership is
// confirmed.
func (n *Node) answerWatch(ctx context.Context, st api.LockState) (api.LockState, error) {
	if err := n.reauthorize(ctx); err != nil {
		return api.LockState{}, err
	}
	return st, n.confirmWatch(ctx)
}

// blockingSteps bounds the blocking queries that work at once (start:
// authorize, count, confirm and first read; or answer: reread, confirm),
// node-wide: the others wait for a step, parked, so that a burst of
// thousands arriving, or woken, at once is taken a few at a time and the
// goroutines Raft's heartbeats run on stay near the front of the
// scheduler's queue.
const blockingSteps = 32

// step waits for one of the node's blockingSteps slots, until ctx ends;
// release frees it.
func (n *Node) step(ctx context.Context) (release func(), err error) {
	select {
	case n.steps <- struct{}{}:
		return func() { <-n.steps }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-n.stop:
		return nil, n.noLeader()
	}
}

// lockWakers are the channels the watches of single locks wait on, by
// lock name: a change of a lock closes its channel only (wake), and a
// restore every one (wakeAll). An entry lives while a watch waits on it.
// The zero value is ready.
type lockWakers struct {
	mu sync.Mutex
	m  map[string]*lockWaker
}

type lockWaker struct {
	ch      chan struct{}
	waiting int // the watches holding this entry
}

// wait returns the channel closed at the next change of lock name (or a
// restore), and a release to call once the caller no longer waits on it.
func (w *lockWakers) wait(name string) (<-chan struct{}, func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]*lockWaker{}
	}
	e := w.m[name]
	if e == nil {
		e = &lockWaker{ch: make(chan struct{})}
		w.m[name] = e
	}
	e.waiting++
	return e.ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if e.waiting--; e.waiting == 0 && w.m[name] == e {
			delete(w.m, name)
		}
	}
}

// wake closes the channel of lock name (called from Apply's events: it
// must not block).
func (w *lockWakers) wake(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e := w.m[name]; e != nil {
		close(e.ch)
		delete(w.m, name)
	}
}

// wakeAll closes every channel (a restore changed every lock).
func (w *lockWakers) wakeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for name, e := range w.m {
		close(e.ch)
		delete(w.m, name)
	}
}

// len is the number of locks watched (tests).
func (w *lockWakers) len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.m)
}
