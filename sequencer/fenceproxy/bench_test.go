package fenceproxy

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/raftlock/raftlock/sequencer"
)

// BenchmarkProxyOverhead measures what the proxy adds to one request on
// loopback: the same PUT, one at a time over a kept-alive connection,
// straight to a backend and through the proxy (a FileFence whose marks the
// sequencer does not raise, the steady state of one holder). It reports
// the p50 and p99 of both and the p99 the proxy adds (the aim: under 1 ms).
func BenchmarkProxyOverhead(b *testing.B) {
	for _, size := range []int{0, 1 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("body=%dB", size), func(b *testing.B) {
			b.ReportAllocs()
			backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.WriteHeader(http.StatusNoContent)
			}))
			defer backend.Close()
			up, _ := url.Parse(backend.URL)
			ff, err := sequencer.OpenFileFence(filepath.Join(b.TempDir(), "fence.json"))
			if err != nil {
				b.Fatal(err)
			}
			defer ff.Close()
			p, err := New(up, ff, Options{})
			if err != nil {
				b.Fatal(err)
			}
			proxy := httptest.NewServer(p)
			defer proxy.Close()
			body := bytes.Repeat([]byte("x"), size)
			hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
			do := func(base string) time.Duration {
				req, _ := http.NewRequest(http.MethodPut, base+"/items/1", bytes.NewReader(body))
				req.Header.Set(sequencer.Header, "rl1:x:42:jobs/a")
				start := time.Now()
				resp, err := hc.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusNoContent {
					b.Fatalf("HTTP %d", resp.StatusCode)
				}
				return time.Since(start)
			}
			do(backend.URL)
			do(proxy.URL)
			direct := make([]time.Duration, 0, b.N)
			via := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				direct = append(direct, do(backend.URL))
				via = append(via, do(proxy.URL))
			}
			b.StopTimer()
			slices.Sort(direct)
			slices.Sort(via)
			q := func(d []time.Duration, f float64) float64 {
				return float64(d[int(f*float64(len(d)-1))].Microseconds())
			}
			b.ReportMetric(q(direct, 0.5), "direct-p50-µs")
			b.ReportMetric(q(via, 0.5), "proxy-p50-µs")
			b.ReportMetric(q(direct, 0.99), "direct-p99-µs")
			b.ReportMetric(q(via, 0.99), "proxy-p99-µs")
			b.ReportMetric(q(via, 0.99)-q(direct, 0.99), "added-p99-µs")
		})
	}
}
