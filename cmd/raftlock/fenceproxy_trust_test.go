package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftlock/raftlock/cmd/internal/proccluster"
	"github.com/raftlock/raftlock/sequencer"
	"github.com/raftlock/raftlock/session"
)

// recordingBackend is an HTTP backend that records the bodies of the
// requests that reach it.
type recordingBackend struct {
	mu     sync.Mutex
	writes []string
}

func newRecordingBackend(t *testing.T) (*recordingBackend, string) {
	b := &recordingBackend{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		b.mu.Lock()
		b.writes = append(b.writes, string(body))
		b.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return b, srv.URL
}

func (b *recordingBackend) seen() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.writes, ",")
}

// putThrough sends a PUT with seq through the proxy at base and returns
// the status and the error code of a refusal.
func putThrough(t *testing.T, hc *http.Client, base, seq, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, base+"/stock/42", strings.NewReader(body))
	req.Header.Set(sequencer.Header, seq)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	defer resp.Body.Close()
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	raw, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(raw, &e)
	return resp.StatusCode, e.Error.Code
}

// A forged sequencer (well formed, the highest token there is, never
// issued) is refused unconfirmed_sequencer and never reaches the backend,
// before and after a kill -9 and restart of the proxy, and the real
// holder's writes keep passing: the cluster confirms a sequencer before it
// raises a mark. A real grant of a lock the proxy does not guard is
// refused lock_not_guarded, and so is one of another guarded lock on a
// path --route gives to this lock.
func TestFenceProxyRefusesAForgedSequencerAndKeepsTheHolderAcrossARestart(t *testing.T) {
	daemon, cli := binaries(t)
	c := proccluster.Start(t, daemon, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	backend, url := newRecordingBackend(t)
	state := filepath.Join(t.TempDir(), "fence.json")
	args := []string{"--addr", c.AddrList(), "--lock", "stock/42"}
	fp := startFenceProxy(t, cli, url, state, args...)
	s, err := session.Open(ctx, c.Client(), session.TTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	l, err := s.Lock(ctx, "stock/42")
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.Lock(ctx, "stock/43")
	if err != nil {
		t.Fatal(err)
	}
	const forged = "rl1:x:18446744073709551615:stock/42"
	hc := http.DefaultClient
	check := func(when string) {
		if st, code := putThrough(t, hc, fp.base, forged, "forged"); st != http.StatusConflict || code != "unconfirmed_sequencer" {
			t.Fatalf("%s: the forged sequencer: HTTP %d %s, want 409 unconfirmed_sequencer", when, st, code)
		}
		if st, code := putThrough(t, hc, fp.base, other.Sequencer().String(), "other"); st != http.StatusForbidden || code != "lock_not_guarded" {
			t.Fatalf("%s: another lock's sequencer: HTTP %d %s, want 403 lock_not_guarded", when, st, code)
		}
		if st, code := putThrough(t, hc, fp.base, l.Sequencer().String(), "holder"); st != http.StatusNoContent {
			t.Fatalf("%s: the holder: HTTP %d %s", when, st, code)
		}
	}
	check("first")
	// Routed: a real grant of another guarded lock is refused on this
	// lock's path.
	routed := startFenceProxy(t, cli, url, filepath.Join(t.TempDir(), "routed.json"), "--addr", c.AddrList(),
		"--route", "/stock/42=stock/42", "--route", "/stock/43=stock/43")
	if st, code := putThrough(t, hc, routed.base, other.Sequencer().String(), "other"); st != http.StatusForbidden || code != "lock_not_guarded" {
		t.Fatalf("routed: stock/43's sequencer on /stock/42: HTTP %d %s, want 403 lock_not_guarded", st, code)
	}
	if st, code := putThrough(t, hc, routed.base, l.Sequencer().String(), "routed"); st != http.StatusNoContent {
		t.Fatalf("routed: the holder: HTTP %d %s", st, code)
	}
	routed.kill()
	fp.kill()
	fp = startFenceProxy(t, cli, url, state, args...)
	check("after a restart")
	if got := backend.seen(); got != "holder,routed,holder" {
		t.Fatalf("the backend saw %q, want only the holder's three writes", got)
	}
	if !strings.Contains(fp.log(), "NO CLIENT AUTHENTICATION") {
		t.Errorf("no warning about the missing --client-ca in %q", fp.log())
	}
}

// With --client-ca the proxy serves TLS and requires a client certificate
// of that CA: a client without one is refused at the handshake and
// nothing reaches the backend; one with it passes, and no warning about
// client authentication is logged.
func TestFenceProxyWithClientCARequiresAClientCertificate(t *testing.T) {
	_, cli := binaries(t)
	dir := filepath.Join(t.TempDir(), "tls")
	if code, _, errOut := runCLI(t, "tls", "init", dir, "--node", "proxy=127.0.0.1", "--client", "app"); code != 0 {
		t.Fatal(errOut)
	}
	backend, url := newRecordingBackend(t)
	fp := startFenceProxy(t, cli, url, filepath.Join(t.TempDir(), "fence.json"), "--any-lock", "--cluster-check=false",
		"--tls-cert", filepath.Join(dir, "proxy.pem"), "--tls-key", filepath.Join(dir, "proxy-key.pem"),
		"--client-ca", filepath.Join(dir, "ca.pem"))
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	anon := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, _ := http.NewRequest(http.MethodPut, fp.base+"/stock/42", strings.NewReader("anon"))
	req.Header.Set(sequencer.Header, "rl1:x:9:stock/42")
	if resp, err := anon.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("a client without a certificate got HTTP %d", resp.StatusCode)
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "app.pem"), filepath.Join(dir, "app-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	app := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}}
	if st, code := putThrough(t, app, fp.base, "rl1:x:9:stock/42", "app"); st != http.StatusNoContent {
		t.Fatalf("a client with a certificate: HTTP %d %s", st, code)
	}
	if got := backend.seen(); got != "app" {
		t.Fatalf("the backend saw %q, want only app", got)
	}
	if log := fp.log(); strings.Contains(log, "NO CLIENT AUTHENTICATION") || !strings.Contains(log, "NO CLUSTER CHECK") {
		t.Errorf("start warnings: %q", log)
	}
}

// Without --client-ca the proxy says at start, loudly, that anyone who
// reaches its port can use it (and without the cluster check, raise the
// marks); it refuses to start without being told which locks it guards.
func TestFenceProxyWarnsWithoutClientCAAndNeedsItsLocks(t *testing.T) {
	_, cli := binaries(t)
	_, url := newRecordingBackend(t)
	fp := startFenceProxy(t, cli, url, filepath.Join(t.TempDir(), "fence.json"), "--any-lock", "--cluster-check=false")
	if log := fp.log(); !strings.Contains(log, "NO CLIENT AUTHENTICATION") || !strings.Contains(log, "raise the fence's marks") {
		t.Fatalf("no loud warning at start: %q", log)
	}
	code, _, errOut := runCLI(t, "fence-proxy", "--listen", "127.0.0.1:0", "--upstream", url, "--state", filepath.Join(t.TempDir(), "f.json"))
	if code != 2 || !strings.Contains(errOut, "--lock") {
		t.Fatalf("without --lock: exit %d, %q; want a usage error naming --lock", code, errOut)
	}
}
