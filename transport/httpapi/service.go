package httpapi

import (
	"context"
	"io"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/raftlock/raftlock/api"
)

// Service is everything the HTTP server serves: one replica (node.Node
// implements it). The server takes it whole at construction (NewServer),
// so that a missing method is a compile error, not a route that answers
// differently at run time (rqlite's http.Store is the model). The roles
// are the interfaces it embeds; a test fake that serves only some of them
// answers the others as a replica without them would
// (transport/httpapi/httpapitest.Absent).
type Service interface {
	api.Backend
	Replica
	ACLService
	AdminService
	MembershipService
	SnapshotService
	OverviewService
	HealthService
	MetricsService
	Digester
	PeerDialer
	QueryAdmitter
}

// Replica is what every server asks of its service beyond the lock
// calls: the replica's view of leadership and the cluster. Session and
// lock calls only succeed on the leader; the server forwards to the
// leader when Leader reports another replica.
type Replica interface {
	// Cluster answers GET /v1/cluster (leader only, after VerifyLeader).
	Cluster(ctx context.Context) (api.ClusterInfo, error)
	// Leader reports the local view of leadership, without network calls.
	Leader() api.LeaderInfo
	// RegisterMember records a member's HTTP address (leader only); followers
	// call it through POST /v1/internal/members on the leader's peer port
	// (the client HTTP port does not serve it) so that the leader can name
	// every member's HTTP address.
	RegisterMember(ctx context.Context, m api.Member) error
	// LocksPage lists one page of locks (GET /v1/locks).
	LocksPage(ctx context.Context, q api.LocksQuery) (api.LocksPage, error)
	// WatchLocks is a prefix watch (GET /v1/locks?prefix=P&index=I&wait=D;
	// api.LocksChange).
	WatchLocks(ctx context.Context, prefix string, index uint64, wait time.Duration) (api.LocksChange, error)
	// ResetPage reads a page of the rest of a prefix watch's reset read
	// at index, after the name after (GET
	// /v1/locks?prefix=P&index=I&after=N; api.LocksChange).
	ResetPage(ctx context.Context, prefix string, index uint64, after string) (api.LocksChange, error)
}

// ACLService serves ACLs. With ACLEnabled, the server authenticates every
// request but GET /v1/health, POST /v1/acl/bootstrap and the peer-only
// routes, past forwarding (on the leader), and hands the token on in the
// request's context (api.WithPrincipal); the service authorizes
// (api.Rules.Allows). With ACLs off the token calls answer
// invalid_argument and no request is authenticated.
type ACLService interface {
	ACLEnabled() bool
	// Authenticate finds the token whose secret is secret.
	Authenticate(ctx context.Context, secret string) (api.Principal, error)
	ACLBootstrap(ctx context.Context, req api.BootstrapRequest) (api.TokenSecret, error)
	CreateToken(ctx context.Context, req api.TokenRequest) (api.TokenSecret, error)
	Tokens(ctx context.Context) ([]api.TokenInfo, error)
	DeleteToken(ctx context.Context, id string) error
}

// AdminService serves an operator's actions on grants and sessions (all
// admin, forwarded to the leader; the service authorizes): POST
// /v1/locks/revoke, GET /v1/sessions, POST /v1/sessions/close-by-handle.
type AdminService interface {
	RevokeGrant(ctx context.Context, req api.RevokeRequest) (api.Revocation, error)
	Sessions(ctx context.Context, q api.SessionsQuery) (api.SessionsReply, error)
	CloseSessionByHandle(ctx context.Context, req api.CloseByHandleRequest) (api.ClosedSession, error)
	// RequestRelease serves POST /v1/locks/request-release (write on the
	// lock).
	RequestRelease(ctx context.Context, req api.RequestReleaseRequest) error
}

// MembershipService serves membership and leadership transfer: GET, POST
// and DELETE /v1/cluster/members and POST
// /v1/cluster/transfer-leadership, all admin calls forwarded to the
// leader; the bootstrap probe on the peer port; and a removed node's
// answer.
type MembershipService interface {
	// Members lists the Raft configuration with each member's HTTP
	// address (leader only).
	Members(ctx context.Context) ([]api.Member, error)
	// AddMember adds m to the Raft configuration, as a voter when m.Voter,
	// and records its HTTP address. Adding a member as it already is
	// succeeds and changes nothing.
	AddMember(ctx context.Context, m api.Member) error
	// RemoveMember removes member id from the Raft configuration. It is
	// refused (invalid_argument) when it would leave fewer than 2 voters,
	// unless force.
	RemoveMember(ctx context.Context, id string, force bool) error
	// TransferLeadership hands leadership to voter to ("": the most
	// up-to-date voter) and answers who leads afterwards, when known.
	TransferLeadership(ctx context.Context, to string) (api.TransferReply, error)
	// BootstrapState answers the bootstrap probe (GET
	// /v1/internal/bootstrap-state, peer port only): whether this node
	// holds Raft state, so that a node with an empty data dir never
	// bootstraps a second cluster next to an existing one.
	BootstrapState() api.BootstrapState
	// Removed reports whether this node is absent from its latest Raft
	// configuration while that configuration has members (it was removed,
	// and serves nothing) and, if so, the peer ports (Raft addresses) of
	// the members it knows of, where the server asks who leads now.
	Removed() (removed bool, peers []string)
}

// SnapshotService serves backups and restores. Snapshot and Restore are
// admin operations (the service authorizes); PeerRestore serves the
// peer-only route that a new node started with raftlockd --restore uses
// when another node leads.
type SnapshotService interface {
	// Snapshot writes a backup file of the leader's state to w.
	Snapshot(ctx context.Context, w io.Writer) (api.SnapshotInfo, error)
	// Restore replaces the state with a backup file's; every later token
	// is above minToken and above every token issued before.
	Restore(ctx context.Context, data []byte, minToken uint64) (api.RestoreInfo, error)
	// PeerRestore is Restore for a member, without a token.
	PeerRestore(ctx context.Context, data []byte, minToken uint64) (api.RestoreInfo, error)
	// AuthorizeRestore decides from the request's context alone (its
	// token) whether the caller may restore: the Server asks before it
	// reads a byte of the backup file, so that a caller without the right
	// never makes a node take in a large body. Restore still authorises on
	// its own.
	AuthorizeRestore(ctx context.Context) error
	// SpoolDir is a directory on the service's own disk for uploaded
	// backup files (node.Node: its data dir); "" puts them in
	// os.TempDir().
	SpoolDir() string
}

// OverviewService serves GET /v1/overview: the whole picture the status
// page (/ui/) shows, as one blocking query.
type OverviewService interface {
	// Overview answers the cluster, the locks, the sessions and the recent
	// events once the leader's applied index is above index (at once for
	// index 0), or after wait (0: api.DefaultWatchWait). Leader only.
	Overview(ctx context.Context, index uint64, wait time.Duration) (api.Overview, error)
}

// HealthService gives GET /v1/health its verdict.
type HealthService interface {
	Health() api.HealthStatus
}

// MetricsService serves GET /metrics: the registry the server adds its
// request metrics to, and the metrics to serve. A nil MetricsRegisterer
// (or, on NewMetricsServer, a nil MetricsGatherer) means the service
// exports no metrics: /metrics answers not_found.
type MetricsService interface {
	// MetricsRegisterer is where the server registers
	// raftlock_http_request_duration_seconds.
	MetricsRegisterer() prometheus.Registerer
	// MetricsOpen reports whether GET /metrics is served without a token
	// even with ACLs on.
	MetricsOpen() bool
	// Metrics returns the metrics to serve, after authorizing the bearer
	// token secret ("" for none) unless ACLs are off or the metrics open.
	// Every node answers by itself: the route is never forwarded.
	Metrics(ctx context.Context, secret string) (prometheus.Gatherer, error)
	// MetricsGatherer is what NewMetricsServer serves: the metrics with
	// no authorization.
	MetricsGatherer() prometheus.Gatherer
}

// Digester proves that the replica agrees with the others: its recent
// state digests (fsm.FSM.Digests), served on the peer port.
type Digester interface {
	DigestReport() api.DigestReport
	// Diverged is told by the leader that this replica's digest differs
	// from the majority's (POST /v1/internal/diverged).
	Diverged(d api.DivergedNotice)
}

// QueryAdmitter caps the blocking queries a follower forwards.
type QueryAdmitter interface {
	// AdmitForwardedQuery counts a blocking query (a watch) this node,
	// not leading, is about to forward to the leader against its caps on
	// blocking queries, by the secret of its bearer token ("" without
	// one), or refuses it (resource_exhausted, answered at once). done
	// uncounts it once the forwarded query ended.
	AdmitForwardedQuery(secret string) (done func(), err error)
}

// PeerDialer reaches the node's peers: the Server forwards through
// DialPeer, so that on a node with a peer port (transport/raftnet) a
// forwarded request leaves from the node's own address, like its Raft
// traffic, and reaches the leader whenever Raft does. On a TLS peer port
// the connections DialPeer returns have completed a mutual TLS handshake
// (the peer verified against the cluster's CA): requests on them name the
// scheme http, and travel inside the TLS.
type PeerDialer interface {
	DialPeer(ctx context.Context, network, addr string) (net.Conn, error)
}
