package main

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/raftlock/raftlock/transport"
)

// TestTLSFlag: runs are with TLS unless --tls=false.
func TestTLSFlag(t *testing.T) {
	var sb strings.Builder
	if cfg, err := parseFlags(nil, &sb); err != nil || !cfg.TLS {
		t.Errorf("default: TLS %v, %v; want TLS on", cfg.TLS, err)
	}
	if cfg, err := parseFlags([]string{"--tls=false"}, &sb); err != nil || cfg.TLS {
		t.Errorf("--tls=false: TLS %v, %v; want it off", cfg.TLS, err)
	}
	if !strings.Contains(describe(defaultConfig()), "TLS") {
		t.Errorf("the run's setup %q does not say it runs with TLS", describe(defaultConfig()))
	}
}

// TestRunCertificates: the certificates of a run load as raftlockd and
// the clients load them, each node's is valid at its own address, and
// the client's is a client certificate.
func TestRunCertificates(t *testing.T) {
	c, err := newCluster("raftlockd", t.TempDir(), 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.enableTLS(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.nodes {
		cert, key := c.certs.nodeCert(n.id)
		nt, err := transport.LoadTLS(cert, key, c.certs.CA)
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(nt.Cert.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: nt.CA, DNSName: n.ip,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("node %s at %s: %v", n.id, n.ip, err)
		}
		if got := c.apiAddr(n); got != "https://"+n.httpAddr() {
			t.Errorf("node %s: client address %q, want https", n.id, got)
		}
	}
	if c.clientTLS == nil || len(c.clientTLS.Certificates) != 1 || c.clientTLS.RootCAs == nil {
		t.Fatalf("checker's TLS configuration %+v: want the CA and the client certificate", c.clientTLS)
	}
	data, err := os.ReadFile(c.certs.ClientCert)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(data)
	if b == nil {
		t.Fatal("client certificate: no PEM")
	}
	leaf, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(leaf.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) {
		t.Errorf("client certificate's key usages %v: want clientAuth only", leaf.ExtKeyUsage)
	}
}
