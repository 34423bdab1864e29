// Package nodehttp is the HTTP face of a node (etcd's lease/leasehttp is
// the model): Wire implements node.Wire with transport/httpapi, which
// serves the node's API on its peer port, and transport/client, which
// reaches the cluster's API for the embedded Backend and for Join. Package
// node itself speaks no HTTP; a program that starts a node sets
// node.Config.Wire to Wire{}.
package nodehttp

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/node"
	"github.com/raftlock/raftlock/transport/client"
	"github.com/raftlock/raftlock/transport/httpapi"
)

// Wire is raftlock's node.Wire.
type Wire struct{}

var _ node.Wire = Wire{}

// ServePeers serves n's API, peer-only routes included, on ln
// (httpapi.ServePeers).
func (Wire) ServePeers(ln net.Listener, n *node.Node, log hclog.Logger, idle time.Duration) io.Closer {
	return httpapi.ServePeers(ln, n, log, idle)
}

// Remote returns a client.Client that follows resolve and dials with
// dial, with the token secret when it is not "".
func (Wire) Remote(resolve func() []string, dial func(ctx context.Context, network, addr string) (net.Conn, error), secret string) (api.Backend, error) {
	opts := []client.ClientOption{client.WithResolver(resolve), client.WithDialer(dial)}
	if secret != "" {
		opts = append(opts, client.WithToken(secret))
	}
	// The resolver always answers, so the fixed address list is unused.
	c, err := client.NewClient(nil, opts...)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// JoinClient returns a client.Client of addrs, over tlsConf when set, with
// the token when it is not "".
func (Wire) JoinClient(addrs []string, tlsConf *tls.Config, token string) (node.JoinClient, error) {
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
