package fenceproxy

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
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

// BenchmarkFenceRaise measures one raise of a mark (a new grant's first
// request) with names locks already kept: FileFence rewrites its whole
// state file for it, Store appends one record to its log (and now and
// then compacts). It reports the bytes on disk after the run.
func BenchmarkFenceRaise(b *testing.B) {
	type fence interface {
		Check(sequencer.Sequencer) error
		Close() error
	}
	kinds := []struct {
		name string
		open func(path string) (fence, error)
	}{
		{"filefence", func(path string) (fence, error) { return sequencer.OpenFileFence(path) }},
		{"store", func(path string) (fence, error) { return OpenStore(path, StoreOptions{}) }},
	}
	for _, k := range kinds {
		for _, names := range []int{100, 1000, 4000} {
			b.Run(fmt.Sprintf("%s/names=%d", k.name, names), func(b *testing.B) {
				b.ReportAllocs()
				dir := b.TempDir()
				path := filepath.Join(dir, "fence.json")
				f, err := k.open(path)
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				tok := sequencer.Token(1)
				check := func(i int) {
					tok++
					s := sequencer.Sequencer{Mode: sequencer.Exclusive, Token: tok, Name: fmt.Sprintf("jobs/%06d", i%names)}
					if err := f.Check(s); err != nil {
						b.Fatal(err)
					}
				}
				for i := range names {
					check(i)
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					check(i)
				}
				b.StopTimer()
				var size int64
				for _, p := range []string{path, path + ".log"} {
					if fi, err := os.Stat(p); err == nil {
						size += fi.Size()
					}
				}
				b.ReportMetric(float64(size), "state-bytes")
			})
		}
	}
}

// BenchmarkHolderWhileNewNamesFlood measures a holder's request (its
// sequencer raises nothing) through the proxy while another client sends
// a stream of first requests of new locks, each raising a mark: with
// FileFence every one rewrote the whole state file under the proxy's one
// mutex, which the holder waited for; with Store and the proxy's per-lock
// lanes the holder waits for none of them. It reports the holder's p50
// and p99.
func BenchmarkHolderWhileNewNamesFlood(b *testing.B) {
	kinds := []struct {
		name string
		open func(path string) (Fence, func(), error)
	}{
		{"filefence", func(path string) (Fence, func(), error) {
			f, err := sequencer.OpenFileFence(path)
			return f, func() { f.Close() }, err
		}},
		{"store", func(path string) (Fence, func(), error) {
			f, err := OpenStore(path, StoreOptions{MaxNames: 1 << 20})
			return f, func() { f.Close() }, err
		}},
	}
	for _, k := range kinds {
		for _, seeded := range []int{0, 4000} {
			b.Run(fmt.Sprintf("%s/names=%d", k.name, seeded), func(b *testing.B) {
				b.ReportAllocs()
				backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.WriteHeader(http.StatusNoContent)
				}))
				defer backend.Close()
				up, _ := url.Parse(backend.URL)
				f, closeFence, err := k.open(filepath.Join(b.TempDir(), "fence.json"))
				if err != nil {
					b.Fatal(err)
				}
				defer closeFence()
				for i := range seeded {
					if err := f.Check(sequencer.Sequencer{Mode: sequencer.Exclusive, Token: sequencer.Token(i + 1), Name: fmt.Sprintf("seed/%06d", i)}); err != nil {
						b.Fatal(err)
					}
				}
				p, err := New(up, f, Options{})
				if err != nil {
					b.Fatal(err)
				}
				proxy := httptest.NewServer(p)
				defer proxy.Close()
				do := func(hc *http.Client, seq string) time.Duration {
					req, _ := http.NewRequest(http.MethodPut, proxy.URL+"/items/1", nil)
					req.Header.Set(sequencer.Header, seq)
					start := time.Now()
					resp, err := hc.Do(req)
					if err != nil {
						b.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					return time.Since(start)
				}
				stop := make(chan struct{})
				flooded := make(chan struct{})
				go func() {
					defer close(flooded)
					hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						do(hc, fmt.Sprintf("rl1:x:%d:flood/%d", 1<<40+i, i))
					}
				}()
				hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
				do(hc, "rl1:x:42:jobs/a")
				lat := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					lat = append(lat, do(hc, "rl1:x:42:jobs/a"))
				}
				b.StopTimer()
				close(stop)
				<-flooded
				slices.Sort(lat)
				q := func(f float64) float64 { return float64(lat[int(f*float64(len(lat)-1))].Microseconds()) }
				b.ReportMetric(q(0.5), "holder-p50-µs")
				b.ReportMetric(q(0.99), "holder-p99-µs")
			})
		}
	}
}
