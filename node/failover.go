package node

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// fastFailoverWindow is how long a follower keeps the short heartbeat
// timeout after it lost a connection its leader had opened.
const fastFailoverWindow = 3 * time.Second

// fastFailover is a follower's quick reaction to a dead leader. A follower
// notices a leader that stopped answering only when it has heard nothing
// for a random 1-2 heartbeat timeouts (0.5-1 s by default): the timeout
// must ride out a loaded machine's pauses. But a leader whose process died
// (crashed, killed) closes its connections at once: the kernel does it.
// When a Raft connection the leader opened to this follower is lost, the
// follower shortens its heartbeat timeout to the leader lease timeout
// (250 ms by default) for fastFailoverWindow: if the leader is alive its
// heartbeats (every tenth of its own timeout) keep coming and nothing
// happens; if it is dead the follower stands after 250-500 ms instead of
// 500-1000. Pre-vote keeps a follower that stands too early from
// disturbing a leader the others still hear. A frozen or cut-off leader
// closes nothing: the normal timeout applies.
type fastFailover struct {
	mu    sync.Mutex
	until time.Time   // the short timeout holds until then (zero: normal)
	timer *time.Timer // restores the normal timeout
}

// onInboundLost is the peer port's report of a lost inbound Raft
// connection (raftnet.RaftNet.OnInboundLost).
func (n *Node) onInboundLost() {
	if n.raft.State() != raft.Follower {
		return
	}
	short := n.cfg.LeaderLeaseTimeout
	f := &n.failover
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.until.IsZero() {
		f.until = time.Now().Add(fastFailoverWindow)
		return
	}
	rc := n.raft.ReloadableConfig()
	if short <= 0 || short >= rc.HeartbeatTimeout {
		return
	}
	rc.HeartbeatTimeout = short
	if err := n.raft.ReloadConfig(rc); err != nil {
		n.log.Debug("shorten the heartbeat timeout", "error", err)
		return
	}
	n.log.Debug("a connection from the leader was lost: heartbeat timeout shortened", "timeout", short, "for", fastFailoverWindow)
	f.until = time.Now().Add(fastFailoverWindow)
	f.timer = time.AfterFunc(fastFailoverWindow, n.restoreHeartbeatTimeout)
}

// restoreHeartbeatTimeout puts the configured heartbeat timeout back once
// the window has passed (a loss meanwhile extended it).
func (n *Node) restoreHeartbeatTimeout() {
	f := &n.failover
	f.mu.Lock()
	defer f.mu.Unlock()
	if left := time.Until(f.until); left > 0 {
		f.timer = time.AfterFunc(left, n.restoreHeartbeatTimeout)
		return
	}
	f.until = time.Time{}
	select {
	case <-n.stop:
		return
	default:
	}
	rc := n.raft.ReloadableConfig()
	rc.HeartbeatTimeout = n.cfg.HeartbeatTimeout
	if err := n.raft.ReloadConfig(rc); err != nil {
		n.log.Warn("restore the heartbeat timeout", "timeout", n.cfg.HeartbeatTimeout, "error", err)
	}
}

// stopFastFailover stops a pending restore (Shutdown).
func (n *Node) stopFastFailover() {
	n.failover.mu.Lock()
	defer n.failover.mu.Unlock()
	if n.failover.timer != nil {
		n.failover.timer.Stop()
	}
}
