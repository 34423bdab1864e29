package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/transport/client"
	"github.com/raftlock/raftlock/transport/tlsconf"
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
		nt, err := tlsconf.LoadTLS(cert, key, c.certs.CA)
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

// TestACLFlag: runs are with ACLs unless --acl=false, and say so.
func TestACLFlag(t *testing.T) {
	var sb strings.Builder
	if cfg, err := parseFlags(nil, &sb); err != nil || !cfg.ACL {
		t.Errorf("default: ACL %v, %v; want ACLs on", cfg.ACL, err)
	}
	if cfg, err := parseFlags([]string{"--acl=false"}, &sb); err != nil || cfg.ACL {
		t.Errorf("--acl=false: ACL %v, %v; want them off", cfg.ACL, err)
	}
	if !strings.Contains(describe(defaultConfig()), "ACLs") {
		t.Errorf("the run's setup %q does not say it runs with ACLs", describe(defaultConfig()))
	}
}

// TestRunTokenWritesOnlyUnderTheRunsPrefix: the cluster of a run with
// ACLs refuses calls without a token, and the token its clients get may
// take locks under lockPrefix but nowhere else, nor read the cluster: the
// workload's calls pass the ACL checks as a least-privileged user's do.
func TestRunTokenWritesOnlyUnderTheRunsPrefix(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real cluster")
	}
	cfg := testConfig(t, "")
	c, err := newCluster(cfg.Raftlockd, t.TempDir(), 3, []string{"--log-level", "warn"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.enableTLS(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	c.enableACL()
	t.Cleanup(func() { c.stopAll(5 * time.Second) })
	if err := c.startAll(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.waitSettled(ctx); err != nil {
		t.Fatal(err)
	}
	toks, err := c.setupACL(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(toks) != 2 || toks[0].secret == toks[1].secret {
		t.Fatalf("setupACL made %d tokens, want 2 different ones", len(toks))
	}
	secret := toks[1].secret
	anon, err := client.NewClient(c.apiAddrs(), client.WithTLS(c.clientTLS))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := anon.OpenSession(ctx, api.OpenRequest{Name: "anon", TTL: 10 * time.Second}); api.CodeOf(err) != api.CodeUnauthenticated {
		t.Errorf("open without a token: %v, want %s", err, api.CodeUnauthenticated)
	}
	cl, err := client.NewClient(c.apiAddrs(), client.WithTLS(c.clientTLS), client.WithToken(secret))
	if err != nil {
		t.Fatal(err)
	}
	info, err := cl.OpenSession(ctx, api.OpenRequest{Name: "client", TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Acquire(ctx, api.AcquireRequest{Name: lockPrefix + "a", Session: info.ID, Holder: "h"}); err != nil {
		t.Errorf("acquire under %s: %v", lockPrefix, err)
	}
	if _, err := cl.Acquire(ctx, api.AcquireRequest{Name: "other/a", Session: info.ID, Holder: "h"}); api.CodeOf(err) != api.CodePermissionDenied {
		t.Errorf("acquire outside %s: %v, want %s", lockPrefix, err, api.CodePermissionDenied)
	}
	if _, err := cl.Cluster(ctx); err != nil {
		t.Errorf("cluster with the clients' token: %v, want the members (any valid token reads them)", err)
	}
	if err := cl.DeleteToken(ctx, strings.Repeat("0", 32)); api.CodeOf(err) != api.CodePermissionDenied {
		t.Errorf("token delete with the clients' token: %v, want %s", err, api.CodePermissionDenied)
	}
}
