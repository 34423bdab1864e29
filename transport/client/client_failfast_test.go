package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/transport/httpapi"
	"github.com/raftlock/raftlock/transport/httpapi/httpapitest"
)

// With WithFailFast, a call whose every address refuses the connection
// fails with unreachable after about d, naming each address and the cause
// once; without it, the call retries until its ctx ends (no_leader).
func TestFailFastUnreachable(t *testing.T) {
	a, b := httpapitest.ClosedAddr(t), httpapitest.ClosedAddr(t)
	for _, tc := range []struct {
		addrs []string
		want  string
	}{
		{[]string{a}, "no node answered at " + a + " (connection refused)"},
		{[]string{a, b}, "no node answered at " + a + ", " + b + " (connection refused)"},
	} {
		c, err := NewClient(tc.addrs, WithFailFast(300*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		start := time.Now()
		_, err = c.Cluster(ctx)
		took := time.Since(start)
		cancel()
		var e *api.Error
		if !errors.Is(err, api.ErrUnreachable) || !errors.As(err, &e) || e.Message != tc.want {
			t.Fatalf("%v: error %v; want unreachable: %s", tc.addrs, err, tc.want)
		}
		if took < 300*time.Millisecond || took > 3*time.Second {
			t.Errorf("%v: failed after %v; want about 300ms", tc.addrs, took)
		}
	}

	// The default: retry until the ctx ends.
	c, err := NewClient([]string{a})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	if _, err := c.Cluster(ctx); !errors.Is(err, api.ErrNoLeader) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("without fail-fast: %v; want no_leader after the ctx's deadline", err)
	}
}

// A node that answers, even no_leader, is reachable: a fail-fast call
// keeps retrying until its ctx ends; and one that connects to a second
// address that serves succeeds.
func TestFailFastReachableNodes(t *testing.T) {
	dead := httpapitest.ClosedAddr(t)
	noLeader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":{"code":"no_leader","message":"no leader now"}}`))
	}))
	defer noLeader.Close()
	c, err := NewClient([]string{dead, strings.TrimPrefix(noLeader.URL, "http://")},
		WithFailFast(100*time.Millisecond), WithRetryBackoff(time.Millisecond, 5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	if _, err := c.Cluster(ctx); errors.Is(err, api.ErrUnreachable) || !errors.Is(err, api.ErrNoLeader) {
		t.Fatalf("one node answering no_leader: %v; want no_leader at the ctx's end, not unreachable", err)
	}

	srv := httptest.NewServer(httpapi.NewServer(httpapitest.New("n1")))
	defer srv.Close()
	c, err = NewClient([]string{dead, strings.TrimPrefix(srv.URL, "http://")}, WithFailFast(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Cluster(ctx); err != nil {
		t.Fatalf("a dead address then a live one: %v", err)
	}
}

// A node that comes up within d is used: the run of failed dials ends
// when a connection opens.
func TestFailFastNodeComingUp(t *testing.T) {
	addr := httpapitest.ClosedAddr(t)
	c, err := NewClient([]string{addr}, WithFailFast(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	srv := &http.Server{Handler: httpapi.NewServer(httpapitest.New("n1"))}
	defer srv.Close()
	time.AfterFunc(200*time.Millisecond, func() {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("listen again at %s: %v", addr, err)
			return
		}
		go srv.Serve(ln)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Cluster(ctx); err != nil {
		t.Fatalf("a node that came up within the fail-fast time: %v", err)
	}
}

// The unreachable error names every address once, with its cause, or the
// one cause once when all share it; it comes only once every address
// failed and the run lasted d.
func TestUnreachedMessage(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	noHost := &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "db.invalid", IsNotFound: true}}
	var u unreached
	u.note("a:1", refused)
	if e := u.check([]string{"a:1", "b:2"}, 0); e != nil {
		t.Fatalf("b:2 not tried yet: %v", e)
	}
	u.note("b:2", noHost)
	if e := u.check([]string{"a:1", "b:2"}, time.Hour); e != nil {
		t.Fatalf("before d: %v", e)
	}
	want := "no node answered at a:1 (connection refused), b:2 (lookup db.invalid: no such host)"
	if e := u.check([]string{"a:1", "b:2", "a:1"}, 0); e == nil || e.Code != api.CodeUnreachable || e.Message != want {
		t.Fatalf("got %v, want unreachable: %s", e, want)
	}
	u.note("b:2", nil) // connected: the run ends
	if e := u.check([]string{"a:1", "b:2"}, 0); e != nil {
		t.Fatalf("after a connection: %v", e)
	}
}
