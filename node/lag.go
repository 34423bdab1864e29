package node

import (
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// A follower far behind its leader is not healthy, even while it hears
// from the leader: a load balancer that routes reads or a probe that
// gates a rolling restart on it would count a replica that holds none of
// the recent state (one 33k entries behind answered ok). The bound
// (DESIGN, "Health"; API.md, "Health, metrics and status"): more than
// healthMaxLagEntries entries behind the commit index its leader last
// announced, or an entry its leader announced committed not applied
// within healthMaxLagTime.
const (
	healthMaxLagEntries = 5000
	healthMaxLagTime    = 10 * time.Second
)

// commitLag follows the commit index a follower's leader announces in
// its appends (AppendEntriesRequest.LeaderCommitIndex; heartbeats carry
// none), as the node's transport hands them to Raft (rpcTap), and
// judges, when health asks, how far the state machine is behind it. The
// tap only records (no lock of the state machine on Raft's RPC path):
// the time an index was announced is judged at the next health check,
// so a lateness it reports is a lower bound, never more than the truth.
type commitLag struct {
	mu           sync.Mutex
	leaderCommit uint64    // highest commit index announced
	seenAt       time.Time // when it was announced
	target       uint64    // an announced commit index the follower must reach
	since        time.Time // when target was announced
}

// saw records a commit index announced at now.
func (c *commitLag) saw(commit uint64, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if commit > c.leaderCommit {
		c.leaderCommit, c.seenAt = commit, now
	}
	if c.target == 0 {
		c.target, c.since = commit, now
	}
}

// behind answers the highest commit index announced, how many entries
// the state machine (at applied) is behind it, and for how long at least
// it has not applied an index announced committed (0 if it has).
func (c *commitLag) behind(applied uint64, now time.Time) (leaderCommit, entries uint64, late time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.target != 0 && applied >= c.target {
		// Reached: the next target is the newest index announced,
		// timed from when it was.
		c.target, c.since = c.leaderCommit, c.seenAt
	}
	if c.leaderCommit > applied {
		entries = c.leaderCommit - applied
	}
	if c.target > applied {
		late = now.Sub(c.since)
	}
	return c.leaderCommit, entries, late
}

// lagReason is why a follower at applied is unhealthy for its lag, ""
// if it is within the bound.
func (c *commitLag) lagReason(applied uint64, now time.Time) string {
	commit, entries, late := c.behind(applied, now)
	switch {
	case entries > healthMaxLagEntries:
		return fmt.Sprintf("behind its leader: applied index %d, %d entries behind the leader's commit index %d (the bound is %d entries)",
			applied, entries, commit, healthMaxLagEntries)
	case late > healthMaxLagTime:
		return fmt.Sprintf("behind its leader: applied index %d, %d entries behind the leader's commit index %d for %v (the bound is %v)",
			applied, entries, commit, late.Round(time.Millisecond), healthMaxLagTime)
	}
	return ""
}

// rpcTap hands the RPCs of a transport's Consumer on to Raft, recording
// the commit index of every append (commitLag) on the way.
type rpcTap struct {
	lag  *commitLag
	in   <-chan raft.RPC
	out  chan raft.RPC
	once sync.Once
	stop chan struct{}
	shut sync.Once
}

func newRPCTap(in <-chan raft.RPC, lag *commitLag) *rpcTap {
	return &rpcTap{lag: lag, in: in, out: make(chan raft.RPC), stop: make(chan struct{})}
}

// consumer is the channel Raft reads (started on the first call).
func (p *rpcTap) consumer() <-chan raft.RPC {
	p.once.Do(func() { go p.run() })
	return p.out
}

func (p *rpcTap) run() {
	for {
		select {
		case <-p.stop:
			return
		case rpc := <-p.in:
			if ae, ok := rpc.Command.(*raft.AppendEntriesRequest); ok && ae.LeaderCommitIndex > 0 {
				p.lag.saw(ae.LeaderCommitIndex, time.Now())
			}
			select {
			case p.out <- rpc:
			case <-p.stop:
				// The transport closes: its sender stops waiting.
				return
			}
		}
	}
}

// close stops handing RPCs on.
func (p *rpcTap) close() { p.shut.Do(func() { close(p.stop) }) }
