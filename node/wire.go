package node

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/raftlock/raftlock/api"
)

// Wire is the HTTP layer of a node, which package node does not import
// (node speaks no HTTP): it serves the node's API on its peer port and
// makes the clients of the cluster's API the node needs. nodehttp.Wire
// (package node/nodehttp: transport/httpapi and transport/client) is
// raftlock's; Config.Wire must be set.
type Wire interface {
	// ServePeers serves n's API on ln, the peer port's listener for the
	// API, until the returned Closer closes it at once; connections idle
	// for idle are closed.
	ServePeers(ln net.Listener, n *Node, log hclog.Logger, idle time.Duration) io.Closer
	// Remote returns a Backend over the wire that sends each call to the
	// addresses resolve answers, in order, dialling with dial, with the
	// bearer token secret ("": none): the embedded Backend's way to the
	// leader.
	Remote(resolve func() []string, dial func(ctx context.Context, network, addr string) (net.Conn, error), secret string) (api.Backend, error)
	// JoinClient returns a client of the cluster's API at addrs (over
	// tlsConf for https:// addresses), with the bearer token token ("":
	// none): what a joining node asks to be added through.
	JoinClient(addrs []string, tlsConf *tls.Config, token string) (JoinClient, error)
}

// JoinClient is what a joining node calls on the cluster's API.
type JoinClient interface {
	// Cluster answers GET /v1/cluster.
	Cluster(ctx context.Context) (api.ClusterInfo, error)
	// AddMember asks the leader to add m (POST /v1/cluster/members).
	AddMember(ctx context.Context, m api.Member) error
	// CloseIdleConnections closes the client's idle connections.
	CloseIdleConnections()
}
