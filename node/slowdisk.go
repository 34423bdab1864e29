package node

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/raftlock/raftlock/transport/raftnet"
)

// A leader whose disk is much slower than a follower's hands leadership
// to that follower: every commit waits for the leader's own fsync, so a
// leader with 2 s fsyncs drags the cluster to a few grants per second
// while its followers could serve hundreds. The thresholds (DESIGN,
// "Disks"): the leader's moving average of log-store write latency is at
// least slowLeaderMin and at least slowLeaderFactor times that of a
// healthy, caught-up voter, on slowLeaderChecks checks in a row (one per
// diskProbeEvery); after a handoff, the node does not hand off again for
// slowLeaderCooldown.
const (
	slowLeaderMin      = 200 * time.Millisecond
	slowLeaderFactor   = 10
	slowLeaderChecks   = 3
	slowLeaderCooldown = 30 * time.Second
	// slowLeaderMaxLag is how far behind the leader's last index a
	// voter may be to take over.
	slowLeaderMaxLag = 1000
)

// watchDisk probes failing stores (storeWatch.probe) and, on the leader,
// checks its disk against its followers' (checkSlowLeader), every
// diskProbeEvery until the node stops.
func (n *Node) watchDisk() {
	t := time.NewTicker(diskProbeEvery)
	defer t.Stop()
	var slow int
	var handedOff time.Time
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		if n.watched == nil {
			continue
		}
		n.watched.probe()
		if !n.leading() || time.Since(handedOff) < slowLeaderCooldown {
			slow = 0
			continue
		}
		to, own, theirs := n.slowerThanAFollower()
		if to == nil {
			slow = 0
			continue
		}
		if slow++; slow < slowLeaderChecks {
			continue
		}
		slow, handedOff = 0, time.Now()
		n.log.Warn("this leader's disk is much slower than a follower's: handing leadership over",
			"to", to.ID, "leader_write_avg", own.Round(time.Millisecond), "follower_write_avg", theirs.Round(time.Microsecond))
		ctx, cancel := context.WithTimeout(context.Background(), 2*n.cfg.ElectionTimeout+time.Second)
		if _, err := n.transferLeadership(ctx, string(to.ID)); err != nil {
			n.log.Warn("handing leadership over from a slow disk failed", "to", to.ID, "error", err)
		}
		cancel()
	}
}

// slowerThanAFollower answers the voter with the fastest disk if this
// leader's is at least slowLeaderMin and slowLeaderFactor times slower
// than it (nil otherwise), with both averages.
func (n *Node) slowerThanAFollower() (*raft.Server, time.Duration, time.Duration) {
	own := time.Duration(n.watched.logEWMA.Load()) * time.Microsecond
	if own < slowLeaderMin || n.peer == nil {
		return nil, own, 0
	}
	conf, err := n.configuration()
	if err != nil {
		return nil, own, 0
	}
	last := n.raft.LastIndex()
	var mu sync.Mutex
	var wg sync.WaitGroup
	var best *raft.Server
	var bestLat time.Duration
	for i, s := range conf.Servers {
		if string(s.ID) == n.cfg.ID || s.Suffrage != raft.Voter {
			continue
		}
		wg.Add(1)
		go func(s *raft.Server) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), memberProbeTimeout)
			defer cancel()
			st, err := raftnet.GetBootstrapState(ctx, n.DialPeer, string(s.Address))
			if err != nil || st.ID != string(s.ID) || st.StorageFailing || st.StorageWriteMicros <= 0 || st.LastIndex+slowLeaderMaxLag < last {
				return
			}
			lat := time.Duration(st.StorageWriteMicros) * time.Microsecond
			mu.Lock()
			if best == nil || lat < bestLat {
				best, bestLat = s, lat
			}
			mu.Unlock()
		}(&conf.Servers[i])
	}
	wg.Wait()
	if best == nil || own < slowLeaderFactor*bestLat {
		return nil, own, bestLat
	}
	return best, own, bestLat
}
