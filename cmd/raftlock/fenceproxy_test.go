package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftlock/raftlock/cmd/internal/proccluster"
	"github.com/raftlock/raftlock/sequencer"
	"github.com/raftlock/raftlock/session"
)

// fenceProxy is a `raftlock fence-proxy` process.
type fenceProxy struct {
	base string // http:// or https://, and the address
	kill func()

	mu     sync.Mutex
	stderr strings.Builder
}

// log returns what the proxy wrote to stderr so far.
func (p *fenceProxy) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// startFenceProxy runs `raftlock fence-proxy` in front of upstream, with
// its marks in state and the extra args, and returns it once it listens;
// the process is killed (-9) when the test ends, or by its kill.
func startFenceProxy(t *testing.T, bin, upstream, state string, args ...string) *fenceProxy {
	t.Helper()
	addr := proccluster.FreeAddr(t)
	cmd := exec.Command(bin, append([]string{"fence-proxy", "--listen", addr, "--upstream", upstream, "--state", state}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &fenceProxy{base: "http://" + addr}
	if slices.Contains(args, "--tls-cert") {
		p.base = "https://" + addr
	}
	var once sync.Once
	p.kill = func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	t.Cleanup(p.kill)
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		signalled := false
		for sc.Scan() {
			p.mu.Lock()
			p.stderr.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if !signalled && strings.Contains(sc.Text(), "fencing") {
				close(ready)
				signalled = true
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatalf("fence-proxy did not start in 30s: %s", p.log())
	}
	return p
}

// A former holder's write through `raftlock fence-proxy` is refused once a
// newer holder's write went through — also after the proxy was killed
// (-9) and restarted on the same state file — and the backend never sees
// it; the current holder's writes pass.
func TestFenceProxyRefusesAFormerHoldersWriteAcrossARestart(t *testing.T) {
	daemon, cli := binaries(t)
	c := proccluster.Start(t, daemon, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var writes []string
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		writes = append(writes, string(body))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer backend.Close()
	state := filepath.Join(t.TempDir(), "fence.json")
	fp := startFenceProxy(t, cli, backend.URL, state, "--addr", c.AddrList(), "--lock", "stock/42")
	base := fp.base

	put := func(base string, seq sequencer.Sequencer, body string) int {
		req, _ := http.NewRequest(http.MethodPut, base+"/stock/42", strings.NewReader(body))
		req.Header.Set(sequencer.Header, seq.String())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	cl := c.Client()
	a, err := session.Open(ctx, cl, session.TTL(2*time.Second), session.LockDelay(0))
	if err != nil {
		t.Fatal(err)
	}
	la, err := a.Lock(ctx, "stock/42")
	if err != nil {
		t.Fatal(err)
	}
	seqA := la.Sequencer()
	if st := put(base, seqA, "a1"); st != http.StatusNoContent {
		t.Fatalf("holder a: HTTP %d", st)
	}
	if err := la.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := session.Open(ctx, cl, session.TTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.Lock(ctx, "stock/42")
	if err != nil {
		t.Fatal(err)
	}
	seqB := lb.Sequencer()
	if st := put(base, seqB, "b1"); st != http.StatusNoContent {
		t.Fatalf("holder b: HTTP %d", st)
	}
	if st := put(base, seqA, "a2"); st != http.StatusConflict {
		t.Fatalf("former holder a: HTTP %d, want 409", st)
	}
	fp.kill()
	base = startFenceProxy(t, cli, backend.URL, state, "--addr", c.AddrList(), "--lock", "stock/42").base
	if st := put(base, seqA, "a3"); st != http.StatusConflict {
		t.Fatalf("former holder a after a restart: HTTP %d, want 409", st)
	}
	if st := put(base, seqB, "b2"); st != http.StatusNoContent {
		t.Fatalf("holder b after a restart: HTTP %d", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(writes, ",") != "a1,b1,b2" {
		t.Fatalf("the backend saw %v, want a1,b1,b2", writes)
	}
	_ = a.Close(ctx)
	_ = b.Close(ctx)
}
