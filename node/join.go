package node

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/fsm"
)

// DefaultJoinTimeout is how long a joining node with an empty data dir
// may take to hear from the cluster before Start gives up.
const DefaultJoinTimeout = time.Minute

// joinRetry is how soon a joining node asks again to be added after a
// failed attempt.
const joinRetry = time.Second

// JoinConfig makes a node with an empty data dir join an existing cluster
// (raftlockd --join) instead of bootstrapping one: it starts Raft with no
// configuration and asks a member's API (POST /v1/cluster/members, an
// admin call) to add it, again until it is added.
type JoinConfig struct {
	// Addrs are HTTP API addresses of members (https://host:port for a
	// TLS cluster), as a client.Client takes them.
	Addrs []string
	// Token is the admin ACL token to call with (ACLs on).
	Token string
	// TLS is the client configuration for https:// addresses.
	TLS *tls.Config
	// NonVoter joins as a non-voter (a voter otherwise).
	NonVoter bool
	// Timeout bounds the check of the cluster before Raft starts (zero:
	// DefaultJoinTimeout).
	Timeout time.Duration
}

func (j *JoinConfig) client(w Wire) (JoinClient, error) {
	cl, err := w.JoinClient(j.Addrs, j.TLS, j.Token)
	if err != nil {
		return nil, fmt.Errorf("node: join %s: %w", strings.Join(j.Addrs, ","), err)
	}
	return cl, nil
}

// self is this node as a member record.
func (n *Node) self() api.Member {
	reads := fsm.Version
	if n.cfg.preBinary {
		reads = 0
	}
	if n.cfg.readsUpTo != 0 {
		reads = min(reads, n.cfg.readsUpTo)
	}
	return api.Member{ID: n.cfg.ID, RaftAddr: n.RaftAddr(), HTTPAddr: n.cfg.HTTPAddr,
		Voter: n.cfg.Join == nil || !n.cfg.Join.NonVoter, Commands: reads}
}

// prepareJoin checks, before Raft starts on an empty data dir, that the
// cluster at Join.Addrs answers and does not count this node as a member
// already (a member whose data dir was wiped has lost its log and its
// vote: it must be removed first), then seeds the stable store with the
// cluster's term and a vote in it, so that the node never votes in a term
// it may have voted in before its data was lost.
func (n *Node) prepareJoin(ctx context.Context) error {
	j := n.cfg.Join
	if n.cfg.HTTPAddr == "" {
		return fmt.Errorf("node: join: no HTTP address (Config.HTTPAddr): the member table records it")
	}
	cl, err := j.client(n.cfg.Wire)
	if err != nil {
		return err
	}
	defer cl.CloseIdleConnections()
	timeout := j.Timeout
	if timeout == 0 {
		timeout = DefaultJoinTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	info, err := cl.Cluster(cctx)
	if err != nil {
		return fmt.Errorf("node: join: asking %s for the cluster: %w", strings.Join(j.Addrs, ","), err)
	}
	for _, m := range info.Members {
		if m.ID == n.cfg.ID {
			return fmt.Errorf("node: join: %s is a member of the cluster already (raft %s), but its data dir %s is empty: it has lost the log and the vote the cluster counts on. Remove it first (raftlock members remove %s), then start it again",
				n.cfg.ID, m.RaftAddr, n.cfg.DataDir, n.cfg.ID)
		}
		if m.RaftAddr == n.RaftAddr() {
			return fmt.Errorf("node: join: member %s has this node's Raft address %s: remove it first (raftlock members remove %s)",
				m.ID, m.RaftAddr, m.ID)
		}
	}
	if err := seedVote(n.store, info.Term); err != nil {
		return err
	}
	n.log.Info("joining a cluster", "leader", info.Leader, "term", info.Term, "members", describe(info.Members))
	return nil
}

// joinedVoteCandidate is the vote a joining node records in the cluster's
// current term: no candidate has this id, so the node votes for no one
// in that term.
const joinedVoteCandidate = "raftlock:joined-in-this-term"

// seedVote writes term as the node's current term, and a vote in it, into
// an empty stable store (hashicorp/raft's keys).
func seedVote(store interface {
	SetUint64(key []byte, val uint64) error
	Set(key, val []byte) error
}, term uint64) error {
	if term == 0 {
		return nil
	}
	for _, kv := range []struct {
		k string
		v uint64
	}{{"CurrentTerm", term}, {"LastVoteTerm", term}} {
		if err := store.SetUint64([]byte(kv.k), kv.v); err != nil {
			return fmt.Errorf("node: join: seed %s: %w", kv.k, err)
		}
	}
	if err := store.Set([]byte("LastVoteCand"), []byte(joinedVoteCandidate)); err != nil {
		return fmt.Errorf("node: join: seed LastVoteCand: %w", err)
	}
	return nil
}

// joinLoop asks the cluster to add this node (POST /v1/cluster/members)
// until it is in the node's configuration or the node stops.
func (n *Node) joinLoop() {
	defer n.wg.Done()
	cl, err := n.cfg.Join.client(n.cfg.Wire)
	if err != nil {
		n.log.Error("join", "error", err)
		return
	}
	defer cl.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-n.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		if n.inConfiguration(n.cfg.ID) {
			n.log.Info("joined the cluster", "id", n.cfg.ID, "voter", !n.cfg.Join.NonVoter)
			return
		}
		actx, acancel := context.WithTimeout(ctx, catchUpTimeout+configChangeTimeout)
		err := cl.AddMember(actx, n.self())
		acancel()
		if err == nil {
			continue
		}
		n.log.Warn("asking to be added to the cluster; retrying", "join", strings.Join(n.cfg.Join.Addrs, ","), "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(joinRetry):
		}
	}
}
