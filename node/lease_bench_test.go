package node

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// leaseBenchSizes are the table sizes of the lease benchmarks.
var leaseBenchSizes = []int{1_000, 10_000, 100_000}

// benchIDs returns n session ids shaped like real ones (32 hex digits).
func benchIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%032x", i*7919+1)
	}
	return ids
}

// BenchmarkLeaseKeepAliveSteady is the leader's lease table under the
// keepalive load of n sessions with a 15 s ttl, each kept alive every
// ttl/3 as session.Session does, with the expiry scan running every 50 ms
// of (fake) time as the leader's ticker does. One op is one keepalive, its
// share of the scans included; nothing expires.
func BenchmarkLeaseKeepAliveSteady(b *testing.B) {
	const ttl = 15 * time.Second
	for _, n := range leaseBenchSizes {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			now := time.Unix(1000, 0)
			lt := newLeaseTable(func() time.Time { return now })
			ids := benchIDs(n)
			for _, id := range ids {
				lt.Add(id, ttl)
			}
			step := ttl / 3 / time.Duration(n) // every session once per ttl/3
			scanEvery := int(50 * time.Millisecond / step)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				now = now.Add(step)
				if _, ok := lt.KeepAlive(ids[i%n]); !ok {
					b.Fatalf("keepalive %d refused", i)
				}
				if scanEvery == 0 || i%scanEvery == 0 {
					if got := lt.Expired(256); len(got) != 0 {
						b.Fatalf("expired %v although kept alive", got)
					}
				}
			}
		})
	}
}

// BenchmarkLeaseAdd tracks n sessions in an empty table (what a leader
// does as the opens apply) and reports the heap bytes each tracked session
// keeps (B/session; the ids themselves are not counted: the table shares
// them with the state machine).
func BenchmarkLeaseAdd(b *testing.B) {
	for _, n := range leaseBenchSizes {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			ids := benchIDs(n)
			now := time.Unix(1000, 0)
			var perSession float64
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				var m0, m1 runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&m0)
				lt := newLeaseTable(func() time.Time { return now })
				for _, id := range ids {
					lt.Add(id, 15*time.Second)
				}
				runtime.GC()
				runtime.ReadMemStats(&m1)
				perSession = float64(m1.HeapAlloc-m0.HeapAlloc) / float64(n)
				runtime.KeepAlive(lt)
			}
			b.ReportMetric(perSession, "B/session")
		})
	}
}
