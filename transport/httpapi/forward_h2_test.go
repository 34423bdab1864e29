package httpapi

import (
	"context"
	"fmt"
	"io"
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
