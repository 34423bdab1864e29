package node

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/raftlock/raftlock/session/api"

	"github.com/hashicorp/go-hclog"

	"github.com/raftlock/raftlock/transport"
)

// testCluster is a real cluster: Raft over TCP on 127.0.0.1, bbolt files
// in temp dirs.
type testCluster struct {
	t     *testing.T
	dirs  []string
	addrs []string
	opts  func(*Config)

	mu    sync.Mutex
	nodes []*Node // nil while stopped
}

func newTestCluster(t *testing.T, size int, opts func(*Config)) *testCluster {
	t.Helper()
	c := &testCluster{t: t, nodes: make([]*Node, size), opts: opts}
	var trans []*transport.RaftNet
	var peers []Peer
	for i := 0; i < size; i++ {
		c.dirs = append(c.dirs, filepath.Join(t.TempDir(), fmt.Sprintf("n%d", i+1)))
		tr, err := transport.NewRaftTCPTransport(transport.RaftTCPConfig{BindAddr: "127.0.0.1:0"})
		if err != nil {
			t.Fatal(err)
		}
		c.addrs = append(c.addrs, string(tr.Transport.LocalAddr()))
		trans = append(trans, tr)
		peers = append(peers, Peer{ID: fmt.Sprintf("n%d", i+1), RaftAddr: string(tr.Transport.LocalAddr())})
	}
	for i := range c.nodes {
		cfg := c.config(i)
		cfg.Peers = peers
		cfg.PeerPort = trans[i]
		n, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		c.nodes[i] = n
	}
	t.Cleanup(c.stopAll)
	return c
}

func (c *testCluster) config(i int) Config {
	cfg := Config{
		ID:       fmt.Sprintf("n%d", i+1),
		DataDir:  c.dirs[i],
		RaftBind: c.addrs[i],
		Logger:   hclog.New(&hclog.LoggerOptions{Name: fmt.Sprintf("n%d", i+1), Level: hclog.Warn, Output: testWriter{c.t}}),
	}
	if c.opts != nil {
		c.opts(&cfg)
	}
	return cfg
}

// testWriter sends logs to t.Log so they show only for failing tests.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

func (c *testCluster) stop(i int) {
	c.mu.Lock()
	n := c.nodes[i]
	c.nodes[i] = nil
	c.mu.Unlock()
	if n == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Shutdown(ctx); err != nil {
		c.t.Logf("shutdown n%d: %v", i+1, err)
	}
}

func (c *testCluster) stopAll() {
	for i := range c.snapshotNodes() {
		c.stop(i)
	}
}

// start restarts a stopped node from its data dir on its old address.
func (c *testCluster) start(i int) {
	c.t.Helper()
	n, err := New(c.config(i))
	if err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	c.nodes[i] = n
	c.mu.Unlock()
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
