package httpapi

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/transport/httpapi/httpapitest"
)

// dialCounter is a follower's service that counts the connections it
// opens to its peers, and caps the blocking queries it forwards at max
// (0: no cap), counting how many it holds.
type dialCounter struct {
	*httpapitest.Fake
	dials    atomic.Int64
	max      int
	mu       sync.Mutex
	admitted int
}

func (d *dialCounter) DialPeer(ctx context.Context, network, addr string) (net.Conn, error) {
	d.dials.Add(1)
	return d.Fake.DialPeer(ctx, network, addr)
}

func (d *dialCounter) AdmitForwardedQuery(string) (func(), error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.max > 0 && d.admitted >= d.max {
		return nil, api.Errorf(api.CodeResourceExhausted, "this node serves its limit of %d blocking queries (watches)", d.max)
	}
	d.admitted++
	var once sync.Once
	return func() {
		once.Do(func() {
			d.mu.Lock()
			defer d.mu.Unlock()
			d.admitted--
		})
	}, nil
}

func (d *dialCounter) held() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.admitted
}

// followerOf serves a follower's API whose leader is leader's peer port
// (peer), and returns its address and service.
func followerOf(t *testing.T, peer string, max int) (string, *dialCounter) {
	t.Helper()
	f := &dialCounter{Fake: httpapitest.New("n2"), max: max}
	f.SetLeader(api.LeaderInfo{ID: "n1", HTTPAddr: "127.0.0.1:1", PeerAddr: peer, Term: 3})
	return serveConfigured(t, NewServer(f), time.Minute, ReadTimeout, nil), f
}

// watchVia sends a watch of lock name that waits for wait to addr.
func watchVia(ctx context.Context, hc *http.Client, addr, name, wait string) (int, error) {
	url := fmt.Sprintf("http://%s/v1/lock?name=%s&index=%d&wait=%s", addr, name, 1<<40, wait)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// A follower forwards to the leader's peer port over HTTP/2: 300 watches
// waiting on the leader through one follower share a few connections
// (ForwardConnsPerLeader and the protocol probe), where HTTP/1.1 opened
// one each, and an acquire through the follower is answered meanwhile.
func TestFollowerForwardsOverAFewMultiplexedConnections(t *testing.T) {
	leader := httpapitest.New("n1")
	peer := string(newPeerPort(t, leader).Transport.LocalAddr())
	addr, follower := followerOf(t, peer, 0)
	ctx := testCtx(t)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 400}}
	defer hc.CloseIdleConnections()
	const n = 300
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = watchVia(wctx, hc, addr, fmt.Sprintf("w/%d", i), "1m")
		}()
	}
	eventually(t, 10*time.Second, "every watch waiting on the leader", func() error {
		if got := leader.Calls("WatchLock"); got != n {
			return fmt.Errorf("%d watches reached the leader, want %d", got, n)
		}
		return nil
	})
	c := newTestClient(t, addr)
	s, err := c.OpenSession(ctx, api.OpenRequest{Name: "via-follower"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(ctx, api.AcquireRequest{Name: "a", Session: s.ID, Holder: "h"}); err != nil {
		t.Fatalf("an acquire through the follower while %d watches wait: %v", n, err)
	}
	dials := follower.dials.Load()
	t.Logf("%d watches and an acquire forwarded over %d connections to the leader's peer port", n, dials)
	if dials > ForwardConnsPerLeader+1 {
		t.Fatalf("the follower opened %d connections to the leader for %d requests, want at most %d", dials, n+2, ForwardConnsPerLeader+1)
	}
	cancel()
	wg.Wait()
}

// A follower counts the blocking queries it forwards against its caps
// before forwarding (QueryAdmitter): one past the cap is answered
// resource_exhausted there, and never reaches the leader; each ends its
// count however it ends: answered (its wait passed), cancelled by its
// client, or its client's connection dropped.
func TestFollowerCapsTheWatchesItForwardsAndReleasesThemOnEveryPath(t *testing.T) {
	leader := httpapitest.New("n1")
	peer := string(newPeerPort(t, leader).Transport.LocalAddr())
	addr, follower := followerOf(t, peer, 2)
	ctx := testCtx(t)
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	held := func(want int) {
		t.Helper()
		eventually(t, 10*time.Second, fmt.Sprintf("%d forwarded watches counted", want), func() error {
			if got := follower.held(); got != want {
				return fmt.Errorf("%d counted", got)
			}
			return nil
		})
	}
	start := func(ctx context.Context, wait string) chan error {
		done := make(chan error, 1)
		go func() {
			status, err := watchVia(ctx, hc, addr, "w", wait)
			if err == nil && status != http.StatusOK {
				err = fmt.Errorf("HTTP %d", status)
			}
			done <- err
		}()
		return done
	}
	// Answered: a watch whose wait passes.
	if err := <-start(ctx, "1s"); err != nil {
		t.Fatalf("a watch answered after its wait: %v", err)
	}
	held(0)
	// Cancelled: two watches fill the cap, a third is refused and never
	// forwarded; cancelling them frees it.
	c1, cancel1 := context.WithCancel(ctx)
	w1, w2 := start(c1, "1m"), start(c1, "1m")
	held(2)
	before := leader.Calls("WatchLock")
	status, err := watchVia(ctx, hc, addr, "w", "1m")
	if err != nil || status != http.StatusTooManyRequests {
		t.Fatalf("a third watch: HTTP %d, %v; want 429", status, err)
	}
	if got := leader.Calls("WatchLock"); got != before {
		t.Fatalf("the refused watch reached the leader (%d calls, %d before)", got, before)
	}
	cancel1()
	<-w1
	<-w2
	held(0)
	// Dropped: a client's connection closed mid-wait.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "GET /v1/lock?name=w&index=%d&wait=1m HTTP/1.1\r\nHost: x\r\n\r\n", 1<<40)
	held(1)
	c.Close()
	held(0)
}

// A follower forwards to a peer port that speaks HTTP/1.1 only (a member
// of an older build, during a rolling upgrade) over HTTP/1.1: the probe
// tells, and the request is answered.
func TestFollowerForwardsOverHTTP1ToAnOlderPeerPort(t *testing.T) {
	leader := httpapitest.New("n1")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: NewServer(leader), ErrorLog: log.New(io.Discard, "", 0)}
	var h1 http.Protocols
	h1.SetHTTP1(true)
	srv.Protocols = &h1
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	addr, _ := followerOf(t, ln.Addr().String(), 0)
	c := newTestClient(t, addr)
	ctx := testCtx(t)
	s, err := c.OpenSession(ctx, api.OpenRequest{Name: "via-follower"})
	if err != nil {
		t.Fatalf("open through a follower to an HTTP/1.1-only leader: %v", err)
	}
	if _, err := c.Acquire(ctx, api.AcquireRequest{Name: "a", Session: s.ID, Holder: "h"}); err != nil {
		t.Fatalf("acquire through a follower to an HTTP/1.1-only leader: %v", err)
	}
	if n := leader.Calls("Acquire"); n != 1 {
		t.Fatalf("the leader served %d acquires, want 1", n)
	}
}

// eventually polls cond until it holds, failing the test with its last
// error after timeout: for counts another goroutine's requests move.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, timeout, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
