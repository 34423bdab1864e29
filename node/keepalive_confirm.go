package node

import (
	"context"
	"errors"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/api"
)

// keepAliveConfirmer shares leadership confirmations among keepalives.
//
// A leader answers a keepalive only after a quorum confirmed, after the
// keepalive arrived, that it still leads (a deposed leader must not extend
// a lease a newer leader may expire). One Raft VerifyLeader per keepalive
// does that, at the cost of a trip through Raft's leader loop, a future and
// a goroutine each: at 10,000 keepalives/s that was a fifth of the leader's
// CPU. Here at most one confirmation runs at a time; keepalives arriving
// meanwhile wait together for the next one, which starts when the running
// one ends, so every keepalive is answered by a confirmation that began
// after it arrived (the rule is unchanged; a keepalive waits at most two
// confirmations), and Raft sees one VerifyLeader per round instead of one
// per keepalive. The zero value is ready to use.
type keepAliveConfirmer struct {
	mu      sync.Mutex
	running bool          // a round's confirmation is under way
	next    *confirmRound // the round that starts when the running one ends
}

// confirmRound is one shared confirmation; done is closed once err is set.
type confirmRound struct {
	done    chan struct{}
	err     error
	waiters int // keepalives that joined it (tests)
}

// confirm returns once a confirmation that started after the call was
// answered: nil if this node still leads, else Raft's error, or ctx's if
// ctx ends first. verify starts one confirmation (Raft.VerifyLeader);
// stop ends the waits on it when the node shuts down.
func (c *keepAliveConfirmer) confirm(ctx context.Context, verify func() raft.Future, stop <-chan struct{}) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r := c.join(verify, stop)
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// join returns the round that will confirm a keepalive arriving now: one
// that starts after this call. The round ends (done closed) whether or not
// anyone still waits for it.
func (c *keepAliveConfirmer) join(verify func() raft.Future, stop <-chan struct{}) *confirmRound {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.next
	if r == nil {
		r = &confirmRound{done: make(chan struct{})}
		c.next = r
	}
	r.waiters++
	if !c.running {
		c.startLocked(verify, stop)
	}
	return r
}

// startLocked starts the next round: from here on, new keepalives join a
// later one. c.mu is held.
func (c *keepAliveConfirmer) startLocked(verify func() raft.Future, stop <-chan struct{}) {
	r := c.next
	c.next = nil
	c.running = true
	go func() {
		r.err = waitFutureOrStop(verify(), stop)
		close(r.done)
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.next != nil {
			c.startLocked(verify, stop)
			return
		}
		c.running = false
	}()
}

// waitFutureOrStop waits for f, or until stop is closed (errShutdown).
func waitFutureOrStop(f raft.Future, stop <-chan struct{}) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-stop:
		return errShutdown
	}
}

// pendingWaiters is how many keepalives wait for the round that has not
// started yet (tests).
func (c *keepAliveConfirmer) pendingWaiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.next == nil {
		return 0
	}
	return c.next.waiters
}

// confirmKeepAlive is verifyRead for a keepalive: the leadership
// confirmation is shared with the keepalives of term t that arrive
// meanwhile (keepAliveConfirmer). If ctx ends while the confirmation
// runs, it returns ctx's error and the round, which goes on: its answer
// can still settle the keepalive (leaseTable.Arrive). Otherwise the round
// is nil.
func (n *Node) confirmKeepAlive(ctx context.Context, t *leaderTerm) (*confirmRound, error) {
	if n.cfg.Faults.localReads() {
		return nil, ctx.Err()
	}
	if !n.ready.Load() {
		return nil, n.noLeader()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := t.kaConfirm.join(func() raft.Future { return n.raft.VerifyLeader() }, n.stop)
	select {
	case <-r.done:
	case <-ctx.Done():
		return r, ctx.Err()
	}
	if r.err == nil {
		return nil, nil
	}
	if cerr := ctx.Err(); cerr != nil && errors.Is(r.err, cerr) {
		return nil, cerr
	}
	return nil, api.Errorf(api.CodeNoLeader, "leadership not confirmed: %v", r.err)
}
