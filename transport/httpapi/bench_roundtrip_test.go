package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/transport/client"
	"github.com/raftlock/raftlock/transport/httpapi/httpapitest"
)

// The transport's hot-path benchmarks: the cost of one request through the
// HTTP/JSON API without a cluster, against the fake service (with the
// request histogram on, as on a node), by the size of the value an acquire
// carries.
//
//	go test -run '^$' -bench 'Roundtrip|ServeHTTP' -benchmem ./transport
//
// BenchmarkRoundtrip is one acquire+release pair through the Go Client and
// the Server over real TCP on 127.0.0.1 (client and server allocations
// together); BenchmarkServeHTTP is one request handed to the Server's
// ServeHTTP directly (the server's share alone).

// benchValueSizes are the sizes of the value of the benchmarks' acquires.
var benchValueSizes = []int{0, 256, api.MaxValueBytes}

// metricsFake is the fake service with a registry, so that the server
// observes its request histogram as on a node.
type metricsFake struct {
	*httpapitest.Fake
	reg *prometheus.Registry
}

func (m metricsFake) MetricsRegisterer() prometheus.Registerer { return m.reg }
func (m metricsFake) MetricsOpen() bool                        { return true }
func (m metricsFake) Metrics(context.Context, string) (prometheus.Gatherer, error) {
	return m.reg, nil
}

func newBenchService() metricsFake {
	return metricsFake{Fake: httpapitest.New("n1"), reg: prometheus.NewRegistry()}
}

func BenchmarkRoundtrip(b *testing.B) {
	for _, size := range benchValueSizes {
		b.Run(fmt.Sprintf("value=%d", size), func(b *testing.B) {
			svc := newBenchService()
			ts := httptest.NewServer(NewServer(svc))
			defer ts.Close()
			c, err := client.NewClient([]string{hostOf(ts)})
			if err != nil {
				b.Fatal(err)
			}
			defer c.CloseIdleConnections()
			ctx := context.Background()
			info, err := c.OpenSession(ctx, api.OpenRequest{Name: "bench", TTL: time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			value := strings.Repeat("v", size)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := c.Acquire(ctx, api.AcquireRequest{Name: "bench/lock", Session: info.ID, Holder: "h1", Value: value}); err != nil {
					b.Fatal(err)
				}
				if err := c.Release(ctx, api.ReleaseRequest{Name: "bench/lock", Session: info.ID, Holder: "h1"}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRoundtripKeepAlive is one keepalive through the Client and the
// Server over TCP.
func BenchmarkRoundtripKeepAlive(b *testing.B) {
	svc := newBenchService()
	ts := httptest.NewServer(NewServer(svc))
	defer ts.Close()
	c, err := client.NewClient([]string{hostOf(ts)})
	if err != nil {
		b.Fatal(err)
	}
	defer c.CloseIdleConnections()
	ctx := context.Background()
	info, err := c.OpenSession(ctx, api.OpenRequest{Name: "bench", TTL: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.KeepAlive(ctx, info.ID); err != nil {
			b.Fatal(err)
		}
	}
}

// nopWriter is the cheapest http.ResponseWriter: it keeps the status only.
type nopWriter struct {
	h      http.Header
	status int
}

func (w *nopWriter) Header() http.Header { return w.h }
func (w *nopWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return len(p), nil
}
func (w *nopWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func BenchmarkServeHTTP(b *testing.B) {
	for _, size := range benchValueSizes {
		b.Run(fmt.Sprintf("value=%d", size), func(b *testing.B) {
			svc := newBenchService()
			srv := NewServer(svc)
			info, err := svc.OpenSession(context.Background(), api.OpenRequest{Name: "bench", TTL: time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			acquire := []byte(fmt.Sprintf(`{"name":"bench/lock","session":%q,"holder":"h1","value":%q}`, info.ID, strings.Repeat("v", size)))
			release := []byte(fmt.Sprintf(`{"name":"bench/lock","session":%q,"holder":"h1"}`, info.ID))
			serve := func(path string, body []byte) {
				req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1"+path, bytes.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				w := &nopWriter{h: http.Header{}}
				srv.ServeHTTP(w, req)
				if w.status != http.StatusOK {
					b.Fatalf("%s: status %d", path, w.status)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				serve("/v1/acquire", acquire)
				serve("/v1/release", release)
			}
		})
	}
}
