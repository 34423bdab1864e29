package client

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/transport/httpapi/httpapitest"
)

// BenchmarkStreamRoundtrip is one acquire+release pair through the Client
// over the stream protocol against the fake service on loopback (client
// and server in one process, no cluster), by the number of sessions that
// run pairs at once over the one connection: the cost per pair of the
// protocol and of the server's request goroutines.
//
//	go test -run '^$' -bench StreamRoundtrip -benchmem ./transport/client
func BenchmarkStreamRoundtrip(b *testing.B) {
	for _, clients := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			n := newStreamNode(b, httpapitest.New("n1"))
			c, err := NewClient([]string{hostOf(n.http)})
			if err != nil {
				b.Fatal(err)
			}
			defer c.CloseIdleConnections()
			ctx := context.Background()
			ids := make([]string, clients)
			for i := range ids {
				info, err := c.OpenSession(ctx, api.OpenRequest{TTL: time.Minute})
				if err != nil {
					b.Fatal(err)
				}
				ids[i] = info.ID
			}
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			errs := make(chan error, clients)
			for i, id := range ids {
				wg.Add(1)
				go func() {
					defer wg.Done()
					name := fmt.Sprintf("bench/%d", i)
					// Client i runs pairs i, i+clients, ... so that b.N
					// pairs run in all.
					for k := i; k < b.N; k += clients {
						if _, err := c.Acquire(ctx, api.AcquireRequest{Name: name, Session: id, Holder: "h"}); err != nil {
							errs <- err
							return
						}
						if err := c.Release(ctx, api.ReleaseRequest{Name: name, Session: id, Holder: "h"}); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			close(errs)
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
			if n.overS.Load() == 0 {
				b.Fatal("no request went over the stream protocol")
			}
		})
	}
}
