package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/cmd/internal/proccluster"
	"github.com/raftlock/raftlock/transport/client"
)

// watchBurst is a burst of n watches of one held lock (GET
// /v1/lock?index=) sent at once to addr over HTTP/2 with a token's
// secret: each waits for a change that never comes until ctx ends. It counts the answers
// by code.
type watchBurst struct {
	refused  atomic.Int64 // resource_exhausted (429)
	answered atomic.Int64 // any other answer before ctx ended
	first    atomic.Value // the status of the first other answer
	failed   atomic.Int64 // requests that failed before ctx ended
	firstErr atomic.Value // the first of their errors
	wg       sync.WaitGroup
	hc       *http.Client
}

func startWatchBurst(ctx context.Context, t *testing.T, addr, secret, name string, n int, index uint64) *watchBurst {
	t.Helper()
	b := &watchBurst{hc: &http.Client{Transport: &http.Transport{Protocols: client.HTTP2Only(), MaxConnsPerHost: 128}}}
	for range n {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			url := fmt.Sprintf("http://%s/v1/lock?name=%s&index=%d&wait=5m", addr, name, index)
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return
			}
			req.Header.Set("Authorization", "Bearer "+secret)
			resp, err := b.hc.Do(req)
			if err != nil {
				if ctx.Err() == nil && b.failed.Add(1) == 1 {
					b.firstErr.Store(err.Error())
				}
				return
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusTooManyRequests {
				b.refused.Add(1)
			} else if ctx.Err() == nil {
				if b.answered.Add(1) == 1 {
					b.first.Store(resp.Status)
				}
			}
		}()
	}
	t.Cleanup(func() {
		b.wg.Wait()
		b.hc.CloseIdleConnections()
	})
	return b
}

// lockIndex reads the X-Raftlock-Index of a lock's state at addr.
func lockIndex(ctx context.Context, t *testing.T, addr, secret, name string) uint64 {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/lock?name="+name, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	idx, err := strconv.ParseUint(resp.Header.Get(api.HeaderIndex), 10, 64)
	if err != nil {
		t.Fatalf("index of GET /v1/lock (status %d): %v", resp.StatusCode, err)
	}
	return idx
}

// establishedTo counts the established TCP connections whose local port
// is addr's (from /proc/net/tcp and tcp6): the connections a node
// listening on addr holds open to its clients.
func establishedTo(t *testing.T, addr string) int {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(":%04X", p)
	n := 0
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) > 3 && strings.HasSuffix(fs[1], want) && fs[3] == "01" {
				n++
			}
		}
		fh.Close()
	}
	return n
}

// burstCluster starts a three-node --acl cluster with small caps on
// blocking queries and returns it with an admin client, a read-only
// token's secret and a writer's client.
func burstCluster(ctx context.Context, t *testing.T) (*proccluster.Cluster, *client.Client, string, *client.Client) {
	t.Helper()
	c, admin := aclCluster(ctx, t, "--max-blocking-queries", "400", "--max-blocking-queries-per-token", "200")
	ac := c.Client(client.WithToken(admin))
	reader, err := ac.CreateToken(ctx, api.TokenRequest{Name: "reader", Rules: []string{"read:"}})
	if err != nil {
		t.Fatal(err)
	}
	writer, err := ac.CreateToken(ctx, api.TokenRequest{Name: "writer", Rules: []string{"write:"}})
	if err != nil {
		t.Fatal(err)
	}
	return c, ac, reader.Secret, c.Client(client.WithToken(writer.Secret))
}

// acquireOnce opens a session and takes one lock, and releases it
// unless keep.
func acquireOnce(ctx context.Context, t *testing.T, cl *client.Client, name string, keep bool) {
	t.Helper()
	s, err := cl.OpenSession(ctx, api.OpenRequest{TTL: api.MaxTTL, Name: "legit"})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if _, err := cl.Acquire(ctx, api.AcquireRequest{Name: name, Session: s.ID, Holder: "h"}); err != nil {
		t.Fatalf("acquire: %v", err)
	}
	if keep {
		return
	}
	if err := cl.Release(ctx, api.ReleaseRequest{Name: name, Session: s.ID, Holder: "h"}); err != nil {
		t.Fatalf("release: %v", err)
	}
}

// writeLoop takes and releases a lock through cl until ctx ends, as a
// legitimate client would meanwhile: every change wakes the watches.
// wait returns how many it took, and the first error other than ctx's.
func writeLoop(ctx context.Context, t *testing.T, cl *client.Client, name string) (wait func() (int, error)) {
	t.Helper()
	s, err := cl.OpenSession(ctx, api.OpenRequest{TTL: time.Minute, Name: "writer"})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		for ctx.Err() == nil {
			_, err := cl.Acquire(ctx, api.AcquireRequest{Name: name, Session: s.ID, Holder: "h"})
			if err == nil {
				err = cl.Release(ctx, api.ReleaseRequest{Name: name, Session: s.ID, Holder: "h"})
			}
			if err != nil && ctx.Err() == nil && r.err == nil {
				r.err = err
			}
			if err == nil {
				r.n++
			}
		}
		done <- r
	}()
	return func() (int, error) {
		r := <-done
		return r.n, r.err
	}
}

// acquireP50 takes and releases lock name k times through cl, one
// session, and returns the median time of a pair (a figure to print).
func acquireP50(ctx context.Context, t *testing.T, cl *client.Client, name string, k int) time.Duration {
	t.Helper()
	s, err := cl.OpenSession(ctx, api.OpenRequest{TTL: time.Minute, Name: "timed"})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	ds := make([]time.Duration, 0, k)
	for range k {
		t0 := time.Now()
		if _, err := cl.Acquire(ctx, api.AcquireRequest{Name: name, Session: s.ID, Holder: "h"}); err != nil {
			t.Fatalf("acquire: %v", err)
		}
		if err := cl.Release(ctx, api.ReleaseRequest{Name: name, Session: s.ID, Holder: "h"}); err != nil {
			t.Fatalf("release: %v", err)
		}
		ds = append(ds, time.Since(t0))
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// TestReadOnlyBurstOfWatchesCannotTakeLeadership pins issue 40 item 3: a
// read-only token's burst of 3,000 single-lock watches against the
// leader is capped (--max-blocking-queries-per-token 200: every watch
// past it is answered resource_exhausted at once), while a writer takes
// and releases a lock in a loop (each change wakes watches): the leader
// keeps its term, its RSS stays bounded, and the writer never fails.
func TestReadOnlyBurstOfWatchesCannotTakeLeadership(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs raftlockd processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, ac, reader, writer := burstCluster(ctx, t)
	before, err := ac.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	li, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	addr := c.Nodes[li].HTTPAddr
	rss0 := procKB(t, c.PID(li), "VmRSS")
	const n, perToken = 3000, 200
	bctx, bcancel := context.WithCancel(ctx)
	defer bcancel()
	acquireOnce(ctx, t, writer, "burst/held", true)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	writes := writeLoop(wctx, t, writer, "legit/loop")
	b := startWatchBurst(bctx, t, addr, reader, "burst/held", n, lockIndex(ctx, t, addr, reader, "burst/held"))
	proccluster.Eventually(t, time.Minute, "every watch past the token's cap refused", func() error {
		if got := b.refused.Load(); got != n-perToken {
			return fmt.Errorf("%d refused, want %d (%d answered otherwise, first %v; %d failed, first %v)", got, n-perToken, b.answered.Load(), b.first.Load(), b.failed.Load(), b.firstErr.Load())
		}
		return nil
	})
	acquireOnce(ctx, t, writer, "legit/leader", false)
	wcancel()
	took, werr := writes()
	rss := procKB(t, c.PID(li), "VmRSS")
	after, err := ac.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("leader %s: %d watches sent, %d refused, %d answered otherwise; RSS %d -> %d kB; term %d -> %d; writer took %d locks meanwhile (error %v)",
		before.Leader, n, b.refused.Load(), b.answered.Load(), rss0, rss, before.Term, after.Term, took, werr)
	if werr != nil {
		t.Fatalf("the writer's acquire or release under the burst: %v", werr)
	}
	if after.Leader != before.Leader || after.Term != before.Term {
		t.Fatalf("leadership changed under the burst: %s term %d -> %s term %d", before.Leader, before.Term, after.Leader, after.Term)
	}
	if b.answered.Load() != 0 {
		t.Fatalf("%d watches answered otherwise than refused before their wait", b.answered.Load())
	}
	if rss > 256<<10 {
		t.Fatalf("leader RSS %d kB under the burst, want under 256 MB", rss)
	}
	bcancel()
}

// TestBurstOfWatchesThroughAFollowerStaysOffThePeerPort pins issue 40
// item 4: the same burst sent to a follower is capped there
// (--max-blocking-queries-per-token), the watches it forwards share a
// few multiplexed connections to the leader's peer port instead of one
// each, and a writer's acquire through that follower still succeeds.
func TestBurstOfWatchesThroughAFollowerStaysOffThePeerPort(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs raftlockd processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, ac, reader, writer := burstCluster(ctx, t)
	before, err := ac.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	li, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fi := (li + 1) % len(c.Nodes)
	faddr := c.Nodes[fi].HTTPAddr
	peer := c.Flag(li, "--raft-addr")
	conns0 := establishedTo(t, peer)
	const n, perToken = 3000, 200
	bctx, bcancel := context.WithCancel(ctx)
	defer bcancel()
	acquireOnce(ctx, t, writer, "burst/held", true)
	b := startWatchBurst(bctx, t, faddr, reader, "burst/held", n, lockIndex(ctx, t, faddr, reader, "burst/held"))
	proccluster.Eventually(t, time.Minute, "every watch past the token's cap refused", func() error {
		if got := b.refused.Load(); got != n-perToken {
			return fmt.Errorf("%d refused, want %d (%d answered otherwise, first %v; %d failed, first %v)", got, n-perToken, b.answered.Load(), b.first.Load(), b.failed.Load(), b.firstErr.Load())
		}
		return nil
	})
	wtok, err := ac.CreateToken(ctx, api.TokenRequest{Name: "via-follower", Rules: []string{"write:"}})
	if err != nil {
		t.Fatal(err)
	}
	via, err := client.NewClient([]string{faddr}, client.WithToken(wtok.Secret))
	if err != nil {
		t.Fatal(err)
	}
	defer via.CloseIdleConnections()
	acquireOnce(ctx, t, via, "legit/follower", false)
	p50 := acquireP50(ctx, t, via, "legit/follower", 50)
	conns := establishedTo(t, peer)
	after, err := ac.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("via follower %s: %d watches sent, %d refused; leader peer-port connections %d -> %d; term %d -> %d; acquire+release through it meanwhile: p50 %v",
		c.Nodes[fi].ID, n, b.refused.Load(), conns0, conns, before.Term, after.Term, p50)
	// Raft's own connections, the other follower's and a few forwarding
	// connections: far below one per watch held (200).
	if conns > conns0+16 {
		t.Fatalf("leader's peer port holds %d connections (%d before the burst): forwarding opened one per watch", conns, conns0)
	}
	if after.Term != before.Term {
		t.Fatalf("leadership changed under the burst: term %d -> %d", before.Term, after.Term)
	}
	bcancel()
}
