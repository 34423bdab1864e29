package tlsconf

import (
	"bytes"
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"
	"time"
)

// fuzzTLSKit is the CA and certificates FuzzPresentedCertificates starts
// from: a node certificate of the cluster's CA (with its key, which every
// fuzzed client presents), a client certificate of the CA, and a node
// certificate of a foreign CA.
type fuzzTLSKit struct {
	node, client, foreign tls.Certificate
	srv                   *TLS
}

func newFuzzTLSKit(tb testing.TB) *fuzzTLSKit {
	tb.Helper()
	pair := func(ca *CA, node bool) tls.Certificate {
		var c, k []byte
		var err error
		if node {
			c, k, err = ca.IssueNode("n", []string{"127.0.0.1"}, time.Hour)
		} else {
			c, k, err = ca.IssueClient("c", time.Hour)
		}
		if err != nil {
			tb.Fatal(err)
		}
		kp, err := tls.X509KeyPair(c, k)
		if err != nil {
			tb.Fatal(err)
		}
		return kp
	}
	ca, err := NewCA("fuzz CA", time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	other, err := NewCA("foreign CA", time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca.CertPEM()) {
		tb.Fatal("CA PEM")
	}
	k := &fuzzTLSKit{node: pair(ca, true), client: pair(ca, false), foreign: pair(other, true)}
	k.srv = &TLS{Cert: pair(ca, true), CA: pool}
	return k
}

// keyFor returns the private key of whichever of k's certificates has
// leaf's public key (the node's when none has, or leaf does not parse):
// the key a fuzzed client presents leaf with.
func (k *fuzzTLSKit) keyFor(leaf []byte) (key any, matches bool) {
	cert, err := x509.ParseCertificate(leaf)
	for _, kp := range []tls.Certificate{k.node, k.client, k.foreign} {
		own, _ := x509.ParseCertificate(kp.Certificate[0])
		if err != nil {
			break
		}
		if pk, ok := cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); ok && pk.Equal(own.PublicKey) {
			return kp.PrivateKey, true
		}
	}
	return k.node.PrivateKey, false
}

// accepts is the oracle: whether a server of k's CA must accept leaf,
// presented with keyFor's key, on the peer port (peer) or on an API with
// client certificate authentication.
func (k *fuzzTLSKit) accepts(leaf []byte, peer bool) bool {
	cert, err := x509.ParseCertificate(leaf)
	if err != nil {
		return false
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: k.srv.CA, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return false
	}
	if _, ok := k.keyFor(leaf); !ok {
		return false // the client cannot prove it holds the leaf's key
	}
	return !peer || RequireNodeCert(tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}) == nil
}

// handshake runs a TLS handshake over a pipe between a client presenting
// leaf with key and a server with cfg, and returns the
// server's error.
func handshake(cfg *tls.Config, leaf []byte, key any) error {
	cc, sc := net.Pipe()
	defer cc.Close()
	defer sc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ccfg := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}
	if len(leaf) > 0 {
		ccfg.Certificates = []tls.Certificate{{Certificate: [][]byte{leaf}, PrivateKey: key}}
	}
	go func() {
		c := tls.Client(cc, ccfg)
		_ = c.HandshakeContext(ctx)
		// The server's verdict comes after the client's Finished: read so
		// that the client takes the server's alert or session ticket.
		_, _ = c.Read(make([]byte, 1))
		cc.Close()
	}()
	s := tls.Server(sc, cfg)
	return s.HandshakeContext(ctx)
}

// FuzzPresentedCertificates presents random and mutated certificates to
// the peer port's TLS configuration and to the API's with
// --client-cert-auth: a handshake succeeds exactly when the certificate
// parses, is signed by the cluster's CA, is valid for client
// authentication, comes with its key, and (peer port) is a node
// certificate: a client certificate of the CA opens the API but not the
// peer port. It never panics.
func FuzzPresentedCertificates(f *testing.F) {
	k := newFuzzTLSKit(f)
	for _, c := range [][]byte{k.node.Certificate[0], k.client.Certificate[0], k.foreign.Certificate[0], nil, {0x30, 0x82},
		k.node.Certificate[0][:len(k.node.Certificate[0])/2], bytes.Repeat([]byte{0x30}, 64)} {
		f.Add(c, true)
		f.Add(c, false)
	}
	for _, tc := range []struct {
		leaf       []byte
		peer, want bool
	}{{k.node.Certificate[0], true, true}, {k.node.Certificate[0], false, true}, {k.client.Certificate[0], false, true},
		{k.client.Certificate[0], true, false}, {k.foreign.Certificate[0], false, false}} {
		if got := k.accepts(tc.leaf, tc.peer); got != tc.want {
			f.Fatalf("oracle: accepts = %v, want %v (peer port %v)", got, tc.want, tc.peer)
		}
	}
	f.Fuzz(func(t *testing.T, leaf []byte, peer bool) {
		cfg := k.srv.APIConfig(true)
		if peer {
			cfg = k.srv.PeerServerConfig()
		}
		key, _ := k.keyFor(leaf)
		err := handshake(cfg, leaf, key)
		if want := len(leaf) > 0 && k.accepts(leaf, peer); (err == nil) != want {
			t.Fatalf("peer port %v: certificate (%d bytes) accepted %v (%v), want %v", peer, len(leaf), err == nil, err, want)
		}
	})
}
