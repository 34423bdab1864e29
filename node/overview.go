package node

import (
	"cmp"
	"context"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/transport/raftnet"
)

// memberProbeTimeout bounds the leader's question to a member's peer port
// (its last log index) for an overview. An answer is reused for
// memberProbeTTL while the leader's log does not grow, and for
// memberProbeMin in any case, so that many open pages cost the members
// little.
const (
	memberProbeTimeout = time.Second
	memberProbeTTL     = time.Second
	memberProbeMin     = 50 * time.Millisecond
)

// memberProbes caches the leader's last look at the members.
type memberProbes struct {
	mu   sync.Mutex
	at   time.Time
	last uint64 // the leader's last log index at
	out  map[string]api.MemberStatus
}

// Overview answers GET /v1/overview: the cluster, the locks, the sessions
// and the recent events, read on the leader, once its applied index is
// above index (at once for index 0), or after wait. It needs read access
// to every lock (the rule read: with the empty prefix); the members are
// shown to an admin token only. It blocks on the node's events, never
// polls, and confirms leadership before answering (confirmWatch); with
// index it counts against the node's caps on blocking queries.
func (n *Node) Overview(ctx context.Context, index uint64, wait time.Duration) (api.Overview, error) {
	if wait == 0 {
		wait = api.DefaultWatchWait
	}
	if err := api.CheckWatchWait("wait", wait); err != nil {
		return api.Overview{}, err
	}
	if err := n.authorize(ctx, api.AccessRead, ""); err != nil {
		return api.Overview{}, err
	}
	admin := n.authorize(ctx, api.AccessAdmin, "") == nil
	if index != 0 {
		done, err := n.enterBlocking(n.blockingToken(ctx))
		if err != nil {
			return api.Overview{}, err
		}
		defer done()
	}
	if err := n.confirmWatch(ctx); err != nil {
		return api.Overview{}, err
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for index != 0 {
		lost := n.leadershipDone()
		woken := n.events.wake()
		if n.fsm.AppliedIndex() > index {
			break
		}
		select {
		case <-woken:
			continue
		case <-timer.C:
		case <-lost:
			return api.Overview{}, n.noLeader()
		case <-n.stop:
			return api.Overview{}, n.noLeader()
		case <-ctx.Done():
			return api.Overview{}, ctx.Err()
		}
		break
	}
	ov := n.overview(ctx, admin)
	if err := n.reauthorize(ctx); err != nil {
		return api.Overview{}, err
	}
	return ov, n.confirmWatch(ctx)
}

// overview reads the state the page shows.
func (n *Node) overview(ctx context.Context, admin bool) api.Overview {
	ov := api.Overview{Index: n.fsm.AppliedIndex(), Now: time.Now().UTC().Format(time.RFC3339Nano),
		Leader: n.cfg.ID, Term: n.raft.CurrentTerm(), Serving: n.ready.Load(), CommitIndex: n.raft.CommitIndex()}
	if admin {
		ov.Members = n.memberStatuses(ctx)
	} else {
		ov.MembersHidden = true
	}

	locks, _ := n.fsm.LocksPage("", "", api.MaxOverviewLocks, api.MaxAnswerBytes)
	ov.LocksTotal = n.fsm.LockCount()
	held := make(map[uint64]bool)
	for _, l := range locks {
		for _, h := range l.Holders {
			held[h.Token] = true
		}
	}
	applied := n.events.grantTimes(held)
	ov.Locks = make([]api.OverviewLock, 0, len(locks))
	for _, l := range locks {
		ov.Locks = append(ov.Locks, n.overviewLock(l, applied))
	}

	sessions := n.fsm.Sessions()
	ov.SessionsTotal = len(sessions)
	slices.SortFunc(sessions, func(a, b fsm.SessionRecord) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(api.SessionHandle(a.ID), api.SessionHandle(b.ID)))
	})
	if len(sessions) > api.MaxOverviewSessions {
		sessions = sessions[:api.MaxOverviewSessions]
	}
	ov.Sessions = make([]api.SessionSummary, 0, len(sessions))
	for _, s := range sessions {
		sum := api.SessionSummary{Handle: api.SessionHandle(s.ID), Name: s.Name,
			TTL: time.Duration(s.TTL).String(), LockDelay: time.Duration(s.LockDelay).String(),
			Created: time.Unix(0, s.Created).UTC().Format(time.RFC3339), Locks: make([]string, 0, len(s.Locks))}
		for name := range s.Locks {
			sum.Locks = append(sum.Locks, name)
		}
		sort.Strings(sum.Locks)
		ov.Sessions = append(ov.Sessions, sum)
	}

	ov.Events = n.events.replies(func(id string) string {
		s, _ := n.fsm.Session(id)
		return s.Name
	})
	return ov
}

// overviewLock is one lock as the page shows it; applied are the local
// grant times (eventLog.grantTimes).
func (n *Node) overviewLock(l fsm.Lock, applied map[uint64]time.Time) api.OverviewLock {
	st := n.lockStateOf(l)
	r := api.NewLockReply(st)
	out := api.OverviewLock{Name: r.Name, Mode: r.Mode, Holders: make([]api.OverviewHolder, 0, len(r.Holders)),
		Waiters: r.Waiters, Queue: r.Queue, DelayUntil: r.DelayUntil, Index: r.Index,
		Permits: r.Permits, SlotDelays: r.SlotDelays}
	for _, h := range r.Holders {
		oh := api.OverviewHolder{HolderReply: h}
		if at := n.grantTime(h.Token, applied); !at.IsZero() {
			oh.Since = at.UTC().Format(time.RFC3339)
		}
		out.Holders = append(out.Holders, oh)
	}
	return out
}

// grantTime is when the grant with token was made: its log entry's
// append time (the leader's clock that appended it) while the log holds
// it, else the time of the entry as this replica applied it (eventLog),
// else zero.
func (n *Node) grantTime(token uint64, applied map[uint64]time.Time) time.Time {
	if n.logs != nil {
		var e raft.Log
		if err := n.logs.GetLog(token, &e); err == nil && !e.AppendedAt.IsZero() {
			return e.AppendedAt
		}
	}
	return applied[token]
}

// memberStatuses is the configuration with each member's state: the
// leader's own, and each other member's last log index as its peer port
// answers it (the bootstrap probe), asked at most once per
// memberProbeTTL.
func (n *Node) memberStatuses(ctx context.Context) []api.MemberStatus {
	cf, err := n.configuration()
	if err != nil {
		return nil
	}
	https := make(map[string]string)
	for _, m := range n.fsm.Members() {
		https[m.ID] = m.HTTPAddr
	}
	last := n.raft.LastIndex()
	n.probes.mu.Lock()
	defer n.probes.mu.Unlock()
	// Reused while the leader's log has not grown since (then the lag is
	// exact as of the probe), or for memberProbeMin whatever happens.
	age := time.Since(n.probes.at)
	if !(age < memberProbeTTL && n.probes.last == last || age < memberProbeMin) {
		n.probes.out = n.probeMembers(context.WithoutCancel(ctx), cf.Servers)
		n.probes.at, n.probes.last = time.Now(), last
	}
	out := make([]api.MemberStatus, 0, len(cf.Servers))
	for _, s := range cf.Servers {
		m := api.Member{ID: string(s.ID), RaftAddr: string(s.Address), HTTPAddr: https[string(s.ID)],
			Voter: s.Suffrage == raft.Voter}
		ms := api.MemberStatus{Member: m, State: "unknown"}
		if m.ID == n.cfg.ID {
			ms.State, ms.LastIndex = "leader", last
		} else if p, ok := n.probes.out[m.ID]; ok && p.RaftAddr == m.RaftAddr {
			ms.State, ms.LastIndex, ms.Error = p.State, p.LastIndex, p.Error
			if p.State == "follower" && last > p.LastIndex {
				// Against the leader's index now: an answer reused from
				// the last memberProbeTTL may overstate the lag, never
				// understate it.
				ms.Lag = last - p.LastIndex
			}
		}
		out = append(out, ms)
	}
	return out
}

// probeMembers asks every other member's peer port for its last log
// index, in parallel, each for at most memberProbeTimeout.
func (n *Node) probeMembers(ctx context.Context, servers []raft.Server) map[string]api.MemberStatus {
	out := make(map[string]api.MemberStatus)
	if n.peer == nil {
		return out
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range servers {
		if string(s.ID) == n.cfg.ID {
			continue
		}
		wg.Add(1)
		go func(s raft.Server) {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(ctx, memberProbeTimeout)
			defer cancel()
			ms := api.MemberStatus{Member: api.Member{ID: string(s.ID), RaftAddr: string(s.Address)}}
			st, err := raftnet.GetBootstrapState(pctx, n.DialPeer, string(s.Address))
			switch {
			case err != nil:
				ms.State, ms.Error = "unreachable", err.Error()
			case st.ID != string(s.ID):
				ms.State, ms.Error = "unreachable", "the node at "+string(s.Address)+" is "+st.ID
			default:
				ms.State, ms.LastIndex = "follower", st.LastIndex
			}
			mu.Lock()
			out[string(s.ID)] = ms
			mu.Unlock()
		}(s)
	}
	wg.Wait()
	return out
}
