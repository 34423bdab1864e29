package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/transport/client"
	"github.com/raftlock/raftlock/transport/httpapi"
	"github.com/raftlock/raftlock/transport/raftnet"
)

// testCluster is a real cluster: Raft over TCP on 127.0.0.1, bbolt files
// in temp dirs, for the tests and the benchmarks of this package. Options
// serve the HTTP API on every node (withHTTP) and set the nodes' log level
// (withLogLevel; Warn by default). The nodes log to t.Log (shown for
// failing tests, and always for benchmarks) until the test's cleanup stops
// the cluster, which is quiet. Every goroutine a node starts (its Raft
// transport's, New's, its HTTP server's) carries the pprof label
// node=<id>, so that a profile can focus on one node.
type testCluster struct {
	t         testing.TB
	dirs      []string
	addrs     []string
	httpAddrs []string      // with withHTTP
	tweak     func(*Config) // applied to every node's Config last
	http      bool
	level     hclog.Level
	quiet     atomic.Bool // set when the cleanup stops the cluster

	mu      sync.Mutex
	nodes   []*Node        // nil while stopped
	servers []*http.Server // nil while stopped or without withHTTP
}

// clusterOption is an option of newTestCluster.
type clusterOption func(*testCluster)

// withHTTP serves the HTTP API (client.NewServer) of every node on a
// 127.0.0.1 port of its own, in httpAddrs and the node's Config.HTTPAddr.
func withHTTP(c *testCluster) { c.http = true }

// withLogLevel sets the level of the nodes' loggers.
func withLogLevel(level hclog.Level) clusterOption {
	return func(c *testCluster) { c.level = level }
}

// newTestCluster starts a cluster of size nodes, n1 to n<size>; tweak, if
// not nil, changes every node's Config. The cluster stops when the test
// ends.
func newTestCluster(t testing.TB, size int, tweak func(*Config), opts ...clusterOption) *testCluster {
	t.Helper()
	c := &testCluster{t: t, tweak: tweak, level: hclog.Warn, nodes: make([]*Node, size), servers: make([]*http.Server, size)}
	for _, o := range opts {
		o(c)
	}
	var trans []*raftnet.RaftNet
	var peers []Peer
	var lns []net.Listener
	for i := 0; i < size; i++ {
		c.dirs = append(c.dirs, filepath.Join(t.TempDir(), c.id(i)))
		var tr *raftnet.RaftNet
		var err error
		c.asNode(i, func() {
			tr, err = raftnet.NewRaftTCPTransport(raftnet.RaftTCPConfig{BindAddr: "127.0.0.1:0"})
		})
		if err != nil {
			t.Fatal(err)
		}
		c.addrs = append(c.addrs, string(tr.Transport.LocalAddr()))
		trans = append(trans, tr)
		peers = append(peers, Peer{ID: c.id(i), RaftAddr: c.addrs[i]})
		if c.http {
			lns = append(lns, c.listen("127.0.0.1:0"))
			c.httpAddrs = append(c.httpAddrs, lns[i].Addr().String())
		}
	}
	t.Cleanup(func() {
		c.quiet.Store(true)
		c.stopAll()
	})
	for i := range c.nodes {
		cfg := c.config(i)
		cfg.Peers = peers
		cfg.PeerPort = trans[i]
		var ln net.Listener
		if c.http {
			ln = lns[i]
		}
		c.run(i, cfg, ln)
	}
	return c
}

// newHTTPCluster starts a 3-node cluster serving the HTTP API.
func newHTTPCluster(t *testing.T) *testCluster {
	t.Helper()
	return newTestCluster(t, 3, nil, withHTTP)
}

func (c *testCluster) config(i int) Config {
	cfg := Config{
		ID:       c.id(i),
		DataDir:  c.dirs[i],
		RaftBind: c.addrs[i],
		Logger:   hclog.New(&hclog.LoggerOptions{Name: c.id(i), Level: c.level, Output: testWriter{c}}),
		Wire:     testWire{},
	}
	if c.http {
		cfg.HTTPAddr = c.httpAddrs[i]
	}
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	return cfg
}

// testWriter sends the nodes' logs to t.Log until the cluster is quiet.
type testWriter struct{ c *testCluster }

func (w testWriter) Write(p []byte) (int, error) {
	if !w.c.quiet.Load() {
		w.c.t.Helper()
		w.c.t.Log(string(p))
	}
	return len(p), nil
}

// id is node i's id.
func (c *testCluster) id(i int) string { return fmt.Sprintf("n%d", i+1) }

// asNode runs f with the pprof label node=<id> of node i, which the
// goroutines f starts inherit.
func (c *testCluster) asNode(i int, f func()) {
	pprof.Do(context.Background(), pprof.Labels("node", c.id(i)), func(context.Context) { f() })
}

func (c *testCluster) listen(addr string) net.Listener {
	c.t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		c.t.Fatal(err)
	}
	return ln
}

// run starts node i with cfg and, with ln, serves its HTTP API on ln.
func (c *testCluster) run(i int, cfg Config, ln net.Listener) {
	c.t.Helper()
	var n *Node
	var srv *http.Server
	var err error
	c.asNode(i, func() {
		if n, err = New(cfg); err != nil || ln == nil {
			return
		}
		srv = &http.Server{Handler: httpapi.NewServer(n, httpapi.WithLogger(cfg.Logger.Named("http"))),
			ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
	})
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		c.t.Fatal(err)
	}
	c.mu.Lock()
	c.nodes[i], c.servers[i] = n, srv
	c.mu.Unlock()
}

// stop stops node i and its HTTP server, as if its process died.
func (c *testCluster) stop(i int) {
	c.mu.Lock()
	n, srv := c.nodes[i], c.servers[i]
	c.nodes[i], c.servers[i] = nil, nil
	c.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
	if n == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Shutdown(ctx); err != nil && !c.quiet.Load() {
		c.t.Logf("shutdown n%d: %v", i+1, err)
	}
}

func (c *testCluster) stopAll() {
	for i := range c.snapshotNodes() {
		c.stop(i)
	}
}

// start restarts a stopped node from its data dir on its old addresses.
func (c *testCluster) start(i int) {
	c.t.Helper()
	var ln net.Listener
	if c.http {
		ln = c.listen(c.httpAddrs[i])
	}
	c.run(i, c.config(i), ln)
}

// client returns a Go client of the cluster's HTTP API.
func (c *testCluster) client(t *testing.T) *client.Client {
	t.Helper()
	cl, err := client.NewClient(c.httpAddrs)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return cl
}

// leader polls until a node leads and is ready.
func (c *testCluster) leader() (*Node, int) {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for i, n := range c.snapshotNodes() {
			if n != nil && n.IsLeader() {
				return n, i
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.t.Fatal("no leader within 20s")
	return nil, -1
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s: not within %v: %v", what, timeout, err)
}

// do runs op against the current leader, retrying while leadership moves.
func (c *testCluster) do(op func(n *Node) error) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, _ := c.leader()
		err := op(n)
		code := api.CodeOf(err)
		if (code != api.CodeNoLeader && code != api.CodeUnknownOutcome) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustOpen(t *testing.T, c *testCluster, req api.OpenRequest) api.Info {
	t.Helper()
	var info api.Info
	if err := c.do(func(n *Node) (err error) { info, err = n.OpenSession(ctxT(t), req); return }); err != nil {
		t.Fatalf("open session: %v", err)
	}
	return info
}

func mustAcquire(t *testing.T, c *testCluster, req api.AcquireRequest) api.Grant {
	t.Helper()
	var g api.Grant
	if err := c.do(func(n *Node) (err error) { g, err = n.Acquire(ctxT(t), req); return }); err != nil {
		t.Fatalf("acquire %s: %v", req.Name, err)
	}
	return g
}

// keepAlive keeps a session alive through whichever node leads, until the
// returned stop function is called; it reports the first session_not_found.
func (c *testCluster) keepAlive(id string, every time.Duration) (stop func() error) {
	done := make(chan struct{})
	result := make(chan error, 1)
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				result <- nil
				return
			case <-t.C:
			}
			for _, n := range c.snapshotNodes() {
				if n == nil || !n.IsLeader() {
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_, err := n.KeepAlive(ctx, id)
				cancel()
				if errors.Is(err, api.ErrSessionNotFound) {
					result <- err
					return
				}
			}
		}
	}()
	var once sync.Once
	var err error
	return func() error {
		once.Do(func() { close(done); err = <-result })
		return err
	}
}

func (c *testCluster) snapshotNodes() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Node(nil), c.nodes...)
}
