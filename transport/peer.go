package transport

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/raftlock/raftlock/api"
)

// PeerDialer is implemented by a Service whose node reaches its peers on
// their peer port (RaftNet): the Server forwards through DialPeer, so a
// forwarded request leaves from the node's own address, like its Raft
// traffic, and reaches the leader whenever Raft does. On a TLS peer port
// the connections DialPeer returns have completed a mutual TLS handshake
// (the peer verified against the cluster's CA): requests on them name the
// scheme http, and travel inside the TLS.
type PeerDialer interface {
	DialPeer(ctx context.Context, network, addr string) (net.Conn, error)
}

// PeerServer serves the HTTP API on a node's peer port, for the requests
// its peers forward.
type PeerServer struct {
	srv  *http.Server
	done chan struct{}
}

// ServePeers serves svc's API on ln (RaftNet.Peers) until Close, with the
// timeouts of ConfigureServer: idle connections are closed after idle
// (zero: DefaultIdleTimeout).
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
	pc, ok := c.(*peekedConn)
	if !ok {
		return ctx
	}
	tc, ok := pc.Conn.(*tls.Conn)
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

// PostMember asks the leader, at its peer port addr, to record member m in
// the member table (POST /v1/internal/members, served on the peer port
// only), dialling with dial (nil: a plain dialer).
func PostMember(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), addr string, m api.Member) error {
	body, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("register %s: %w", m.ID, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/internal/members", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("register %s: %w", m.ID, err)
	}
	req.Header.Set("Content-Type", "application/json")
	tr := &http.Transport{DialContext: dial, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return fmt.Errorf("register %s at %s: %w", m.ID, addr, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 != 2 {
		var er api.ErrorReply
		if json.Unmarshal(data, &er) == nil && er.Error.Code != "" {
			return fmt.Errorf("register %s at %s: %s: %s", m.ID, addr, er.Error.Code, er.Error.Message)
		}
		return fmt.Errorf("register %s at %s: HTTP %d", m.ID, addr, resp.StatusCode)
	}
	return nil
}
