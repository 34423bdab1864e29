package api

// The cluster's vocabulary: members, leadership, health, the bootstrap
// probe, replica agreement and the connection limits, as node returns them
// and the HTTP layer serves them.

import "time"

// Member is one voter or non-voter of the cluster.
type Member struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
	Voter    bool   `json:"voter"`
	// Commands is the highest Raft command version the member's build
	// reads (fsm.Version), as it registers itself; 0 when unknown (a
	// build from before the binary command format, or a member added by
	// an operator that has not registered itself yet).
	Commands uint8 `json:"commands,omitempty"`
}

// Validate checks a member's fields: non-empty, bounded, printable.
func (m Member) Validate() error {
	if err := CheckText("member id", m.ID, 1, 128); err != nil {
		return err
	}
	if err := CheckText("raft_addr", m.RaftAddr, 1, 256); err != nil {
		return err
	}
	return CheckText("http_addr", m.HTTPAddr, 1, 256)
}

// ValidateRecord checks a member's record of itself (POST
// /v1/internal/members): as Validate, but a member that serves no HTTP
// API (an embedded node without one) records an empty http_addr.
func (m Member) ValidateRecord() error {
	if m.HTTPAddr == "" {
		m.HTTPAddr = "-"
	}
	return m.Validate()
}

// ClusterInfo is the cluster as the leader sees it.
type ClusterInfo struct {
	Leader string `json:"leader"`
	Term   uint64 `json:"term"`
	// Serving is true once the leader serves requests: right after its
	// election it catches up (a Barrier) and restarts the leases first,
	// and answers no_leader ("leads but is not serving yet") meanwhile.
	Serving     bool     `json:"serving"`
	CommitIndex uint64   `json:"commit_index"`
	Members     []Member `json:"members"`
}

// LeaderInfo is what a replica knows locally (without a quorum round) about
// the current leader.
type LeaderInfo struct {
	// ID and HTTPAddr of the leader; empty when unknown.
	ID       string
	HTTPAddr string
	// PeerAddr is the leader's peer port (its Raft address), where
	// followers forward requests; empty when the leader is reached at
	// HTTPAddr only (a Raft transport without a peer port).
	PeerAddr string
	// Self is true when this replica believes it is the leader.
	Self bool
	// Serving is true when this replica leads and serves requests (it has
	// caught up since its election); false on a follower.
	Serving bool
	// Term is the replica's current Raft term.
	Term uint64
	// Members is a digest of the membership as the replica sees it
	// (HeaderMembers); empty when unknown.
	Members string
	// Commands is the highest command version the leader's build reads,
	// by its member record (0: unknown). A follower answers what that
	// leader cannot serve rather than forward it (CommandsLockOptions).
	Commands byte
}

// CommandsLockOptions is the command version (fsm.VersionLockOptions)
// that semaphores, hold limits, revocations, release requests and the
// admin session calls need on every member.
const CommandsLockOptions byte = 5

// ForwardAddr is where a follower forwards to the leader: its peer port
// when it has one, else its HTTP address.
func (li LeaderInfo) ForwardAddr() string {
	if li.PeerAddr != "" {
		return li.PeerAddr
	}
	return li.HTTPAddr
}

// HealthStatus is a node's verdict on its own health (GET /v1/health).
type HealthStatus struct {
	// Healthy: a member of the configuration that leads with a quorum, or
	// follows a leader it heard from within the election timeout.
	Healthy bool
	// Reason says why not, when not healthy.
	Reason string
	// LastContact is how long ago a follower last heard from the leader
	// (0 on the leader).
	LastContact time.Duration
	// ID is the node's id; AppliedIndex the last log index its state
	// machine applied.
	ID           string
	AppliedIndex uint64
}

// BootstrapState is a node's answer to the bootstrap probe.
type BootstrapState struct {
	// ID is the answering node's id.
	ID string `json:"id"`
	// HasState is true once the node holds Raft state (a log, a snapshot
	// or a term).
	HasState bool `json:"has_state"`
	// Term and LastIndex are the node's Raft term and last log index.
	Term      uint64 `json:"term"`
	LastIndex uint64 `json:"last_index"`
	// Servers is the node's latest Raft configuration (with HasState), or
	// the configuration it proposes to bootstrap (without).
	Servers []Member `json:"servers"`
	// Restoring, without state, says the node bootstraps the new cluster
	// from a backup (raftlockd --restore): the other peers start empty
	// and receive that state from it, so that the cluster serves nothing
	// before the restored state.
	Restoring bool `json:"restoring,omitempty"`
	// Leader is the leader the node knows ("" if none).
	Leader string `json:"leader,omitempty"`
	// StorageWriteMicros is the moving average of the node's log-store
	// write latency, fsync included, in µs (0: unknown, or no write yet);
	// StorageFailing says a store of it fails. A leader whose disk is much
	// slower than a follower's hands leadership over (DESIGN, "Disks").
	StorageWriteMicros int64 `json:"storage_write_us,omitempty"`
	StorageFailing     bool  `json:"storage_failing,omitempty"`
	// Ready, without state, says the node has seen every peer with an
	// empty data dir and the same configuration: it bootstraps once its
	// peers are ready too.
	Ready bool `json:"ready,omitempty"`
}

// MembersReply is the answer of GET /v1/cluster/members.
type MembersReply struct {
	Members []Member `json:"members"`
}

// TransferBody is the body of POST /v1/cluster/transfer-leadership: the
// voter to hand leadership to ("" or absent: the most up-to-date one).
type TransferBody struct {
	To string `json:"to,omitempty"`
}

// TransferReply answers POST /v1/cluster/transfer-leadership: the old
// leader and the new one ("" if not known yet when the answer was sent).
type TransferReply struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// DigestReport is a replica's answer to GET /v1/internal/digests.
type DigestReport struct {
	ID string `json:"id"`
	// Origin is where the replica's digest chain starts (digests compare
	// only at the same origin); Applied its last applied index.
	Origin  uint64 `json:"origin"`
	Applied uint64 `json:"applied"`
	// Digests are the recent digests, oldest first.
	Digests []DigestEntry `json:"digests"`
}

// DigestEntry is the digest (hex SHA-256) after applying entry Index.
type DigestEntry struct {
	Index  uint64 `json:"index"`
	Digest string `json:"digest"`
}

// DivergedNotice tells a replica where its digest left the majority's.
type DivergedNotice struct {
	Index     uint64 `json:"index"`
	Leader    string `json:"leader"`
	Majority  string `json:"majority_digest"`
	Yours     string `json:"your_digest"`
	Agreeing  int    `json:"agreeing"`
	Replicas  int    `json:"replicas"`
	Demoted   bool   `json:"demoted"`
	Reporting string `json:"reporting_node"`
}

// DefaultMaxConnsPerIP bounds the connections one source IP holds open on
// one of a node's ports (raftlockd --max-conns-per-ip): far above what a
// client process needs (the Go client keeps at most 64 idle per node),
// far below a node's file descriptors.
const DefaultMaxConnsPerIP = 1024

// MetricsConnsPerIP bounds the connections one source IP holds open on
// a node's metrics port (raftlockd --metrics-addr): it serves health and
// metrics without authentication, and a Prometheus server or a prober
// keeps one or two.
const MetricsConnsPerIP = 16

// Bounds of the per-IP connection cap.
const (
	MinMaxConnsPerIP = 16
	MaxMaxConnsPerIP = 1 << 20
)

// MaxStreamsPerConn bounds the requests one HTTP/2 connection to a
// node's API port carries at once (http.HTTP2Config.MaxConcurrentStreams,
// announced in the server's SETTINGS): with the per-IP connection cap it
// bounds the requests one source IP has in flight over HTTP/2
// (MaxConnsPerIP × MaxStreamsPerConn), as the cap alone does over HTTP/1.1
// (one request per connection). A waiting acquire or a blocking query
// holds its stream while it waits; the Go client opens a further
// connection when one is full.
const MaxStreamsPerConn = 100

// DefaultIdleTimeout is how long a node keeps a connection that carries
// no request open (raftlockd --http-idle-timeout): above the Go
// client's 90 s (transport/client.Client, the forwarding proxy), so that a
// client closes its idle connections before the server does.
const DefaultIdleTimeout = 2 * time.Minute

// Bounds of the idle timeout.
const (
	MinIdleTimeout = time.Second
	MaxIdleTimeout = time.Hour
)
