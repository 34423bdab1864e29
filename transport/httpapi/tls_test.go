package httpapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/transport/client"
	"github.com/raftlock/raftlock/transport/httpapi/httpapitest"
	"github.com/raftlock/raftlock/transport/raftnet"
	"github.com/raftlock/raftlock/transport/tlsconf"
)

// testPKI is a CA with the identities the TLS tests use.
type testPKI struct {
	ca *tlsconf.CA
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	ca, err := tlsconf.NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return &testPKI{ca: ca}
}

func (p *testPKI) pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.ca.Cert)
	return pool
}

// node returns a node identity of the CA (node true) or a client one.
func (p *testPKI) identity(t *testing.T, name string, node bool) *tlsconf.TLS {
	t.Helper()
	var certPEM, keyPEM []byte
	var err error
	if node {
		certPEM, keyPEM, err = p.ca.IssueNode(name, []string{"127.0.0.1"}, time.Hour)
	} else {
		certPEM, keyPEM, err = p.ca.IssueClient(name, time.Hour)
	}
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &tlsconf.TLS{Cert: cert, CA: p.pool()}
}

// newTLSPeerPort opens a peer port with identity id (nil: plaintext),
// serving svc's API; both close at the end of the test.
func newTLSPeerPort(t *testing.T, svc Service, id *tlsconf.TLS) *raftnet.RaftNet {
	t.Helper()
	rn, err := raftnet.NewRaftTCPTransport(raftnet.RaftTCPConfig{BindAddr: "127.0.0.1:0", TLS: id})
	if err != nil {
		t.Fatal(err)
	}
	ps := ServePeers(rn.Peers, svc, nil, 0)
	t.Cleanup(func() {
		ps.Close()
		rn.Transport.Close()
	})
	return rn
}

// appendEntries sends one AppendEntries naming from as its leader.
func appendEntries(from, to *raftnet.RaftNet, leader string) error {
	var resp raft.AppendEntriesResponse
	return from.Transport.AppendEntries(raft.ServerID(leader), to.Transport.LocalAddr(),
		&raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte(leader)}, Term: 1}, &resp)
}

// A peer port with TLS takes Raft's RPCs only from peers that present a
// node certificate of the cluster's CA: from a plaintext peer, one with a
// certificate of another CA (self-signed), and one with a client
// certificate of the right CA, no AppendEntries arrives; a member's does.
func TestTLSPeerPortAdmitsOnlyMembers(t *testing.T) {
	pki := newTestPKI(t)
	a := newTLSPeerPort(t, httpapitest.New("n1"), pki.identity(t, "n1", true))
	member := newTLSPeerPort(t, httpapitest.New("n2"), pki.identity(t, "n2", true))
	intruders := map[string]*raftnet.RaftNet{
		"plaintext":   newTLSPeerPort(t, httpapitest.New("x1"), nil),
		"another CA":  newTLSPeerPort(t, httpapitest.New("x2"), newTestPKI(t).identity(t, "n1", true)),
		"client cert": newTLSPeerPort(t, httpapitest.New("x3"), pki.identity(t, "x3", false)),
	}
	arrived := make(chan string, 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case rpc := <-a.Transport.Consumer():
				if req, ok := rpc.Command.(*raft.AppendEntriesRequest); ok {
					arrived <- string(req.ID)
				}
				rpc.Respond(&raft.AppendEntriesResponse{Success: true}, nil)
			}
		}
	}()
	for name, x := range intruders {
		if err := appendEntries(x, a, name); err == nil {
			t.Errorf("AppendEntries from a peer with %s: accepted", name)
		}
	}
	if err := appendEntries(member, a, "member"); err != nil {
		t.Fatalf("AppendEntries from a member: %v", err)
	}
	// The member's entry is the first, and only, to arrive: the port
	// serves RPCs in order of arrival, and every intruder's came earlier.
	if got := <-arrived; got != "member" {
		t.Fatalf("first AppendEntries to arrive came from %q, want the member's", got)
	}
	// The member refuses to talk to a server that is not one, either.
	if err := appendEntries(member, intruders["another CA"], "member"); err == nil {
		t.Fatal("a member sent AppendEntries to a server with another CA's certificate")
	}
}

// A raw TLS dial to a TLS peer port with a certificate of another CA is
// refused at the handshake: nothing the client writes is ever read.
func TestTLSPeerPortRefusesWrongCertAtHandshake(t *testing.T) {
	pki := newTestPKI(t)
	a := newTLSPeerPort(t, httpapitest.New("n1"), pki.identity(t, "n1", true))
	rogue := newTestPKI(t).identity(t, "n2", true)
	conn, err := tls.Dial("tcp", string(a.Transport.LocalAddr()), &tls.Config{
		Certificates: []tls.Certificate{rogue.Cert}, RootCAs: pki.pool(), MinVersion: tls.VersionTLS13})
	if err == nil {
		defer conn.Close()
		// TLS 1.3: the server judges the client's certificate after the
		// client's side of the handshake; its verdict is the next read.
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = conn.Write([]byte("GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n"))
		_, err = conn.Read(make([]byte, 1))
	}
	if err == nil || !strings.Contains(err.Error(), "tls:") {
		t.Fatalf("handshake with another CA's certificate: %v, want a TLS error", err)
	}
}

// dialingService is a Fake whose node reaches its peers through a
// peer port (PeerDialer), as node.Node does.
type dialingService struct {
	*httpapitest.Fake
	port *raftnet.RaftNet
}

func (d dialingService) DialPeer(ctx context.Context, network, addr string) (net.Conn, error) {
	return d.port.DialContext(ctx, network, addr)
}

// newHTTPSServer serves svc's API over HTTPS with identity id.
func newHTTPSServer(t *testing.T, svc Service, id *tlsconf.TLS, clientCerts bool) string {
	t.Helper()
	ts := httptest.NewUnstartedServer(NewServer(svc))
	ts.TLS = id.APIConfig(clientCerts)
	ts.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are meant
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ts.Listener.Addr().String()
}

// The API over HTTPS: plain HTTP to it fails at once (saying to use
// https://), HTTPS with the CA works, and with client certificate
// authentication a client without one is refused (unreachable, fail-fast)
// while one with a certificate of the CA is served. A follower forwards
// over its TLS peer port to the leader's, which verifies it and is
// verified.
func TestTLSAPI(t *testing.T) {
	pki := newTestPKI(t)
	leader := httpapitest.New("n1")
	leaderPort := newTLSPeerPort(t, leader, pki.identity(t, "n1", true))
	follower := httpapitest.New("n2")
	follower.SetLeader(api.LeaderInfo{ID: "n1", PeerAddr: string(leaderPort.Transport.LocalAddr()), Term: 3})
	followerID := pki.identity(t, "n2", true)
	svc := dialingService{follower, newTLSPeerPort(t, follower, followerID)}
	addr := newHTTPSServer(t, svc, followerID, false)
	strict := newHTTPSServer(t, svc, followerID, true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dial := func(addr string, opts ...client.ClientOption) *client.Client {
		c, err := client.NewClient([]string{addr}, append(opts, client.WithFailFast(200*time.Millisecond))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.CloseIdleConnections)
		return c
	}
	caOnly := &tls.Config{RootCAs: pki.pool()}

	_, err := dial(addr).Health(ctx)
	if api.CodeOf(err) != api.CodeInternal || !strings.Contains(err.Error(), "use https://"+addr) {
		t.Fatalf("plain HTTP to an HTTPS node: %v, want internal error naming https://", err)
	}
	if _, err := dial("https://" + addr).Health(ctx); api.CodeOf(err) != api.CodeUnreachable ||
		!strings.Contains(err.Error(), "unknown authority") {
		t.Fatalf("HTTPS without the CA: %v, want unreachable (unknown authority)", err)
	}
	if _, err := dial("https://"+addr, client.WithTLS(caOnly)).OpenSession(ctx, api.OpenRequest{Name: "tls"}); err != nil {
		t.Fatalf("HTTPS with the CA, forwarded over TLS to the leader: %v", err)
	}
	if n := leader.Calls("OpenSession"); n != 1 {
		t.Fatalf("the leader served %d opens, want 1 (forwarded)", n)
	}

	if _, err := dial("https://"+strict, client.WithTLS(caOnly)).Health(ctx); api.CodeOf(err) != api.CodeUnreachable ||
		!strings.Contains(err.Error(), "certificate required") {
		t.Fatalf("no client certificate under client cert auth: %v, want unreachable (certificate required)", err)
	}
	withCert := caOnly.Clone()
	withCert.Certificates = []tls.Certificate{pki.identity(t, "alice", false).Cert}
	if _, err := dial("https://"+strict, client.WithTLS(withCert)).Health(ctx); err != nil {
		t.Fatalf("client certificate of the CA: %v", err)
	}
	rogue := caOnly.Clone()
	rogue.Certificates = []tls.Certificate{newTestPKI(t).identity(t, "alice", false).Cert}
	if _, err := dial("https://"+strict, client.WithTLS(rogue)).Health(ctx); api.CodeOf(err) != api.CodeUnreachable {
		t.Fatalf("client certificate of another CA: %v, want unreachable", err)
	}
}

var _ http.Handler = (*Server)(nil)
