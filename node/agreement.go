package node

import (
	"context"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/transport/raftnet"
)

// DefaultDigestCheckInterval is how often the leader compares the
// replicas' digests.
const DefaultDigestCheckInterval = 5 * time.Second

// DigestReport implements httpapi.Digester: this replica's recent
// digests (fsm.FSM.Digests).
func (n *Node) DigestReport() api.DigestReport {
	ds, origin := n.fsm.Digests()
	rep := api.DigestReport{ID: n.cfg.ID, Origin: origin, Applied: n.fsm.AppliedIndex()}
	for _, d := range ds {
		rep.Digests = append(rep.Digests, api.DigestEntry{Index: d.Index, Digest: hex.EncodeToString(d.Digest[:])})
	}
	return rep
}

// Diverged implements httpapi.Digester: the leader found this replica's
// state digest off the majority's. The replica records it (Divergence),
// logs it, and gives up leadership if it holds it.
func (n *Node) Diverged(d api.DivergedNotice) {
	err := fmt.Errorf("this replica's state diverged from the majority's at entry %d (digest %.16s…, the majority's %.16s…; %d of %d replicas agree; reported by %s): "+
		"it is kept from leading and serving until repaired: "+repairHint, d.Index, d.Yours, d.Majority, d.Agreeing, d.Replicas, d.Reporting, n.cfg.ID)
	if n.divergence.Swap(&err) == nil {
		n.log.Error("replica diverged", "error", err)
	}
	n.ready.Store(false)
	if n.raft.State() == raft.Leader {
		_ = n.raft.LeadershipTransfer()
	}
}

// Divergence is why this replica was found to differ from the majority
// (nil if it never was).
func (n *Node) Divergence() error {
	if p := n.divergence.Load(); p != nil {
		return *p
	}
	return nil
}

// agreementLoop compares the replicas' digests every interval while this
// node leads (and once at the start of its leadership).
func (n *Node) agreementLoop(ctx context.Context) {
	t := time.NewTicker(n.cfg.DigestCheckInterval)
	defer t.Stop()
	for {
		n.checkAgreement(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// report is one replica's digests, by index.
type report struct {
	id, addr string
	voter    bool
	origin   uint64
	digests  map[uint64]string
}

// commonIndex is the highest index at which both a and b have a digest
// (0: none, or different origins).
func commonIndex(a, b report) uint64 {
	if a.origin != b.origin {
		return 0
	}
	var best uint64
	for i := range a.digests {
		if _, ok := b.digests[i]; ok && i > best {
			best = i
		}
	}
	return best
}

// checkAgreement gathers every member's digests and compares them at the
// highest index each pair shares. A member whose digest differs from a
// majority of the members that agree with each other is divergent: if a
// follower, it is demoted to non-voter (it can then never lead, and only
// a leader serves) and told so; if this leader, it tells itself and hands
// leadership to a member of the majority, whose own check then demotes it.
func (n *Node) checkAgreement(ctx context.Context) {
	if !n.ready.Load() || n.Divergence() != nil {
		return
	}
	cf := n.raft.GetConfiguration()
	if cf.Error() != nil {
		return
	}
	servers := cf.Configuration().Servers
	var reports []report
	for _, s := range servers {
		var rep api.DigestReport
		if string(s.ID) == n.cfg.ID {
			rep = n.DigestReport()
		} else {
			cctx, cancel := context.WithTimeout(ctx, n.cfg.DigestCheckInterval)
			var err error
			rep, err = raftnet.GetDigests(cctx, n.DialPeer, string(s.Address))
			cancel()
			if err != nil || rep.ID != string(s.ID) {
				continue // down, or not yet serving: next round
			}
		}
		r := report{id: rep.ID, addr: string(s.Address), voter: s.Suffrage == raft.Voter, origin: rep.Origin, digests: map[uint64]string{}}
		for _, d := range rep.Digests {
			r.digests[d.Index] = d.Digest
		}
		reports = append(reports, r)
	}
	// agree[i] counts the reports j (i included) that share an index with
	// i and have the same digest there; a report without a shared index
	// with anyone is not judged.
	agree := make([]int, len(reports))
	judged := make([]bool, len(reports))
	for i := range reports {
		for j := range reports {
			if i == j {
				agree[i]++
				continue
			}
			if idx := commonIndex(reports[i], reports[j]); idx > 0 {
				judged[i] = true
				if reports[i].digests[idx] == reports[j].digests[idx] {
					agree[i]++
				}
			}
		}
	}
	majority := len(servers)/2 + 1
	var best = -1
	for i := range reports {
		if agree[i] >= majority && (best < 0 || agree[i] > agree[best]) {
			best = i
		}
	}
	if best < 0 {
		return // no majority of agreeing replicas reported this round
	}
	for i, r := range reports {
		if !judged[i] {
			continue
		}
		idx := commonIndex(r, reports[best])
		if idx == 0 || r.digests[idx] == reports[best].digests[idx] {
			continue
		}
		notice := api.DivergedNotice{Index: idx, Leader: n.cfg.ID, Majority: reports[best].digests[idx], Yours: r.digests[idx],
			Agreeing: agree[best], Replicas: len(servers), Reporting: n.cfg.ID}
		if r.id == n.cfg.ID {
			n.log.Error("this leader's state diverged from the majority's: handing leadership over", "index", idx, "agreeing", agree[best])
			n.Diverged(notice)
			return
		}
		if r.voter {
			if err := n.raft.DemoteVoter(raft.ServerID(r.id), 0, configChangeTimeout).Error(); err != nil {
				n.log.Warn("could not demote a diverged replica", "id", r.id, "error", err)
			} else {
				notice.Demoted = true
			}
		}
		n.log.Error("replica diverged from the majority: demoted to non-voter until repaired", "id", r.id, "index", idx,
			"its_digest", r.digests[idx], "majority_digest", reports[best].digests[idx], "agreeing", agree[best], "demoted", notice.Demoted)
		cctx, cancel := context.WithTimeout(ctx, n.cfg.DigestCheckInterval)
		if err := raftnet.TellDiverged(cctx, n.DialPeer, r.addr, notice); err != nil {
			n.log.Warn("could not tell a diverged replica", "id", r.id, "error", err)
		}
		cancel()
	}
}
