package node

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/transport/raftnet"
)

// probeEvery is how often a node deciding whether to bootstrap asks the
// peers that have not answered yet; probeLogEvery how often it says whom
// it waits for.
const (
	probeEvery    = 100 * time.Millisecond
	probeLogEvery = 5 * time.Second
	// probeWarnAfter is how long the probe waits before it logs whom it
	// waits for at WARN.
	probeWarnAfter = 30 * time.Second
)

// peersConfiguration is the configuration a node bootstraps from peers:
// every peer a voter.
func peersConfiguration(peers []Peer) raft.Configuration {
	var conf raft.Configuration
	for _, p := range peers {
		conf.Servers = append(conf.Servers, raft.Server{
			Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr)})
	}
	return conf
}

// membersOf lists a configuration as members (no HTTP addresses).
func membersOf(conf raft.Configuration) []api.Member {
	out := []api.Member{}
	for _, s := range conf.Servers {
		out = append(out, api.Member{ID: string(s.ID), RaftAddr: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	return out
}

// sameServers reports whether a and b list the same members (id, Raft
// address, suffrage), in any order.
func sameServers(a, b []api.Member) bool {
	key := func(ms []api.Member) string {
		var ks []string
		for _, m := range ms {
			ks = append(ks, fmt.Sprintf("%s=%s/%t", m.ID, m.RaftAddr, m.Voter))
		}
		sort.Strings(ks)
		return strings.Join(ks, ",")
	}
	return key(a) == key(b)
}

// describe names a configuration's members for messages: "n1=addr,...".
func describe(ms []api.Member) string {
	var ks []string
	for _, m := range ms {
		k := m.ID + "=" + m.RaftAddr
		if !m.Voter {
			k += "(non-voter)"
		}
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}

// checkOwnPeer refuses peers that name this node at another Raft address
// than its own: such a configuration, once saved, sends every peer's
// traffic for this node elsewhere.
func (n *Node) checkOwnPeer() error {
	for _, p := range n.cfg.Peers {
		if p.ID == n.cfg.ID && p.RaftAddr != n.RaftAddr() {
			return fmt.Errorf("node: peers name this node %s at %s, but its Raft address is %s: fix --peers (or --raft-addr/--raft-advertise)",
				p.ID, p.RaftAddr, n.RaftAddr())
		}
	}
	return nil
}

// prepareStart readies an empty data dir before Raft starts: it
// bootstraps from Config.Peers (after the probe, with ProbePeers), or,
// with Config.Join, checks the cluster and seeds the stable store. A data
// dir with Raft state is left as it is.
func (n *Node) prepareStart(ctx context.Context, rc *raft.Config, logs raft.LogStore, snaps raft.SnapshotStore, hasState bool) error {
	if err := n.checkOwnPeer(); err != nil {
		return err
	}
	if hasState {
		return nil
	}
	if n.cfg.Join != nil {
		return n.prepareJoin(ctx)
	}
	if len(n.cfg.Peers) == 0 {
		return fmt.Errorf("node: empty data dir %s and no peers to bootstrap from", n.cfg.DataDir)
	}
	conf := peersConfiguration(n.cfg.Peers)
	self := false
	for _, p := range n.cfg.Peers {
		self = self || p.ID == n.cfg.ID
	}
	if !self {
		return fmt.Errorf("node: peers %v do not include this node's id %q", n.cfg.Peers, n.cfg.ID)
	}
	if n.cfg.Restore != nil && (!n.cfg.ProbePeers || n.peer == nil) {
		return errors.New("node: a restore into a new cluster needs the bootstrap probe (Config.ProbePeers), so that the other peers wait for its state")
	}
	restorer := ""
	if n.cfg.ProbePeers && n.peer != nil {
		var err error
		if restorer, err = n.probePeers(ctx, conf); err != nil {
			return err
		}
	}
	switch {
	case n.cfg.Restore != nil:
		return n.seedRestore(conf, snaps)
	case restorer != "":
		n.log.Info("peer restores the new cluster from a backup: starting empty, its leader sends the restored state",
			"peer", restorer)
		return nil
	}
	if err := raft.BootstrapCluster(rc, logs, n.store, snaps, n.trans, conf); err != nil {
		return fmt.Errorf("node: bootstrap: %w", err)
	}
	return nil
}

// probePeers decides, with the other peers, whether this node may
// bootstrap conf: it serves the bootstrap probe on its peer port and asks
// every other peer the same, until
//
//   - it has seen every peer with an empty data dir proposing the same
//     configuration (it is then ready: no cluster existed while it looked);
//   - and every peer since then either said it is ready too (it has seen
//     this node empty) or holds state (it bootstrapped: it was seen empty
//     first, so it is one of this new cluster's).
//
// The second step keeps a node from bootstrapping (and being elected, its
// log growing) before a slower peer has seen it empty. A peer with state
// that was never seen empty belongs to a cluster that existed before: the
// node refuses, naming the fix, as it does for a peer that proposes
// another configuration. Peers that do not answer are waited for as long
// as ctx lasts: a node never bootstraps next to a peer it has not heard.
// It returns the id of the peer that restores the new cluster from a backup
// ("" if none): at most one may (Config.Restore).
func (n *Node) probePeers(ctx context.Context, conf raft.Configuration) (string, error) {
	ours := membersOf(conf)
	h := newHandoff(n.peer.Peers)
	n.peerLn = h.phase(true)
	var ready atomic.Bool
	stop := raftnet.ServeBootstrapProbe(h.phase(false), func() api.BootstrapState {
		return api.BootstrapState{ID: n.cfg.ID, Servers: ours, Ready: ready.Load(), Restoring: n.cfg.Restore != nil}
	})
	defer stop()

	var others []Peer
	for _, p := range n.cfg.Peers {
		if p.ID != n.cfg.ID {
			others = append(others, p)
		}
	}
	restorer := ""
	seenEmpty := make(map[string]bool) // answered empty, same configuration
	done := make(map[string]bool)      // answered ready, or with state after empty
	lastErr := make(map[string]error)
	began, lastLog := time.Now(), time.Now()
	for {
		for _, p := range others {
			if done[p.ID] {
				continue
			}
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			st, err := raftnet.GetBootstrapState(pctx, n.DialPeer, p.RaftAddr)
			cancel()
			if err != nil {
				lastErr[p.ID] = err
				continue
			}
			lastErr[p.ID] = nil
			switch {
			case st.ID != p.ID:
				return "", fmt.Errorf("node: peer %s at %s answers as %q: fix --peers", p.ID, p.RaftAddr, st.ID)
			case st.HasState && !seenEmpty[p.ID]:
				return "", n.existingCluster(p, st)
			case st.HasState:
				done[p.ID] = true
			case !sameServers(st.Servers, ours):
				return "", fmt.Errorf("node: peer %s would bootstrap %s, this node %s: give every node the same --peers",
					p.ID, describe(st.Servers), describe(ours))
			case st.Restoring && (n.cfg.Restore != nil || (restorer != "" && restorer != p.ID)):
				return "", fmt.Errorf("node: peers %s restore a backup too: start exactly one node of the new cluster with --restore",
					strings.Join(sortedIDs(n.cfg.ID, restorer, p.ID, n.cfg.Restore != nil), " and "))
			default:
				if st.Restoring {
					restorer = p.ID
				}
				seenEmpty[p.ID] = true
				if st.Ready {
					done[p.ID] = true
				}
			}
		}
		if len(seenEmpty) == len(others) {
			ready.Store(true)
			if len(done) == len(others) {
				break
			}
		}
		if time.Since(lastLog) >= probeLogEvery {
			lastLog = time.Now()
			var waits []string
			for _, p := range others {
				switch {
				case done[p.ID]:
				case lastErr[p.ID] != nil:
					waits = append(waits, fmt.Sprintf("%s (%v)", p.ID, lastErr[p.ID]))
				default:
					waits = append(waits, p.ID+" (not ready yet)")
				}
			}
			// At WARN once it has waited long: a node that waits
			// for a peer then says so at --log-level warn too.
			say := n.log.Info
			if time.Since(began) >= probeWarnAfter {
				say = n.log.Warn
			}
			say("empty data dir: waiting for every peer to answer before bootstrapping a new cluster",
				"waiting_for", strings.Join(waits, "; "), "waited", time.Since(began).Round(time.Second))
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("node: empty data dir: not bootstrapping before every peer in --peers has answered: %w", ctx.Err())
		case <-time.After(probeEvery): // polling peers that are not up yet
		}
	}
	n.log.Info("every peer answered with an empty data dir and the same peers: bootstrapping a new cluster",
		"configuration", describe(ours))
	return restorer, nil
}

// sortedIDs names the nodes that restore: self (if it does), and the
// peers seen restoring.
func sortedIDs(self, seen, peer string, selfRestores bool) []string {
	ids := map[string]bool{peer: true}
	if seen != "" {
		ids[seen] = true
	}
	if selfRestores {
		ids[self] = true
	}
	out := make([]string, 0, len(ids))
	for id := range ids {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// existingCluster is the refusal of a node with an empty data dir whose
// peer p belongs to a cluster already, naming the fix.
func (n *Node) existingCluster(p Peer, st api.BootstrapState) error {
	member := false
	var joins []string
	for _, m := range st.Servers {
		member = member || m.ID == n.cfg.ID
		if m.HTTPAddr != "" && m.ID != n.cfg.ID {
			joins = append(joins, m.HTTPAddr)
		}
	}
	join := "--join <a member's HTTP address>"
	if len(joins) > 0 {
		sort.Strings(joins)
		join = "--join " + strings.Join(joins, ",")
	}
	msg := fmt.Sprintf("node %s: data dir %s is empty, but peer %s at %s belongs to a cluster already (term %d, last index %d, members %s): refusing to bootstrap a second one",
		n.cfg.ID, n.cfg.DataDir, p.ID, p.RaftAddr, st.Term, st.LastIndex, describe(st.Servers))
	if member {
		return fmt.Errorf("%s. %s is still a member, with a log and a vote it no longer has: remove it first (raftlock members remove %s), then start it with %s in place of --peers",
			msg, n.cfg.ID, n.cfg.ID, join)
	}
	return fmt.Errorf("%s. To add this node to it, start it with %s in place of --peers", msg, join)
}

// warnPeersDiff logs, on a node with data, how Config.Peers differs from
// its Raft configuration: Peers is read only to bootstrap, and membership
// changes go through raftlock members.
func (n *Node) warnPeersDiff() {
	if len(n.cfg.Peers) == 0 {
		return
	}
	conf, err := n.configuration()
	if err != nil {
		return
	}
	have := make(map[string]string)
	for _, s := range conf.Servers {
		have[string(s.ID)] = string(s.Address)
	}
	var diffs []string
	given := make(map[string]bool)
	for _, p := range n.cfg.Peers {
		given[p.ID] = true
		switch addr, ok := have[p.ID]; {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%s=%s is in --peers, not in the configuration", p.ID, p.RaftAddr))
		case addr != p.RaftAddr:
			diffs = append(diffs, fmt.Sprintf("%s is at %s in --peers, at %s in the configuration", p.ID, p.RaftAddr, addr))
		}
	}
	for _, s := range conf.Servers {
		if !given[string(s.ID)] {
			diffs = append(diffs, fmt.Sprintf("%s=%s is in the configuration, not in --peers", s.ID, s.Address))
		}
	}
	if len(diffs) == 0 {
		return
	}
	sort.Strings(diffs)
	n.log.Warn("--peers differs from the cluster's configuration and is ignored: a node with data keeps its configuration (change it with raftlock members)",
		"differences", strings.Join(diffs, "; "), "configuration", describe(membersOf(conf)))
}
