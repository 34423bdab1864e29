package transport

import (
	"context"

	"github.com/raftlock/raftlock/api"
)

// Service is what the HTTP API serves: one replica (node.Node implements it).
// Session and lock calls only succeed on the leader; the server forwards to
// the leader when Leader reports another replica.
type Service interface {
	api.Backend
	// Cluster answers GET /v1/cluster (leader only, after VerifyLeader).
	Cluster(ctx context.Context) (api.ClusterInfo, error)
	// Leader reports the local view of leadership, without network calls.
	Leader() api.LeaderInfo
	// RegisterMember records a member's HTTP address (leader only); followers
	// call it through POST /v1/internal/members on the leader's peer port
	// (the client HTTP port does not serve it) so that the leader can name
	// every member's HTTP address.
	RegisterMember(ctx context.Context, m api.Member) error
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
