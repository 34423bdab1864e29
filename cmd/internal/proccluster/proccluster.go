// Package proccluster runs a real raftlock cluster for end-to-end tests:
// raftlockd processes built from this module, on 127.0.0.1 ports chosen
// at random, with data dirs under the test's temp dir. Tests kill -9,
// freeze, restart and find the leader of its nodes; tools that kill and
// restart nodes by PID themselves get the PIDs and a restart script
// (RestartScript).
package proccluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/raftlock/raftlock/internal/freeport"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/api/apitest"
	"github.com/raftlock/raftlock/transport/client"
	"github.com/raftlock/raftlock/transport/tlsconf"
)

// BuildDaemon builds raftlockd into a temp dir and returns its path.
func BuildDaemon(t testing.TB) string {
	t.Helper()
	return Build(t, "github.com/raftlock/raftlock/cmd/raftlockd", "raftlockd")
}

// Build builds the package pkg of this module into a temp dir as name.
func Build(t testing.TB, pkg, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	// Built without -race even under go test -race: the daemons' timing
	// matters to these tests, and the race detector runs on the in-process
	// cluster tests of package node.
	out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// FreeAddr returns a 127.0.0.1 address whose port is free and stays
// reserved for the test until it ends (freeport: no other test, process or
// outgoing connection is given it meanwhile), for a process the test
// starts later.
func FreeAddr(t testing.TB) string {
	t.Helper()
	r, err := freeport.Reserve("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r.Addr
}

// Node is one raftlockd process of a Cluster.
type Node struct {
	ID       string
	HTTPAddr string
	args     []string
	cmd      *exec.Cmd
	// exit is closed once cmd has exited (one goroutine reaps each
	// process), with its exit code in code.
	exit chan struct{}
	code int
	log  *apitest.LogBuffer
}

// Cluster is a set of raftlockd processes.
type Cluster struct {
	t     testing.TB
	bin   string
	mu    sync.Mutex
	Nodes []*Node
	// CertDir, for a TLS cluster (StartTLS), holds its CA and certificates;
	// tls is its clients' configuration.
	CertDir string
	tls     *tls.Config

	// startBound bounds each process's start (watchStart); closing is
	// closed when the test's cleanup begins, which then waits for the
	// watchers.
	startBound time.Duration
	closing    chan struct{}
	watchers   sync.WaitGroup
	// artifacts is the test's artifact directory (artifactDir), made once.
	artifactsOnce sync.Once
	artifacts     string
	artifactsErr  error
}

// Start starts size raftlockd processes of bin forming one cluster, with
// extra flags for every node (e.g. "--raft-election-timeout", "500ms").
// They are killed when the test ends.
func Start(t testing.TB, bin string, size int, extra ...string) *Cluster {
	t.Helper()
	return start(t, bin, size, "", extra, nil)
}

// StartTLS is Start for a TLS cluster: certDir holds what raftlock tls
// init writes for it, the CA (ca.pem), node i's certificate and key
// (n<i>.pem, n<i>-key.pem) and a client certificate (client.pem,
// client-key.pem), which the cluster's Go clients present. Every node runs
// with --tls-cert, --tls-key and --tls-ca; Addrs are https:// addresses.
func StartTLS(t testing.TB, bin, certDir string, size int, extra ...string) *Cluster {
	t.Helper()
	return start(t, bin, size, certDir, extra, nil)
}

// ClientTLS is the TLS configuration of a client of the cluster
// certificates in certDir (StartTLS) describe: the CA and the client
// certificate.
func ClientTLS(t testing.TB, certDir string) *tls.Config {
	t.Helper()
	cfg, err := tlsconf.ClientConfig(filepath.Join(certDir, "ca.pem"),
		filepath.Join(certDir, "client.pem"), filepath.Join(certDir, "client-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// start lays out size nodes (TLS from certDir unless empty; node i runs
// with extra, then each(i) if each is set), starts them all and kills
// them when the test ends, printing their logs if it failed and keeping
// them in the test's artifact directory (ArtifactsEnv). A node that does
// not answer GET /v1/health within DefaultStartBound of a start fails the
// test, its goroutines kept (watchStart).
func start(t testing.TB, bin string, size int, certDir string, extra []string, each func(i int) []string) *Cluster {
	t.Helper()
	return startBounded(t, bin, size, certDir, extra, each, DefaultStartBound)
}

// startBounded is start with the start bound startBound.
func startBounded(t testing.TB, bin string, size int, certDir string, extra []string, each func(i int) []string, startBound time.Duration) *Cluster {
	t.Helper()
	c := &Cluster{t: t, bin: bin, CertDir: certDir, startBound: startBound, closing: make(chan struct{})}
	if certDir != "" {
		c.tls = ClientTLS(t, certDir)
	}
	var raft, peers []string
	for i := 1; i <= size; i++ {
		raft = append(raft, FreeAddr(t))
		peers = append(peers, fmt.Sprintf("n%d=%s", i, raft[i-1]))
	}
	dir := t.TempDir()
	for i := 1; i <= size; i++ {
		n := &Node{ID: fmt.Sprintf("n%d", i), HTTPAddr: FreeAddr(t)}
		n.args = []string{"--id", n.ID, "--data-dir", filepath.Join(dir, n.ID), "--raft-addr", raft[i-1],
			"--http-addr", n.HTTPAddr, "--peers", strings.Join(peers, ","), "--log-level", "warn"}
		if certDir != "" {
			n.args = append(n.args, "--tls-cert", filepath.Join(certDir, n.ID+".pem"),
				"--tls-key", filepath.Join(certDir, n.ID+"-key.pem"), "--tls-ca", filepath.Join(certDir, "ca.pem"))
		}
		n.args = append(n.args, extra...)
		if each != nil {
			n.args = append(n.args, each(i-1)...)
		}
		c.Nodes = append(c.Nodes, n)
	}
	t.Cleanup(func() {
		close(c.closing)
		c.watchers.Wait()
		if t.Failed() {
			c.dumpGoroutines(5 * time.Second)
		}
		for i := range c.Nodes {
			c.Kill(i)
		}
		if t.Failed() {
			for _, n := range c.Nodes {
				t.Logf("%s log:\n%s", n.ID, n.Log())
			}
			if dir, err := c.keepLogs(); err != nil {
				t.Logf("proccluster: %v", err)
			} else {
				t.Logf("proccluster: the nodes' logs (with their goroutines) are kept in %s", dir)
			}
		}
	})
	for i := range c.Nodes {
		c.Restart(i)
	}
	return c
}

// Log returns what node n wrote to stderr so far.
func (n *Node) Log() string {
	if n.log == nil {
		return ""
	}
	return n.log.String()
}

// Addrs returns every node's HTTP address (https://host:port in a TLS
// cluster).
func (c *Cluster) Addrs() []string {
	var out []string
	for _, n := range c.Nodes {
		if c.tls != nil {
			out = append(out, "https://"+n.HTTPAddr)
		} else {
			out = append(out, n.HTTPAddr)
		}
	}
	return out
}

// clientOptions are the options every Go client of the cluster takes
// (TLS), then opts.
func (c *Cluster) clientOptions(opts ...client.ClientOption) []client.ClientOption {
	if c.tls != nil {
		opts = append(opts, client.WithTLS(c.tls))
	}
	return opts
}

// AddrList returns the HTTP addresses comma-separated, as --addr takes
// them.
func (c *Cluster) AddrList() string { return strings.Join(c.Addrs(), ",") }

// Client returns a Go client of the cluster, with opts (e.g. an ACL
// token) after the cluster's own (TLS).
func (c *Cluster) Client(opts ...client.ClientOption) *client.Client {
	cl, err := client.NewClient(c.Addrs(), c.clientOptions(opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	return cl
}

// Restart starts node i (again), with the data it has.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	n := c.Nodes[i]
	c.mu.Lock()
	defer c.mu.Unlock()
	if n.cmd != nil {
		return
	}
	if n.log == nil {
		n.log = &apitest.LogBuffer{}
	}
	cmd := exec.Command(c.bin, n.args...)
	cmd.Stderr = n.log
	// A SIGQUIT (dumpGoroutines) then prints every goroutine.
	cmd.Env = append(os.Environ(), "GOTRACEBACK=all")
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start %s: %v", n.ID, err)
	}
	exit := make(chan struct{})
	n.cmd, n.exit = cmd, exit
	c.watchers.Add(1)
	go c.watchStart(n, cmd, exit)
	go func() {
		err := cmd.Wait()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		c.mu.Lock()
		n.code = code
		if n.cmd == cmd {
			n.cmd = nil
		}
		c.mu.Unlock()
		close(exit)
	}()
}

// Exited reports whether node i's last process has exited, and its exit
// code.
func (c *Cluster) Exited(i int) (code int, exited bool) {
	c.mu.Lock()
	n := c.Nodes[i]
	exit := n.exit
	c.mu.Unlock()
	if exit == nil {
		return 0, false
	}
	select {
	case <-exit:
		c.mu.Lock()
		defer c.mu.Unlock()
		return n.code, true
	default:
		return 0, false
	}
}

// dumpGoroutines makes every running node print all its goroutines into
// its log and exit (SIGQUIT, with GOTRACEBACK=all from Restart; a frozen
// node is thawed for it), waiting at most d in all: when a test fails, the
// logs then say what each node was doing, not only what it last logged.
func (c *Cluster) dumpGoroutines(d time.Duration) {
	c.mu.Lock()
	var exits []chan struct{}
	for _, n := range c.Nodes {
		if n.cmd == nil {
			continue
		}
		_ = n.cmd.Process.Signal(syscall.SIGQUIT)
		_ = n.cmd.Process.Signal(syscall.SIGCONT)
		exits = append(exits, n.exit)
	}
	c.mu.Unlock()
	deadline := time.After(d)
	for _, exit := range exits {
		select {
		case <-exit:
		case <-deadline:
			return
		}
	}
}

// Kill sends SIGKILL to node i and reaps it; a dead node is left alone.
func (c *Cluster) Kill(i int) {
	c.mu.Lock()
	n := c.Nodes[i]
	cmd, exit := n.cmd, n.exit
	c.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exit
}

// Freeze stops node i with SIGSTOP, as a long GC or VM pause or a stalled
// disk would; Thaw resumes it. A frozen node keeps its connections open and
// answers nothing. (Kill works on a frozen node too.)
func (c *Cluster) Freeze(i int) { c.signal(i, syscall.SIGSTOP) }

// Thaw resumes node i after Freeze.
func (c *Cluster) Thaw(i int) { c.signal(i, syscall.SIGCONT) }

func (c *Cluster) signal(i int, sig syscall.Signal) {
	c.t.Helper()
	c.mu.Lock()
	cmd := c.Nodes[i].cmd
	c.mu.Unlock()
	if cmd == nil {
		c.t.Fatalf("signal %v to %s: not running", sig, c.Nodes[i].ID)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		c.t.Fatalf("signal %v to %s: %v", sig, c.Nodes[i].ID, err)
	}
}

// Leader waits until the cluster names a leader and returns its index in
// Nodes.
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	cl, err := client.NewClient(c.Addrs(), c.clientOptions(client.WithRequestTimeout(time.Second))...)
	if err != nil {
		return 0, err
	}
	defer cl.CloseIdleConnections()
	for {
		info, err := cl.Cluster(ctx)
		if api.CodeOf(err) == api.CodeUnauthenticated {
			// ACLs on: /v1/cluster takes an admin token, /v1/health none.
			if i, ok := c.servingLeader(ctx); ok {
				return i, nil
			}
		}
		if err == nil {
			for i, n := range c.Nodes {
				if n.ID == info.Leader {
					return i, nil
				}
			}
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("no leader: %w (last error %v)", ctx.Err(), err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond): // polling a remote process
		}
	}
}

// servingLeader asks every node's /v1/health for the one that leads and
// serves.
func (c *Cluster) servingLeader(ctx context.Context) (int, bool) {
	for i, a := range c.Addrs() {
		cl, err := client.NewClient([]string{a}, c.clientOptions(client.WithRequestTimeout(time.Second), client.WithFailFast(time.Second))...)
		if err != nil {
			continue
		}
		h, err := cl.Health(ctx)
		cl.CloseIdleConnections()
		if err == nil && h.IsLeader && h.Serving {
			return i, true
		}
	}
	return 0, false
}

// Eventually polls cond every 20 ms until it returns nil, failing the test
// with cond's last error if timeout passes first. It is for conditions
// held by other processes, which cannot be awaited.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: not within %v: %v", what, timeout, err)
}
