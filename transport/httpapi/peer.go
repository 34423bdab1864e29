package httpapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"
)

// PeerServer serves the HTTP API on a node's peer port, for the requests
// its peers forward.
type PeerServer struct {
	srv  *http.Server
	done chan struct{}
}

// ServePeers serves svc's API on ln (RaftNet.Peers) until Close, over
// HTTP/1.1 and HTTP/2 with prior knowledge (h2c: how followers forward),
// with the timeouts of ConfigureServer: idle connections are closed after
// idle (zero: DefaultIdleTimeout).
func ServePeers(ln net.Listener, svc Service, log hclog.Logger, idle time.Duration) *PeerServer {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	p := &PeerServer{
		srv: &http.Server{
			Handler:     NewServer(svc, WithLogger(log), peerRoutes),
			ErrorLog:    log.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
			ConnContext: withPeerCert,
		},
		done: make(chan struct{}),
	}
	ConfigureServer(p.srv, idle)
	// HTTP/1.1 for the members' calls (and older members' forwarding),
	// HTTP/2 with prior knowledge for forwarding: one connection carries
	// up to PeerStreamsPerConn requests (DESIGN.md, "HTTP/2 on the API").
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true)
	p.srv.Protocols = &protos
	p.srv.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: PeerStreamsPerConn}
	go func() {
		defer close(p.done)
		if err := p.srv.Serve(ln); err != nil && err != http.ErrServerClosed {
			log.Debug("peer port closed", "error", err)
		}
	}()
	return p
}

// peerCertKey is the context key of the certificate a peer presented on
// its TLS connection to the peer port.
type peerCertKey struct{}

// withPeerCert puts the certificate the peer presented on c (a TLS peer
// port's connection, as the port's mux hands it over) into ctx.
func withPeerCert(ctx context.Context, c net.Conn) context.Context {
	pc, ok := c.(interface{ NetConn() net.Conn }) // the peer port's mux (raftnet)
	if !ok {
		return ctx
	}
	tc, ok := pc.NetConn().(*tls.Conn)
	if !ok {
		return ctx
	}
	if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 {
		return context.WithValue(ctx, peerCertKey{}, certs[0])
	}
	return ctx
}

// peerCertFrom is the certificate of the peer that sent the request whose
// context is ctx, on a TLS peer port (nil on a plaintext one).
func peerCertFrom(ctx context.Context) *x509.Certificate {
	c, _ := ctx.Value(peerCertKey{}).(*x509.Certificate)
	return c
}

// CertNames reports whether node certificate c names node id: as its
// common name (raftlock tls init's node certificates do) or as one of its
// DNS names. On a TLS peer port a member record is taken only from the
// node whose certificate names it.
func CertNames(c *x509.Certificate, id string) bool {
	return c.Subject.CommonName == id || slices.Contains(c.DNSNames, id)
}

// peerRoutes adds the routes only members may call (POST
// /v1/internal/members) to the peer port's Server.
func peerRoutes(s *Server) { s.peer = true }

// Close stops serving at once: requests in flight end (their clients see
// an unknown outcome and retry elsewhere).
func (p *PeerServer) Close() error {
	err := p.srv.Close()
	<-p.done
	return err
}
