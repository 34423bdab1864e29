package node

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/transport/client"
	"github.com/raftlock/raftlock/transport/httpapi"
)

// testWire is node/nodehttp.Wire for the tests of package node, which
// cannot import nodehttp (it imports node): the same three calls of the
// HTTP layer.
type testWire struct{}

func (testWire) ServePeers(ln net.Listener, n *Node, log hclog.Logger, idle time.Duration) io.Closer {
	return httpapi.ServePeers(ln, n, log, idle)
}

func (testWire) Remote(resolve func() []string, dial func(ctx context.Context, network, addr string) (net.Conn, error), secret string) (api.Backend, error) {
	opts := []client.ClientOption{client.WithResolver(resolve), client.WithDialer(dial)}
	if secret != "" {
		opts = append(opts, client.WithToken(secret))
	}
	c, err := client.NewClient(nil, opts...)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (testWire) JoinClient(addrs []string, tlsConf *tls.Config, token string) (JoinClient, error) {
	var opts []client.ClientOption
	if tlsConf != nil {
		opts = append(opts, client.WithTLS(tlsConf))
	}
	if token != "" {
		opts = append(opts, client.WithToken(token))
	}
	c, err := client.NewClient(addrs, opts...)
	if err != nil {
		return nil, err
	}
	return c, nil
}
