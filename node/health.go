package node

import (
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"github.com/raftlock/raftlock/api"
)

// Health reports whether this node is healthy (httpapi.HealthService,
// GET /v1/health), from local state only (no network round): it is a
// member of the latest Raft configuration, and either it leads and reaches
// a quorum of voters (itself included; a peer counts as unreached while
// its heartbeats fail, and Raft itself steps down after LeaderLeaseTimeout
// without a quorum) or it follows a known leader it heard from within
// ElectionTimeout (at least HeartbeatTimeout) and is within the lag
// bound of the commit index that leader announced (lag.go). Otherwise it
// says why.
func (n *Node) Health() api.HealthStatus {
	st := n.health()
	st.ID, st.AppliedIndex = n.cfg.ID, n.fsm.AppliedIndex()
	return st
}

func (n *Node) health() api.HealthStatus {
	select {
	case <-n.stop:
		return api.HealthStatus{Reason: "node is shutting down"}
	default:
	}
	if err := n.FatalErr(); err != nil {
		return api.HealthStatus{Reason: err.Error()}
	}
	if err := n.Divergence(); err != nil {
		return api.HealthStatus{Reason: err.Error()}
	}
	if err := n.StorageError(); err != nil {
		return api.HealthStatus{Reason: fmt.Sprintf("cannot write its Raft stores in %s: %v", n.cfg.DataDir, err)}
	}
	if d, err := n.DiskSpace(); err == nil && d.Low() {
		return api.HealthStatus{Reason: fmt.Sprintf("disk nearly full: %d MiB free in %s, below the %d MiB this node must keep free",
			d.Free>>20, n.cfg.DataDir, (d.Margin+(1<<20)-1)>>20)}
	}
	conf := n.raft.GetConfiguration()
	if err := conf.Error(); err != nil {
		return api.HealthStatus{Reason: fmt.Sprintf("reading the Raft configuration: %v", err)}
	}
	self := raft.ServerID(n.cfg.ID)
	member, voters, reached := false, 0, 0
	for _, s := range conf.Configuration().Servers {
		if s.ID == self {
			member = true
		}
		if s.Suffrage == raft.Voter {
			voters++
			if s.ID == self || !n.watch.isDown(s.ID) {
				reached++
			}
		}
	}
	if !member {
		return api.HealthStatus{Reason: fmt.Sprintf("node %s is not a member of the cluster's configuration", n.cfg.ID)}
	}
	switch st := n.raft.State(); st {
	case raft.Leader:
		if quorum := voters/2 + 1; reached < quorum {
			return api.HealthStatus{Reason: fmt.Sprintf("leader reaches %d of %d voters, fewer than a quorum (%d)", reached, voters, quorum)}
		}
		return api.HealthStatus{Healthy: true, LastContact: 0}
	case raft.Follower:
		_, id := n.raft.LeaderWithID()
		if id == "" {
			return api.HealthStatus{Reason: "no known leader"}
		}
		limit := max(n.cfg.ElectionTimeout, n.cfg.HeartbeatTimeout)
		ago := time.Since(n.raft.LastContact())
		if ago > limit {
			return api.HealthStatus{LastContact: ago,
				Reason: fmt.Sprintf("no contact with leader %s for %v (limit %v)", id, ago.Round(time.Millisecond), limit)}
		}
		if why := n.lag.lagReason(n.fsm.AppliedIndex(), time.Now()); why != "" {
			return api.HealthStatus{LastContact: ago, Reason: why}
		}
		return api.HealthStatus{Healthy: true, LastContact: ago}
	case raft.Candidate:
		return api.HealthStatus{Reason: "no leader: election in progress"}
	default:
		return api.HealthStatus{Reason: fmt.Sprintf("raft is %s", st)}
	}
}
