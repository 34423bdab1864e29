package node

import (
	"context"
	"sync"
	"time"
)

// leaderTerm is the leader-only state of one leadership: created when Raft
// reports that this node leads (startLeadership), dropped when it stops
// leading or shuts down (endLeadership). Nothing of it outlives the
// leadership: a new leader rebuilds it from the replicated state, as
// etcd's lessor does on Promote and Consul's session timers on
// establishLeadership.
//
// It owns:
//   - the session lease table (lease.go), rebuilt by lead after its
//     Barrier and kept by keepalives;
//   - the timers that end lock-delays, waits and the restore hold
//     (term_timers.go);
//   - the acquires waiting for their outcome (term_waits.go), answered
//     unknown_outcome when the term ends;
//   - the shared leadership confirmations of keepalives
//     (keepalive_confirm.go);
//   - the leader's loop (lead: the expiry ticker and the digest checks),
//     which runs as long as ctx.
//
// The Node holds at most one current term (Node.leadership); handlers
// take it once and work on it, so that a request never mixes the state
// of two leaderships.
type leaderTerm struct {
	n *Node
	// ctx ends when the term ends: Done is the leadership's end, which
	// waiting requests select on.
	ctx    context.Context
	cancel context.CancelFunc

	// leases is the session lease table (lease.go).
	leases *leaseTable
	// kaConfirm shares leadership confirmations among keepalives
	// (keepalive_confirm.go).
	kaConfirm keepAliveConfirmer

	mu       sync.Mutex
	ended    bool // end was called: no timer is armed from then on
	waits    map[waitKey][]chan waitResult
	timers   map[leaderTimer]*time.Timer
	timerDue map[leaderTimer]time.Time // when each armed timer fires

	// revoking is the lock whose revocation the entry being applied
	// emitted, until its lock changed: only the revoke-slot-early fault
	// (Faults) reads it, from onEvent, which Apply runs one at a time.
	revoking string
}

// newLeaderTerm returns the state of a leadership of n that starts now:
// an empty lease table (lead fills it after its Barrier), no timer, no
// waiter.
func newLeaderTerm(n *Node) *leaderTerm {
	ctx, cancel := context.WithCancel(context.Background())
	return &leaderTerm{
		n:        n,
		ctx:      ctx,
		cancel:   cancel,
		leases:   newLeaseTable(n.cfg.Now),
		waits:    make(map[waitKey][]chan waitResult),
		timers:   make(map[leaderTimer]*time.Timer),
		timerDue: make(map[leaderTimer]time.Time),
	}
}

// done is closed when the term ends.
func (t *leaderTerm) done() <-chan struct{} { return t.ctx.Done() }

// end ends the term: its ctx (the leader's loop, waiting requests, which
// answer unknown_outcome) and every timer. Timers are not armed from then
// on. It is idempotent.
func (t *leaderTerm) end() {
	t.cancel()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ended = true
	t.stopTimersLocked()
}

// serve makes the node serve (ready) in this term, unless the term has
// ended, and reports whether it does: an ended term never makes the node
// serve, whatever its goroutines still do (a later term serves only after
// its own Barrier).
func (t *leaderTerm) serve() bool {
	n := t.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.leadership() != t {
		return false
	}
	n.ready.Store(true)
	return true
}

// leadership returns the current term, nil when this node does not lead.
func (n *Node) leadership() *leaderTerm { return n.term.Load() }

// leading reports whether Raft has reported this node the leader (serving
// or not yet: see ready).
func (n *Node) leading() bool { return n.leadership() != nil }

// leadershipDone returns a channel closed when the current leadership
// ends (already closed when this node does not lead).
func (n *Node) leadershipDone() <-chan struct{} {
	if t := n.leadership(); t != nil {
		return t.done()
	}
	return n.noTerm
}

func (n *Node) watchLeadership() {
	defer n.wg.Done()
	for {
		select {
		case <-n.stop:
			return
		case isLeader := <-n.raft.LeaderCh():
			if isLeader {
				n.startLeadership()
			} else {
				n.endLeadership()
			}
		}
	}
}

// startLeadership starts a term and its leader's loop, unless one runs.
func (n *Node) startLeadership() {
	n.mu.Lock()
	if n.leading() {
		n.mu.Unlock()
		return
	}
	t := newLeaderTerm(n)
	n.term.Store(t)
	n.mu.Unlock()
	n.wg.Add(1)
	go t.lead()
}

// endLeadership drops the current term, if any: the node stops serving,
// its timers stop and its waiting requests are answered.
func (n *Node) endLeadership() {
	n.mu.Lock()
	defer n.mu.Unlock()
	t := n.leadership()
	if t == nil {
		return
	}
	n.term.Store(nil)
	n.ready.Store(false)
	t.end()
	n.log.Info("lost leadership")
}
