package transport

import (
	"context"

	"github.com/raftlock/raftlock/api"
)

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
	if err := api.CheckText("member id", m.ID, 1, 128); err != nil {
		return err
	}
	if err := api.CheckText("raft_addr", m.RaftAddr, 1, 256); err != nil {
		return err
	}
	return api.CheckText("http_addr", m.HTTPAddr, 1, 256)
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
}

// Service is what the HTTP API serves: one replica (node.Node implements it).
// Session and lock calls only succeed on the leader; the server forwards to
// the leader when Leader reports another replica.
type Service interface {
	api.Backend
	// Cluster answers GET /v1/cluster (leader only, after VerifyLeader).
	Cluster(ctx context.Context) (ClusterInfo, error)
	// Leader reports the local view of leadership, without network calls.
	Leader() LeaderInfo
	// RegisterMember records a member's HTTP address (leader only); followers
	// call it through POST /v1/internal/members on the leader's peer port
	// (the client HTTP port does not serve it) so that the leader can name
	// every member's HTTP address.
	RegisterMember(ctx context.Context, m Member) error
}

// ACLService is what a Service implements to serve ACLs (node.Node does).
// With ACLEnabled, the server authenticates every request but GET
// /v1/health, POST /v1/acl/bootstrap and the peer-only routes, past
// forwarding (on the leader), and hands the token on in the request's
// context (api.WithPrincipal); the service authorizes (api.Rules.Allows).
type ACLService interface {
	ACLEnabled() bool
	// Authenticate finds the token whose secret is secret.
	Authenticate(ctx context.Context, secret string) (api.Principal, error)
	ACLBootstrap(ctx context.Context) (api.TokenSecret, error)
	CreateToken(ctx context.Context, req api.TokenRequest) (api.TokenSecret, error)
	Tokens(ctx context.Context) ([]api.TokenInfo, error)
	DeleteToken(ctx context.Context, id string) error
}
