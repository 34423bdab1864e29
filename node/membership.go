package node

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/transport/raftnet"
)

// MinVoters is the fewest voters RemoveMember leaves without force: a
// cluster of one voter loses its only copy of the state with one disk.
const MinVoters = 2

// catchUpTimeout bounds how long AddMember waits for a new voter, added
// first as a non-voter, to catch up with the leader's log before it is
// made a voter.
const catchUpTimeout = 20 * time.Second

// configChangeTimeout bounds how long Raft may queue a configuration
// change.
const configChangeTimeout = 10 * time.Second

// Members lists the Raft configuration with each member's HTTP address
// (admin; leader only, leadership confirmed with a quorum).
func (n *Node) Members(ctx context.Context) ([]api.Member, error) {
	info, err := n.Cluster(ctx)
	if err != nil {
		return nil, err
	}
	return info.Members, nil
}

// configuration returns the latest Raft configuration (committed or not).
func (n *Node) configuration() (raft.Configuration, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return raft.Configuration{}, mapRaftError(err)
	}
	return f.Configuration(), nil
}

// leaderFor checks that the caller may manage membership and that this
// node leads and serves.
func (n *Node) leaderFor(ctx context.Context) error {
	if err := n.authorize(ctx, api.AccessAdmin, ""); err != nil {
		return err
	}
	if !n.ready.Load() {
		return n.noLeader()
	}
	return ctx.Err()
}

// AddMember adds m to the cluster (admin, leader only): it records m's
// HTTP address in the replicated member table (so that forwarding to m
// works from the moment it is a member) and adds it to the Raft
// configuration. A voter is added first as a non-voter and promoted once
// it has caught up with the leader's log (when it has a peer port to ask),
// so that a cluster with a member down does not wait for a new, empty one
// to commit. Adding a member as it already is changes nothing; a member
// already present with another address or suffrage is changed (a voter
// made a non-voter only if MinVoters voters remain).
func (n *Node) AddMember(ctx context.Context, m api.Member) error {
	if err := n.leaderFor(ctx); err != nil {
		return err
	}
	if err := m.Validate(); err != nil {
		return err
	}
	conf, err := n.configuration()
	if err != nil {
		return err
	}
	var cur *raft.Server
	voters := 0
	for i, s := range conf.Servers {
		if s.Suffrage == raft.Voter {
			voters++
		}
		switch {
		case string(s.ID) == m.ID:
			cur = &conf.Servers[i]
		case string(s.Address) == m.RaftAddr:
			return invalid("raft_addr %s is member %s's: remove %s first", m.RaftAddr, s.ID, s.ID)
		}
	}
	id, addr := raft.ServerID(m.ID), raft.ServerAddress(m.RaftAddr)
	demote := cur != nil && cur.Suffrage == raft.Voter && !m.Voter
	switch {
	case demote && cur.Address != addr:
		return invalid("member %s is a voter at %s: change its raft_addr or make it a non-voter, one at a time", m.ID, cur.Address)
	case demote && voters-1 < MinVoters:
		return invalid("making %s a non-voter would leave %d voter(s), fewer than %d", m.ID, voters-1, MinVoters)
	}
	if err := n.setMemberRecord(ctx, m); err != nil {
		return err
	}
	switch {
	case cur != nil && cur.Address == addr && (cur.Suffrage == raft.Voter) == m.Voter:
		return nil
	case demote:
		n.log.Info("member made a non-voter", "id", m.ID)
		return n.waitConfig(ctx, n.raft.DemoteVoter(id, 0, configChangeTimeout))
	}
	if !m.Voter {
		n.log.Info("adding a non-voter", "id", m.ID, "raft_addr", m.RaftAddr, "http_addr", m.HTTPAddr)
		return n.waitConfig(ctx, n.raft.AddNonvoter(id, addr, 0, configChangeTimeout))
	}
	if cur == nil || cur.Address != addr {
		n.log.Info("adding a voter: first as a non-voter, until it has caught up", "id", m.ID,
			"raft_addr", m.RaftAddr, "http_addr", m.HTTPAddr)
		if err := n.waitConfig(ctx, n.raft.AddNonvoter(id, addr, 0, configChangeTimeout)); err != nil {
			return err
		}
	}
	// A non-voter (just added, or an earlier attempt's) votes only once
	// it has caught up.
	if err := n.awaitCatchUp(ctx, m); err != nil {
		return err
	}
	n.log.Info("member made a voter", "id", m.ID)
	return n.waitConfig(ctx, n.raft.AddVoter(id, addr, 0, configChangeTimeout))
}

// setMemberRecord records m's addresses and the command version it reads
// in the replicated member table, unless they are recorded already
// (memberRecord).
func (n *Node) setMemberRecord(ctx context.Context, m api.Member) error {
	rec, recorded := n.memberRecord(m)
	if recorded {
		return nil
	}
	_, err := n.propose(ctx, &fsm.Command{Type: fsm.CmdSetMember, SetMember: &rec})
	return err
}

// memberRecord returns the member table's record that m asks for, and
// whether the table holds it already. A record without a command version
// (an operator's members add) keeps the one recorded for the same
// addresses: only the member itself knows it.
func (n *Node) memberRecord(m api.Member) (fsm.Member, bool) {
	rec := fsm.Member{ID: m.ID, RaftAddr: m.RaftAddr, HTTPAddr: m.HTTPAddr, Commands: m.Commands}
	for _, cur := range n.fsm.Members() {
		if cur.ID != m.ID || cur.RaftAddr != m.RaftAddr {
			continue
		}
		if rec.Commands == 0 {
			rec.Commands = cur.Commands
		}
		return rec, cur == rec
	}
	return rec, false
}

// awaitCatchUp waits until m, a non-voter just added, has the leader's
// log up to the index it had when m was added, asking m's peer port (the
// bootstrap probe). Without a peer port (an in-memory transport) it does
// not wait. It gives up after catchUpTimeout: m then stays a non-voter.
func (n *Node) awaitCatchUp(ctx context.Context, m api.Member) error {
	if n.peer == nil {
		return nil
	}
	target := n.raft.LastIndex()
	ctx, cancel := context.WithTimeout(ctx, catchUpTimeout)
	defer cancel()
	var last error
	for {
		st, err := raftnet.GetBootstrapState(ctx, n.DialPeer, m.RaftAddr)
		switch {
		case err != nil:
			last = err
		case st.ID != m.ID:
			last = fmt.Errorf("the node at %s is %q, not %q", m.RaftAddr, st.ID, m.ID)
		case st.LastIndex >= target:
			return nil
		default:
			last = fmt.Errorf("at index %d of %d", st.LastIndex, target)
		}
		select {
		case <-ctx.Done():
			return &api.Error{Code: api.CodeUnknownOutcome, Message: fmt.Sprintf(
				"%s was added as a non-voter but has not caught up (%v): it is not a voter yet; retry once it runs", m.ID, last)}
		case <-n.stop:
			return n.noLeader()
		case <-time.After(50 * time.Millisecond): // polling another node
		}
	}
}

// waitConfig waits for a configuration change until ctx ends.
func (n *Node) waitConfig(ctx context.Context, f raft.IndexFuture) error {
	if err := waitFuture(ctx, f); err != nil {
		if ctx.Err() != nil {
			return &api.Error{Code: api.CodeUnknownOutcome, Message: fmt.Sprintf(
				"configuration change ended before its outcome was known (%v): list the members, or retry", ctx.Err())}
		}
		return mapRaftError(err)
	}
	return nil
}

// RemoveMember removes member id from the Raft configuration (admin,
// leader only). It is refused with invalid_argument when it would leave
// fewer than MinVoters voters, unless force. The leader may remove
// itself: it steps down once the change commits. The member's record in
// the member table stays (it is read only for members of the
// configuration, and a member added again replaces it).
func (n *Node) RemoveMember(ctx context.Context, id string, force bool) error {
	if err := n.leaderFor(ctx); err != nil {
		return err
	}
	if err := api.CheckText("member id", id, 1, 128); err != nil {
		return err
	}
	conf, err := n.configuration()
	if err != nil {
		return err
	}
	found, voter, voters := false, false, 0
	for _, s := range conf.Servers {
		if s.Suffrage == raft.Voter {
			voters++
		}
		if string(s.ID) == id {
			found, voter = true, s.Suffrage == raft.Voter
		}
	}
	if !found {
		return api.Errorf(api.CodeNotFound, "no member %q", id)
	}
	if voter && voters-1 < MinVoters && !force {
		return invalid("removing %s would leave %d voter(s), fewer than %d (a cluster that cannot lose one): add a member first, or pass force=true",
			id, voters-1, MinVoters)
	}
	n.log.Info("removing a member", "id", id, "voter", voter, "force", force)
	return n.waitConfig(ctx, n.raft.RemoveServer(raft.ServerID(id), 0, configChangeTimeout))
}

// TransferLeadership hands leadership to voter to ("": the most
// up-to-date voter; admin, leader only) and answers the old and the new
// leader (To "" if no leader is known yet when the transfer completes).
// Requests that reach this node meanwhile are answered no_leader, which
// clients retry.
func (n *Node) TransferLeadership(ctx context.Context, to string) (api.TransferReply, error) {
	if err := n.authorize(ctx, api.AccessAdmin, ""); err != nil {
		return api.TransferReply{}, err
	}
	return n.transferLeadership(ctx, to)
}

func (n *Node) transferLeadership(ctx context.Context, to string) (api.TransferReply, error) {
	out := api.TransferReply{From: n.cfg.ID}
	if !n.leading() {
		return out, n.noLeader()
	}
	var f raft.Future
	if to == "" {
		f = n.raft.LeadershipTransfer()
	} else {
		if err := api.CheckText("to", to, 1, 128); err != nil {
			return out, err
		}
		conf, err := n.configuration()
		if err != nil {
			return out, err
		}
		var target *raft.Server
		for i, s := range conf.Servers {
			if string(s.ID) == to {
				target = &conf.Servers[i]
			}
		}
		switch {
		case target == nil:
			return out, api.Errorf(api.CodeNotFound, "no member %q", to)
		case target.Suffrage != raft.Voter:
			return out, invalid("member %s is not a voter: only a voter can lead", to)
		case to == n.cfg.ID:
			out.To = to
			return out, nil
		}
		f = n.raft.LeadershipTransferToServer(target.ID, target.Address)
	}
	n.log.Info("transferring leadership", "to", to)
	if err := waitFuture(ctx, f); err != nil {
		if ctx.Err() != nil {
			return out, &api.Error{Code: api.CodeUnknownOutcome, Message: fmt.Sprintf(
				"leadership transfer ended before its outcome was known (%v)", ctx.Err())}
		}
		return out, api.Errorf(api.CodeNoLeader, "leadership transfer failed: %v", err)
	}
	// The transfer completes when the target has started its election;
	// name the new leader once this node has heard from it.
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	deadline := time.After(2 * n.cfg.ElectionTimeout)
	for {
		if _, id := n.raft.LeaderWithID(); id != "" && string(id) != n.cfg.ID {
			out.To = string(id)
			return out, nil
		}
		select {
		case <-t.C:
		case <-deadline:
			return out, nil
		case <-ctx.Done():
			return out, nil
		}
	}
}

// StepDown hands leadership to another voter if this node leads, waiting
// at most until ctx ends, so that stopping a leader costs clients a
// leadership transfer rather than an election timeout (raftlockd calls it
// on SIGTERM before Shutdown). It answers the new leader ("" if none is
// known); a node that does not lead returns at once.
func (n *Node) StepDown(ctx context.Context) (string, error) {
	if !n.leading() {
		return "", nil
	}
	out, err := n.transferLeadership(ctx, "")
	return out.To, err
}

// BootstrapState answers the bootstrap probe of a starting peer: this node
// holds Raft state, its term, last index and latest configuration.
func (n *Node) BootstrapState() api.BootstrapState {
	st := api.BootstrapState{ID: n.cfg.ID, HasState: true, Term: n.raft.CurrentTerm(),
		LastIndex: n.raft.LastIndex(), Servers: []api.Member{}}
	_, leader := n.raft.LeaderWithID()
	st.Leader = string(leader)
	if n.watched != nil {
		st.StorageWriteMicros = n.watched.logEWMA.Load()
	}
	st.StorageFailing = n.StorageError() != nil
	https := make(map[string]string)
	for _, m := range n.fsm.Members() {
		https[m.ID] = m.HTTPAddr
	}
	if conf, err := n.configuration(); err == nil {
		for _, s := range conf.Servers {
			st.Servers = append(st.Servers, api.Member{ID: string(s.ID), RaftAddr: string(s.Address),
				HTTPAddr: https[string(s.ID)], Voter: s.Suffrage == raft.Voter})
		}
	}
	return st
}

// inConfiguration reports whether id is in the latest Raft configuration.
func (n *Node) inConfiguration(id string) bool {
	conf, err := n.configuration()
	if err != nil {
		return false
	}
	for _, s := range conf.Servers {
		if string(s.ID) == id {
			return true
		}
	}
	return false
}

// Removed reports whether this node was removed from the cluster: its
// latest Raft configuration has members, and it is not one of them. peers
// are then the peer ports (Raft addresses) of the members it knows of
// (that configuration's, then the member table's records), where its HTTP
// API asks who leads now; none for a node without a peer port. A node
// that joins and has no configuration yet is not removed.
func (n *Node) Removed() (removed bool, peers []string) {
	conf, err := n.configuration()
	if err != nil || len(conf.Servers) == 0 {
		return false, nil
	}
	for _, s := range conf.Servers {
		if string(s.ID) == n.cfg.ID {
			return false, nil
		}
		peers = append(peers, string(s.Address))
	}
	for _, m := range n.fsm.Members() {
		if m.ID != n.cfg.ID && m.RaftAddr != "" && !slices.Contains(peers, m.RaftAddr) {
			peers = append(peers, m.RaftAddr)
		}
	}
	if n.peer == nil {
		peers = nil
	}
	return true, peers
}
