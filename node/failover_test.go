package node

import (
	"fmt"
	"testing"
	"time"
)

// A follower that loses a connection its leader opened (the leader's
// process stopped: its sockets closed) shortens its heartbeat timeout to
// the leader lease timeout, so that it stands sooner, and puts the
// configured timeout back once the window has passed; the cluster elects
// a new leader meanwhile.
func TestALostLeaderConnectionShortensTheHeartbeatTimeoutForAWhile(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	_, l := c.leader()
	nodes := c.snapshotNodes()
	c.stop(l)
	var f *Node
	for i, n := range nodes {
		if i != l {
			f = n
			break
		}
	}
	short, normal := f.cfg.LeaderLeaseTimeout, f.cfg.HeartbeatTimeout
	eventually(t, 10*time.Second, "a follower's heartbeat timeout shortened", func() error {
		for i, n := range nodes {
			if i != l && n.raft.ReloadableConfig().HeartbeatTimeout == short {
				return nil
			}
		}
		return fmt.Errorf("heartbeat timeouts still %v", normal)
	})
	if nl, _ := c.leader(); nl == nodes[l] {
		t.Fatal("the stopped node leads")
	}
	eventually(t, fastFailoverWindow+10*time.Second, "the configured timeout back", func() error {
		for i, n := range nodes {
			if got := n.raft.ReloadableConfig().HeartbeatTimeout; i != l && got != normal {
				return fmt.Errorf("%s: %v, want %v", n.cfg.ID, got, normal)
			}
		}
		return nil
	})
}
