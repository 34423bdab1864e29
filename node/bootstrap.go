package node

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/transport"
)

// probeEvery is how often a node deciding whether to bootstrap asks the
// peers that have not answered yet; probeLogEvery how often it says whom
// it waits for.
const (
	probeEvery    = 100 * time.Millisecond
	probeLogEvery = 5 * time.Second
)

// sawEmptyFor is how long a node that bootstrapped after the probe vouches
// for the peers it saw with empty data dirs: a peer still deciding in that
// time (it had not heard every answer when this node bootstrapped and was
// elected) bootstraps the same configuration. Past it, a peer with an
// empty data dir is taken for a wiped member and refused.
const sawEmptyFor = 2 * time.Minute

// bootstrapMemo is what a node that bootstrapped after the probe
// remembers: whom it saw with an empty data dir, and when it bootstrapped.
type bootstrapMemo struct {
	mu    sync.Mutex
	at    time.Time
	empty []string
}

func (b *bootstrapMemo) set(empty []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.at, b.empty = time.Now(), empty
}

// vouched lists the peers seen empty, while sawEmptyFor lasts.
func (b *bootstrapMemo) vouched() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.at.IsZero() || time.Since(b.at) > sawEmptyFor {
		return nil
	}
	return b.empty
}

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
func membersOf(conf raft.Configuration) []transport.Member {
	out := []transport.Member{}
	for _, s := range conf.Servers {
		out = append(out, transport.Member{ID: string(s.ID), RaftAddr: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	return out
}

// sameServers reports whether a and b list the same members (id, Raft
// address, suffrage), in any order.
func sameServers(a, b []transport.Member) bool {
	key := func(ms []transport.Member) string {
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
func describe(ms []transport.Member) string {
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
	if n.cfg.ProbePeers && n.peer != nil {
		if err := n.probePeers(ctx, conf); err != nil {
			return err
		}
	}
	if err := raft.BootstrapCluster(rc, logs, n.store, snaps, n.trans, conf); err != nil {
		return fmt.Errorf("node: bootstrap: %w", err)
	}
	return nil
}

// probePeers waits until every other peer has answered the bootstrap
// probe and all of them are new: an empty data dir proposing the same
// configuration, or a peer that bootstrapped exactly that configuration and
// has nothing more in its log (or vouches it saw this node empty when it
// bootstrapped, within sawEmptyFor). A peer that belongs to a cluster with
// anything more, or proposes another configuration, makes it refuse, with
// the fix. It serves the probe itself meanwhile, on the peer port, and
// waits as long as ctx lasts for peers that do not answer: a node never
// bootstraps next to a peer it has not heard from.
func (n *Node) probePeers(ctx context.Context, conf raft.Configuration) error {
	ours := membersOf(conf)
	h := newHandoff(n.peer.Peers)
	n.peerLn = h.phase(true)
	srv := &http.Server{
		Handler: transport.BootstrapProbeHandler(func() transport.BootstrapState {
			return transport.BootstrapState{ID: n.cfg.ID, Servers: ours}
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = srv.Serve(h.phase(false)) }()
	defer srv.Close()

	pending := make(map[string]Peer)
	for _, p := range n.cfg.Peers {
		if p.ID != n.cfg.ID {
			pending[p.ID] = p
		}
	}
	var empty []string
	lastErr := make(map[string]error)
	lastLog := time.Now()
	for len(pending) > 0 {
		for id, p := range pending {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			st, err := transport.GetBootstrapState(pctx, n.DialPeer, p.RaftAddr)
			cancel()
			if err != nil {
				lastErr[id] = err
				continue
			}
			ok, err := n.judgeProbe(p, st, ours)
			if err != nil {
				return err
			}
			if ok {
				delete(pending, id)
				if !st.HasState {
					empty = append(empty, id)
				}
			}
		}
		if len(pending) == 0 {
			break
		}
		if time.Since(lastLog) >= probeLogEvery {
			lastLog = time.Now()
			var waits []string
			for id := range pending {
				waits = append(waits, fmt.Sprintf("%s (%v)", id, lastErr[id]))
			}
			sort.Strings(waits)
			n.log.Info("empty data dir: waiting for every peer to answer before bootstrapping a new cluster",
				"waiting_for", strings.Join(waits, "; "))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node: empty data dir: not bootstrapping before every peer in --peers has answered: %w", ctx.Err())
		case <-time.After(probeEvery): // polling peers that are not up yet
		}
	}
	n.memo.set(empty)
	n.log.Info("every peer answered with an empty data dir and the same peers: bootstrapping a new cluster",
		"configuration", describe(ours))
	return nil
}

// judgeProbe reads peer p's answer st to the bootstrap probe: ok when p
// lets this node bootstrap ours, an error (the refusal) when it never
// will, neither when it is to be asked again.
func (n *Node) judgeProbe(p Peer, st transport.BootstrapState, ours []transport.Member) (bool, error) {
	if st.ID != p.ID {
		return false, fmt.Errorf("node: peer %s at %s answers as %q: fix --peers", p.ID, p.RaftAddr, st.ID)
	}
	if !st.HasState {
		if !sameServers(st.Servers, ours) {
			return false, fmt.Errorf("node: peer %s would bootstrap %s, this node %s: give every node the same --peers",
				p.ID, describe(st.Servers), describe(ours))
		}
		return true, nil
	}
	if sameServers(st.Servers, ours) {
		if st.LastIndex <= 1 {
			return true, nil
		}
		for _, id := range st.Vouched {
			if id == n.cfg.ID {
				return true, nil
			}
		}
	}
	return false, n.existingCluster(p, st)
}

// existingCluster is the refusal of a node with an empty data dir whose
// peer p belongs to a cluster already, naming the fix.
func (n *Node) existingCluster(p Peer, st transport.BootstrapState) error {
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
