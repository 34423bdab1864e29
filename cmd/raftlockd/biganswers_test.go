package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/cmd/internal/proccluster"
	"github.com/raftlock/raftlock/transport/client"
)

// fillBigPrefix takes n locks under prefix through cl, each held with a
// value of api.MaxValueBytes after one earlier grant of the same value
// (so that each lock's state carries the value twice: holder and
// history), by 16 workers.
func fillBigPrefix(ctx context.Context, t *testing.T, cl *client.Client, prefix string, n int) {
	t.Helper()
	value := strings.Repeat("v", api.MaxValueBytes)
	const workers = 16
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := cl.OpenSession(ctx, api.OpenRequest{TTL: api.MaxTTL, Name: fmt.Sprintf("filler-%d", w)})
			if err != nil {
				errs <- fmt.Errorf("open: %w", err)
				return
			}
			for i := w; i < n; i += workers {
				name := fmt.Sprintf("%s%05d", prefix, i)
				for k := range 2 {
					if _, err := cl.Acquire(ctx, api.AcquireRequest{Name: name, Session: s.ID, Holder: "h", Value: value}); err != nil {
						errs <- fmt.Errorf("acquire %s: %w", name, err)
						return
					}
					if k == 0 {
						if err := cl.Release(ctx, api.ReleaseRequest{Name: name, Session: s.ID, Holder: "h"}); err != nil {
							errs <- fmt.Errorf("release %s: %w", name, err)
							return
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// readAllPages reads GET /v1/locks with query q from addr, and the pages
// that follow (after=next; a watch's reset pages too), retrying an
// answer of 429 (resource_exhausted); it returns the locks read, the
// pages and how many answers were 429.
func readAllPages(ctx context.Context, hc *http.Client, addr string, q url.Values) (locks, pages, refused int, err error) {
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/locks?"+q.Encode(), nil)
		if err != nil {
			return locks, pages, refused, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return locks, pages, refused, err
		}
		if resp.StatusCode == http.StatusTooManyRequests {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			refused++
			select {
			case <-time.After(50 * time.Millisecond):
			case <-ctx.Done():
				return locks, pages, refused, ctx.Err()
			}
			continue
		}
		var r api.LocksReply
		derr := json.NewDecoder(resp.Body).Decode(&r)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || derr != nil {
			return locks, pages, refused, fmt.Errorf("GET /v1/locks?%s: status %d (%v)", q.Encode(), resp.StatusCode, derr)
		}
		locks += len(r.Locks)
		pages++
		if r.Next == "" {
			return locks, pages, refused, nil
		}
		q.Set("after", r.Next)
		if q.Has("index") {
			q.Set("index", fmt.Sprint(r.Index))
		}
	}
}

// TestBigAnswersKeepTheLeadersMemoryBounded pins issue 40 item 6: with
// 2,000 locks of 4 KB values (twice each: holder and history) under one
// prefix, 40 concurrent listings and 40 concurrent prefix-watch resets of
// it, each read through its pages, keep the leader's peak RSS (VmHWM)
// under 512 MB, where the whole answers built at once took it past that;
// every reader sees every lock.
func TestBigAnswersKeepTheLeadersMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs raftlockd processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := proccluster.Start(t, proccluster.BuildDaemon(t), 1)
	li, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n, readers, prefix = 2000, 40, "big/"
	fillBigPrefix(ctx, t, c.Client(), prefix, n)
	pid := c.PID(li)
	hwm0 := procKB(t, pid, "VmHWM")
	hc := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 2 * readers, MaxIdleConnsPerHost: 2 * readers}}
	defer hc.CloseIdleConnections()
	type result struct {
		what                  string
		locks, pages, refused int
		err                   error
	}
	results := make(chan result, 2*readers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 2 * readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q, what := url.Values{"prefix": {prefix}}, "listing"
			if i%2 == 1 {
				q.Set("index", "0")
				what = "watch reset"
			}
			<-start
			l, p, r, err := readAllPages(ctx, hc, c.Nodes[li].HTTPAddr, q)
			results <- result{what, l, p, r, err}
		}()
	}
	close(start)
	wg.Wait()
	close(results)
	refused := 0
	for r := range results {
		if r.err != nil {
			t.Fatalf("a %s: %v", r.what, r.err)
		}
		if r.locks != n {
			t.Fatalf("a %s read %d locks in %d pages, want %d", r.what, r.locks, r.pages, n)
		}
		refused += r.refused
	}
	hwm := procKB(t, pid, "VmHWM")
	t.Logf("leader: peak RSS %d kB after filling %d locks, %d kB after %d listings and %d watch resets read at once (%d answers 429 meanwhile, retried)",
		hwm0, n, hwm, readers, readers, refused)
	if hwm > 512<<10 {
		t.Fatalf("leader peak RSS %d kB under %d listings and %d resets of %d locks, want under 512 MB", hwm, readers, readers, n)
	}
}
