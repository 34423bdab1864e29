package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"

	"github.com/hashicorp/go-hclog"

	"github.com/raftlock/raftlock/session"
	"github.com/raftlock/raftlock/transport/client"
)

// The cluster benchmarks: acquire+release pairs (session.Session Lock and
// Unlock) on a 3-node cluster with real Raft over TCP on 127.0.0.1 and
// bbolt with fsync in temp dirs, by 1, 16 and 64 clients each with its own
// session and lock, and 16 clients on one lock (every pair a handoff).
//
//	go test -run '^$' -bench 'BenchmarkCluster' -benchtime 2s ./node
//
// RAFTLOCK_BENCH_LOG_STORE=boltdb runs them on the boltdb log store
// (default: wal, Config.LogStore).
//
// BenchmarkCluster calls the leader's Node methods directly (Raft, FSM,
// lease table, stores: the core); BenchmarkClusterHTTP goes through the
// HTTP API (client.NewServer on every node, client.Client starting at
// the leader), as raftlockd serves it. Besides ns/op (per pair, all clients
// together) they report pairs/s and the p50/p99 of one pair in ms; allocs
// count the whole process (three nodes and the clients).
//
// Profiles: every goroutine a node starts carries the pprof label
// node=<id> and the clients' carry role=client, and the leader's id is
// logged, so that
//
//	go test -run '^$' -bench 'ClusterHTTP/clients=64' -benchtime 5s -cpuprofile cpu.out ./node
//	go tool pprof -top -tagfocus node=n1 node.test cpu.out
//
// shows the leader's share alone.

// newBenchCluster starts the 3-node cluster of the benchmarks, which logs
// errors only, and returns it with its ready leader's index.
func newBenchCluster(b *testing.B, opts ...clusterOption) (*testCluster, int) {
	b.Helper()
	store := os.Getenv("RAFTLOCK_BENCH_LOG_STORE")
	if err := CheckLogStore(store); err != nil {
		b.Fatalf("RAFTLOCK_BENCH_LOG_STORE: %v", err)
	}
	c := newTestCluster(b, 3, func(cfg *Config) { cfg.LogStore = store }, append([]clusterOption{withLogLevel(hclog.Error)}, opts...)...)
	_, l := c.leader()
	b.Logf("leader n%d", l+1)
	return c, l
}

// httpBackend returns a client of the cluster's HTTP API that starts at the
// leader, on a connection pool of conns.
func (c *testCluster) httpBackend(b *testing.B, leader, conns int) api.Backend {
	b.Helper()
	addrs := append([]string{c.httpAddrs[leader]}, slices.Delete(slices.Clone(c.httpAddrs), leader, leader+1)...)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns}}
	cl, err := client.NewClient(addrs, client.WithHTTPClient(hc))
	if err != nil {
		b.Fatal(err)
	}
	return cl
}

// benchClientCounts are the sub-benchmarks' numbers of clients.
var benchClientCounts = []int{1, 16, 64}

// BenchmarkCluster measures pairs through the leader's in-process API.
func BenchmarkCluster(b *testing.B) {
	c, l := newBenchCluster(b)
	backend := api.Backend(c.nodes[l])
	runClusterBenches(b, func(int) api.Backend { return backend })
}

// BenchmarkClusterHTTP measures pairs through the HTTP API.
func BenchmarkClusterHTTP(b *testing.B) {
	c, l := newBenchCluster(b, withHTTP)
	runClusterBenches(b, func(clients int) api.Backend { return c.httpBackend(b, l, clients+8) })
}

func runClusterBenches(b *testing.B, backend func(clients int) api.Backend) {
	for _, n := range benchClientCounts {
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) { benchPairs(b, backend(n), n, false) })
	}
	b.Run("contended/clients=16", func(b *testing.B) { benchPairs(b, backend(16), 16, true) })
}

// benchPairs runs b.N pairs spread over clients, each client with its own
// session, on one lock each or (contended) on one lock for all.
func benchPairs(b *testing.B, backend api.Backend, clients int, contended bool) {
	b.ReportAllocs()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Lock names are unique per invocation of the benchmark function.
	run := time.Now().UnixNano()
	sessions := make([]*session.Session, clients)
	for i := range sessions {
		s, err := session.Open(ctx, backend, session.TTL(15*time.Second), session.LockDelay(api.NoLockDelay))
		if err != nil {
			b.Fatalf("open session: %v", err)
		}
		sessions[i] = s
	}
	defer func() {
		for _, s := range sessions {
			_ = s.Close(ctx)
		}
	}()
	lockName := func(i int) string {
		if contended {
			return "bench/" + strconv.FormatInt(run, 10) + "/contended"
		}
		return fmt.Sprintf("bench/%d/%d", run, i)
	}

	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		lats    = make([][]time.Duration, clients)
		errOnce sync.Once
		failed  error
	)
	b.ResetTimer()
	start := time.Now()
	for i := range clients {
		wg.Add(1)
		go pprof.Do(ctx, pprof.Labels("role", "client"), func(ctx context.Context) {
			defer wg.Done()
			s, name := sessions[i], lockName(i)
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				l, err := s.Lock(ctx, name)
				if err == nil {
					err = l.Unlock(ctx)
				}
				if err != nil {
					errOnce.Do(func() { failed = err })
					return
				}
				lats[i] = append(lats[i], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if failed != nil {
		b.Fatalf("pair: %v", failed)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		b.Fatal("benchmark timed out")
	}
	all := slices.Concat(lats...)
	slices.Sort(all)
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "pairs/s")
	b.ReportMetric(pctMs(all, 0.50), "p50-ms")
	b.ReportMetric(pctMs(all, 0.99), "p99-ms")
}

// pctMs returns the nearest-rank p-quantile of sorted d in milliseconds.
func pctMs(d []time.Duration, p float64) float64 {
	if len(d) == 0 {
		return 0
	}
	i := min(len(d)-1, max(0, int(p*float64(len(d))+0.999999)-1))
	return float64(d[i]) / float64(time.Millisecond)
}
