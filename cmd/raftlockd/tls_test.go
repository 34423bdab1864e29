package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/cmd/internal/proccluster"
	"github.com/raftlock/raftlock/node"
	"github.com/raftlock/raftlock/node/nodehttp"
	"github.com/raftlock/raftlock/session"
	"github.com/raftlock/raftlock/transport/client"
	"github.com/raftlock/raftlock/transport/tlsconf"
)

// The TLS flags: all three files or none; --client-cert-auth needs them;
// --insecure goes without them; --dev takes none. And a node on an address
// other machines can reach refuses to run in plaintext unless --insecure,
// with an error that says so: before touching anything.
func TestTLSFlags(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	base := []string{"--id", "n1", "--data-dir", dir}
	loop := append(base[:4:4], "--raft-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append(base[:4:4], "--raft-addr", "127.0.0.1:0", "--http-addr", "0.0.0.0:7001"),
			"--http-addr 0.0.0.0:7001 is not a loopback address: refusing to run without TLS"},
		{append(base[:4:4], "--raft-addr", "192.0.2.1:7101", "--http-addr", "127.0.0.1:0"),
			"--raft-addr 192.0.2.1:7101 is not a loopback address"},
		{append(base[:4:4], "--raft-addr", ":7101", "--http-addr", "127.0.0.1:0"), "--insecure"},
		{append(loop, "--raft-advertise", "10.0.0.1:7101"), "--raft-advertise 10.0.0.1:7101 is not a loopback address"},
		{append(loop, "--stream-addr", "0.0.0.0:7201"), "--stream-addr 0.0.0.0:7201 is not a loopback address"},
		{append(loop, "--stream-addr", "7201"), "--stream-addr \"7201\" is not host:port"},
		{[]string{"--dev", "--stream-addr", "127.0.0.1:7201"}, "--stream-addr is for real nodes"},
		{append(loop, "--tls-cert", "c.pem"), "TLS needs all of --tls-cert, --tls-key and --tls-ca"},
		{append(loop, "--client-cert-auth"), "--client-cert-auth needs TLS"},
		{append(loop, "--tls-cert", "c", "--tls-key", "k", "--tls-ca", "ca", "--insecure"), "--insecure is for running without TLS"},
		{[]string{"--dev", "--insecure"}, "--dev is plaintext"},
		{append(loop, "--tls-cert", "nope.pem", "--tls-key", "nope-key.pem", "--tls-ca", "ca.pem"), "nope.pem"},
	} {
		var stderr bytes.Buffer
		if code := run(tc.args, &stderr); code != 2 {
			t.Errorf("run(%q) = %d, want 2 (stderr %q)", tc.args, code, stderr.String())
		}
		if !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("run(%q): stderr %q does not say %q", tc.args, stderr.String(), tc.want)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("run(%q) touched the data dir (%v)", tc.args, err)
		}
	}
	for _, args := range [][]string{
		append(base[:4:4], "--raft-addr", "127.0.0.1:0", "--http-addr", "0.0.0.0:7001", "--insecure"),
		append(base[:4:4], "--raft-addr", "[::1]:0", "--http-addr", "localhost:7001"),
	} {
		if _, err := parse(args, &bytes.Buffer{}); err != nil {
			t.Errorf("parse(%q): %v", args, err)
		}
	}
}

// A node on all interfaces starts and serves with --insecure.
func TestInsecureNodeOnAllInterfacesStarts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a raftlockd process")
	}
	bin := proccluster.BuildDaemon(t)
	raftAddr, httpAddr := proccluster.FreeAddr(t), proccluster.FreeAddr(t)
	_, port, _ := strings.Cut(httpAddr, ":")
	var log bytes.Buffer
	cmd := exec.Command(bin, "--id", "n1", "--data-dir", t.TempDir(), "--raft-addr", raftAddr,
		"--http-addr", "0.0.0.0:"+port, "--peers", "n1="+raftAddr, "--insecure")
	cmd.Stderr = &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	proccluster.Eventually(t, 30*time.Second, "the --insecure node serving", func() error {
		var h api.HealthInfo
		if err := call(httpAddr, http.MethodGet, "/v1/health", nil, &h); err != nil {
			return err
		}
		if !h.Serving {
			return fmt.Errorf("not serving yet: %+v", h)
		}
		return nil
	})
}

// tlsInit runs raftlock tls init for nodes n1..n<size> on 127.0.0.1 and a
// client named client, and returns the directory.
func tlsInit(t *testing.T, cli string, size int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tls")
	args := []string{"tls", "init", dir, "--client", "client"}
	for i := 1; i <= size; i++ {
		args = append(args, "--node", fmt.Sprintf("n%d=127.0.0.1", i))
	}
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("raftlock %q: %v\n%s", args, err, out)
	}
	return dir
}

// A 3-node cluster of raftlockd processes on the certificates of raftlock
// tls init, with --client-cert-auth: it forms (Raft over mutual TLS), the
// CLI with --ca, --cert and --key is served by every node (a follower
// forwards over TLS), a CLI without a client certificate is refused, and
// plain HTTP gets nothing.
func TestTLSClusterServesTheCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts raftlockd processes")
	}
	cli := proccluster.Build(t, "github.com/raftlock/raftlock/cmd/raftlock", "raftlock")
	dir := tlsInit(t, cli, 3)
	c := proccluster.StartTLS(t, proccluster.BuildDaemon(t), dir, 3, "--client-cert-auth")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	follower := c.Addrs()[(leader+1)%3]
	raftlock := func(addr string, certs bool, args ...string) (string, error) {
		flags := []string{"--addr", addr, "--ca", filepath.Join(dir, "ca.pem"), "--timeout", "20s"}
		if certs {
			flags = append(flags, "--cert", filepath.Join(dir, "client.pem"), "--key", filepath.Join(dir, "client-key.pem"))
		}
		var stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, cli, append(flags, args...)...)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("raftlock %q: %v: %s", args, err, stderr.String())
		}
		return strings.TrimSpace(string(out)), nil
	}
	if !strings.HasPrefix(follower, "https://") {
		t.Fatalf("a TLS cluster's address %q is not https://", follower)
	}
	// Only through a follower: every write and read is forwarded.
	sid, err := raftlock(follower, true, "session", "open", "--ttl", "30s")
	if err == nil {
		_, err = raftlock(follower, true, "acquire", "--session", sid, "--holder", "h1", "jobs/tls")
	}
	var got string
	if err == nil {
		got, err = raftlock(follower, true, "lock", "get", "jobs/tls")
	}
	if err != nil || !strings.Contains(got, "h1") {
		t.Fatalf("the CLI through a follower over TLS: %q, %v", got, err)
	}
	// Every follower registers its HTTP address at the leader's peer port
	// (PostMember, over TLS).
	// status asks each member at its recorded address (no scheme) over
	// https://: one leader and two healthy followers, none unreachable.
	proccluster.Eventually(t, 30*time.Second, "status shows the TLS members healthy", func() error {
		out, err := raftlock(c.AddrList(), true, "status")
		if err == nil && (strings.Count(out, "127.0.0.1") < 6 || strings.Count(out, " leader ") != 1 ||
			strings.Count(out, " follower ") != 2 || strings.Contains(out, "unreachable")) {
			err = fmt.Errorf("status %q", out)
		}
		return err
	})
	if _, err := raftlock(follower, false, "status"); err == nil || !strings.Contains(err.Error(), "certificate required") {
		t.Fatalf("the CLI without a client certificate: %v, want certificate required", err)
	}
	if err := call(c.Nodes[leader].HTTPAddr, http.MethodGet, "/v1/health", nil, nil); err == nil {
		t.Fatal("plain HTTP to a TLS node was answered")
	}
}

// A follower whose own certificate is of another CA never receives the
// leader's entries: the cluster of the two good nodes works, and the
// third node, whose Raft connections are refused both ways, never learns
// of a leader.
func TestTLSNodeWithForeignCertNeverJoins(t *testing.T) {
	if testing.Short() {
		t.Skip("starts raftlockd processes")
	}
	cli := proccluster.Build(t, "github.com/raftlock/raftlock/cmd/raftlock", "raftlock")
	dir := tlsInit(t, cli, 3)
	other := tlsInit(t, cli, 3)
	// The cluster forms with good certificates (a node with an empty data
	// dir bootstraps only once every peer has answered it, and a foreign
	// certificate answers nothing); then n3 comes back with another CA's.
	c := proccluster.StartTLS(t, proccluster.BuildDaemon(t), dir, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	c.Kill(2)
	for _, f := range []string{"n3.pem", "n3-key.pem"} { // n3: another CA's certificate
		data, err := os.ReadFile(filepath.Join(other, f))
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, f), data, 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	c.Restart(2)
	cl := c.Client()
	s, err := session.Open(ctx, cl, session.TTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if _, err := s.Lock(ctx, "jobs/foreign"); err != nil { // committed by n1 and n2
		t.Fatal(err)
	}
	n3, err := client.NewClient([]string{c.Addrs()[2]}, client.WithTLS(proccluster.ClientTLS(t, other)))
	if err != nil {
		t.Fatal(err)
	}
	h, err := n3.Health(ctx)
	if err != nil || h.Leader != "" {
		t.Fatalf("n3 (another CA's certificate): health %+v, %v; want no leader known", h, err)
	}
	// n3 keeps trying (its elections): the members say why they refuse it.
	proccluster.Eventually(t, 30*time.Second, "a member logging n3's refused handshake", func() error {
		if !strings.Contains(c.Nodes[0].Log()+c.Nodes[1].Log(), "peer refused: TLS handshake failed") {
			return errors.New("not yet")
		}
		return nil
	})
}

// BenchmarkSecurity measures what TLS and ACLs cost: acquire+release
// pairs (session Lock and Unlock) through the Go client on a 3-node
// cluster of raftlockd processes, in one run, with TLS off and on (HTTPS
// to the leader, mutual TLS between the nodes) and ACLs off and on (every
// call authenticated by a token with write:bench/, and the session's
// owner checked): the p50 of one pair with 1 client, and pairs/s with 64.
//
//	go test -run '^$' -bench BenchmarkSecurity -benchtime 3s ./cmd/raftlockd
func BenchmarkSecurity(b *testing.B) {
	bin := proccluster.BuildDaemon(b)
	cli := proccluster.Build(b, "github.com/raftlock/raftlock/cmd/raftlock", "raftlock")
	for _, mode := range []struct{ tls, acl bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		var extra []string
		if mode.acl {
			extra = append(extra, "--acl")
		}
		var c *proccluster.Cluster
		if mode.tls {
			dir := filepath.Join(b.TempDir(), "tls")
			if out, err := exec.Command(cli, "tls", "init", dir, "--client", "client",
				"--node", "n1=127.0.0.1", "--node", "n2=127.0.0.1", "--node", "n3=127.0.0.1").CombinedOutput(); err != nil {
				b.Fatalf("tls init: %v\n%s", err, out)
			}
			c = proccluster.StartTLS(b, bin, dir, 3, extra...)
		} else {
			c = proccluster.Start(b, bin, 3, extra...)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		if _, err := c.Leader(ctx); err != nil {
			b.Fatal(err)
		}
		cl := c.Client()
		if mode.acl {
			boot, err := cl.ACLBootstrap(ctx)
			if err != nil {
				b.Fatal(err)
			}
			tok, err := c.Client(client.WithToken(boot.Secret)).CreateToken(ctx,
				api.TokenRequest{Name: "bench", Rules: []string{"write:bench/"}})
			if err != nil {
				b.Fatal(err)
			}
			cl = c.Client(client.WithToken(tok.Secret))
		}
		for _, clients := range []int{1, 64} {
			b.Run(fmt.Sprintf("tls=%v/acl=%v/clients=%d", mode.tls, mode.acl, clients), func(b *testing.B) { pairs(ctx, b, cl, clients) })
		}
		cancel()
		for i := range c.Nodes {
			c.Kill(i) // the next mode's cluster runs alone
		}
	}
}

// pairs runs b.N Lock+Unlock pairs over clients sessions, each on its own
// lock, and reports pairs/s and the median pair in ms.
func pairs(ctx context.Context, b *testing.B, cl *client.Client, clients int) {
	sessions := make([]*session.Session, clients)
	for i := range sessions {
		s, err := session.Open(ctx, cl, session.TTL(15*time.Second), session.LockDelay(api.NoLockDelay))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close(ctx)
		sessions[i] = s
	}
	work := make(chan struct{}, b.N)
	for range b.N {
		work <- struct{}{}
	}
	close(work)
	var mu sync.Mutex
	var lats []time.Duration
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i, s := range sessions {
		wg.Go(func() {
			name := fmt.Sprintf("bench/%d/%d", start.UnixNano(), i)
			for range work {
				t0 := time.Now()
				l, err := s.Lock(ctx, name)
				if err == nil {
					err = l.Unlock(ctx)
				}
				if err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				lats = append(lats, time.Since(t0))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if len(lats) == 0 {
		return
	}
	slices.Sort(lats)
	b.ReportMetric(float64(len(lats))/elapsed.Seconds(), "pairs/s")
	b.ReportMetric(float64(lats[len(lats)/2])/float64(time.Millisecond), "p50-ms")
}

// Embedded replicas take the same TLS identity as raftlockd
// (node.Config.TLS): three in-process nodes on certificates of one CA form a
// cluster over mutual TLS, and a follower's Backend, which reaches the
// leader's peer port, opens a session and takes a lock there.
func TestEmbeddedReplicasOverTLS(t *testing.T) {
	ca, err := tlsconf.NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var peers []node.Peer
	for i := 1; i <= 3; i++ {
		peers = append(peers, node.Peer{ID: fmt.Sprintf("n%d", i), RaftAddr: proccluster.FreeAddr(t)})
	}
	var nodes []*node.Node
	for _, p := range peers {
		cert, key, err := ca.IssueNode(p.ID, []string{"127.0.0.1"}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		files := map[string][]byte{p.ID + ".pem": cert, p.ID + "-key.pem": key, "ca.pem": ca.CertPEM()}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		id, err := tlsconf.LoadTLS(filepath.Join(dir, p.ID+".pem"), filepath.Join(dir, p.ID+"-key.pem"), filepath.Join(dir, "ca.pem"))
		if err != nil {
			t.Fatal(err)
		}
		n, err := node.New(node.Config{ID: p.ID, DataDir: filepath.Join(dir, p.ID), RaftBind: p.RaftAddr, Peers: peers, TLS: id, Wire: nodehttp.Wire{}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = n.Shutdown(ctx)
		})
		nodes = append(nodes, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The Backend retries until a leader serves; a follower's goes to the
	// leader's peer port. Try every node's: at least two are followers.
	for _, n := range nodes {
		s, err := session.Open(ctx, n.Backend(), session.TTL(5*time.Second))
		if err != nil {
			t.Fatalf("%s: open a session over TLS: %v", n.ID(), err)
		}
		l, err := s.TryLock(ctx, "jobs/embedded-tls-"+n.ID())
		if err != nil {
			t.Fatalf("%s: lock over TLS: %v", n.ID(), err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
