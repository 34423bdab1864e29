package main

import (
	"crypto/x509"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/raftlock/raftlock/transport/httpapi"
	"github.com/raftlock/raftlock/transport/tlsconf"
)

// tls init writes a CA, node and client certificates that load, verify
// for their hosts and usages, with keys 0600; it never overwrites a file
// (and then writes nothing), and signs later certificates with DIR's CA.
func TestTLSInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	code, out, errOut := runCLI(t, "tls", "init", dir, "--node", "n1=127.0.0.1", "--node", "n2=10.0.0.2+db.example", "--client", "alice")
	if code != 0 || errOut != "" || strings.Count(out, "\n") != 8 {
		t.Fatalf("tls init: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	for _, f := range []string{"ca-key", "n1-key", "n2-key", "alice-key"} {
		if fi, err := os.Stat(filepath.Join(dir, f+".pem")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s.pem: %v, %v; want mode 0600", f, fi.Mode(), err)
		}
	}
	verify := func(name, host string, usage x509.ExtKeyUsage) error {
		id, err := tlsconf.LoadTLS(filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem"), filepath.Join(dir, "ca.pem"))
		if err != nil {
			return err
		}
		leaf, err := x509.ParseCertificate(id.Cert.Certificate[0])
		if err != nil {
			return err
		}
		_, err = leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: id.CA, KeyUsages: []x509.ExtKeyUsage{usage}})
		return err
	}
	for _, tc := range []struct {
		name, host string
		usage      x509.ExtKeyUsage
	}{
		{"n1", "127.0.0.1", x509.ExtKeyUsageServerAuth}, {"n1", "localhost", x509.ExtKeyUsageServerAuth},
		{"n1", "127.0.0.1", x509.ExtKeyUsageClientAuth}, {"n2", "10.0.0.2", x509.ExtKeyUsageServerAuth},
		{"n2", "db.example", x509.ExtKeyUsageServerAuth}, {"alice", "", x509.ExtKeyUsageClientAuth},
	} {
		if err := verify(tc.name, tc.host, tc.usage); err != nil {
			t.Errorf("%s for %q (%v): %v", tc.name, tc.host, tc.usage, err)
		}
	}
	if verify("n1", "10.0.0.2", x509.ExtKeyUsageServerAuth) == nil || verify("alice", "", x509.ExtKeyUsageServerAuth) == nil {
		t.Error("a certificate verifies for a host or usage it was not made for")
	}

	// Nothing is overwritten, and then nothing is written.
	code, _, errOut = runCLI(t, "tls", "init", dir, "--node", "n3=127.0.0.1", "--node", "n1=127.0.0.1")
	if code != 1 || !strings.HasPrefix(errOut, "raftlock: already_exists: ") || !strings.Contains(errOut, "n1.pem exists already") {
		t.Fatalf("tls init over existing files: exit %d, stderr %q", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "n3.pem")); !os.IsNotExist(err) {
		t.Fatalf("tls init wrote n3.pem although it refused: %v", err)
	}
	// A node added later is signed by DIR's CA.
	if code, _, errOut := runCLI(t, "tls", "init", dir, "--node", "n3=127.0.0.1"); code != 0 {
		t.Fatalf("tls init of a new node with DIR's CA: exit %d, %q", code, errOut)
	}
	if err := verify("n3", "127.0.0.1", x509.ExtKeyUsageServerAuth); err != nil {
		t.Fatalf("n3, added later: %v", err)
	}

	for _, args := range [][]string{
		{"tls", "init", dir},
		{"tls", "init", dir, "--node", "n1"},
		{"tls", "init", dir, "--node", "a/b=127.0.0.1"},
		{"tls", "init", dir, "--node", "n9=127.0.0.1:7001"},
		{"tls", "init", dir, "--node", "x=127.0.0.1", "--client", "x"},
		{"tls", "init", dir, "--client", "ca"},
		{"tls", "init"},
	} {
		if code, _, errOut := runCLI(t, args...); code != 2 || !strings.HasPrefix(errOut, "raftlock: usage: ") {
			t.Errorf("%q: exit %d, stderr %q; want a usage error", args, code, errOut)
		}
	}
}

// The CLI talks HTTPS to an https:// address with --ca (or
// RAFTLOCK_CACERT), presenting --cert and --key (RAFTLOCK_CERT,
// RAFTLOCK_KEY) to a node that requires a client certificate; without
// them it is refused, saying why.
func TestCLIOverHTTPS(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	if code, _, errOut := runCLI(t, "tls", "init", dir, "--node", "n1=127.0.0.1", "--client", "alice"); code != 0 {
		t.Fatal(errOut)
	}
	id, err := tlsconf.LoadTLS(filepath.Join(dir, "n1.pem"), filepath.Join(dir, "n1-key.pem"), filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	f := newFake()
	ts := httptest.NewUnstartedServer(httpapi.NewServer(f))
	ts.TLS = id.APIConfig(true)
	ts.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are meant
	ts.StartTLS()
	t.Cleanup(ts.Close)
	// n1 records its address without a scheme, as a node does: status
	// asks it over https:// (the CLI talks TLS).
	f.httpAddr, f.deadAddr = strings.TrimPrefix(ts.URL, "https://"), closedAddr(t)
	addr := ts.URL // https://127.0.0.1:port
	ca, cert, key := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "alice.pem"), filepath.Join(dir, "alice-key.pem")
	t.Setenv("RAFTLOCK_ADDR", "")

	if code, out, errOut := runCLI(t, "--addr", addr, "--ca", ca, "--cert", cert, "--key", key, "status"); code != 0 || !strings.Contains(out, "leader: n1") ||
		!regexp.MustCompile(`(?m)^  n1 +leader +ok `).MatchString(out) {
		t.Fatalf("status over HTTPS with a client certificate: exit %d, %q, %q", code, out, errOut)
	}
	t.Setenv("RAFTLOCK_CACERT", ca)
	if code, _, errOut := runCLI(t, "--addr", addr, "status"); code != 1 || !strings.Contains(errOut, "unreachable") || !strings.Contains(errOut, "certificate required") {
		t.Fatalf("status without a client certificate: exit %d, %q; want unreachable (certificate required)", code, errOut)
	}
	t.Setenv("RAFTLOCK_CERT", cert)
	t.Setenv("RAFTLOCK_KEY", key)
	if code, _, errOut := runCLI(t, "--addr", addr, "status"); code != 0 {
		t.Fatalf("status with RAFTLOCK_CACERT, RAFTLOCK_CERT, RAFTLOCK_KEY: exit %d, %q", code, errOut)
	}
	if code, _, errOut := runCLI(t, "--addr", strings.TrimPrefix(addr, "https://"), "status"); code != 1 || !strings.Contains(errOut, "use "+addr) {
		t.Fatalf("plain HTTP to an HTTPS node: exit %d, %q; want a hint to use %s", code, errOut, addr)
	}
	if code, _, errOut := runCLI(t, "--addr", addr, "--cert", "", "status"); code != 2 || !strings.Contains(errOut, "both") {
		t.Fatalf("--key without --cert: exit %d, %q; want a usage error", code, errOut)
	}
}
