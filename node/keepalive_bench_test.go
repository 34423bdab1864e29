package node

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
)

// BenchmarkLeaderKeepAlive is the leader's keepalive path in process
// (Node.KeepAlive: leadership confirmation and lease table, no HTTP) on
// the 3-node benchmark cluster, with n sessions open and 64 keepalives in
// flight at once. One op is one keepalive; ns/op and allocs/op count the
// whole process (three nodes: the followers' heartbeat answers too).
//
//	go test -run '^$' -bench BenchmarkLeaderKeepAlive -benchtime 100000x ./node
func BenchmarkLeaderKeepAlive(b *testing.B) {
	c, l := newBenchCluster(b)
	leader := c.nodes[l]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var ids []string
	for _, n := range []int{1_000, 10_000} {
		ids = openBenchSessions(b, ctx, leader, ids, n)
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			const inFlight = 64
			b.ReportAllocs()
			var next atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, inFlight)
			b.ResetTimer()
			for range inFlight {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := next.Add(1) - 1
						if i >= int64(b.N) {
							return
						}
						if _, err := leader.KeepAlive(ctx, ids[int(i)%len(ids)]); err != nil {
							errs <- fmt.Errorf("keepalive %d: %w", i, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			select {
			case err := <-errs:
				b.Fatal(err)
			default:
			}
		})
	}
}

// openBenchSessions opens sessions on leader (64 at a time) until ids
// holds n, with a TTL long enough to outlive the benchmark.
func openBenchSessions(b *testing.B, ctx context.Context, leader *Node, ids []string, n int) []string {
	b.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	var failed atomic.Value
	todo := make(chan struct{}, n)
	for range n - len(ids) {
		todo <- struct{}{}
	}
	close(todo)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range todo {
				info, err := leader.OpenSession(ctx, api.OpenRequest{TTL: 5 * time.Minute, LockDelay: api.NoLockDelay})
				if err != nil {
					failed.Store(err)
					return
				}
				mu.Lock()
				ids = append(ids, info.ID)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		b.Fatalf("open sessions: %v", err)
	}
	return ids
}
