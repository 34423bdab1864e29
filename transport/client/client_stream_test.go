package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/transport/httpapi"
	"github.com/raftlock/raftlock/transport/httpapi/httpapitest"
	"github.com/raftlock/raftlock/transport/stream"
)

// streamNode serves f's API over HTTP (advertising the stream port) and
// over the stream protocol, on loopback, until the test ends. It counts
// the requests each protocol served.
type streamNode struct {
	http            *httptest.Server
	overHTTP, overS atomic.Int64
	// cancelled counts the stream requests whose context had ended when
	// their handler returned.
	cancelled atomic.Int64
}

func newStreamNode(t testing.TB, f *httpapitest.Fake) *streamNode {
	t.Helper()
	n := &streamNode{}
	h := httpapi.NewServer(f)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ss := &stream.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.overS.Add(1)
		h.ServeHTTP(w, r)
		if r.Context().Err() != nil {
			n.cancelled.Add(1)
		}
	})}
	go func() { _ = ss.Serve(ln) }()
	t.Cleanup(func() { ss.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	adv := stream.Advertise(h, port)
	n.http = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.overHTTP.Add(1)
		adv.ServeHTTP(w, r)
	}))
	t.Cleanup(n.http.Close)
	return n
}

// The calls of a session (open, acquire, keepalive, check of the
// sequencer, release, close) and the API's error answers are the same
// over HTTP and over the stream protocol: the same values, the same error
// codes. By default (over the stream protocol where the node serves it)
// only the first request goes over HTTP; WithStreamProtocol(false) sends
// all of them over HTTP.
func TestCallsAndErrorsAreTheSameOverBothProtocols(t *testing.T) {
	type outcome struct {
		token, checkValid string
		codes             []api.Code
	}
	run := func(t *testing.T, streamProto bool) (outcome, *streamNode) {
		n := newStreamNode(t, httpapitest.New("n1"))
		opts := []ClientOption{WithRetryBackoff(time.Millisecond, 5*time.Millisecond), WithStreamProtocol(streamProto)}
		c, err := NewClient([]string{hostOf(n.http)}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.CloseIdleConnections)
		ctx := testCtx(t)
		var o outcome
		s, err := c.OpenSession(ctx, api.OpenRequest{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		other, err := c.OpenSession(ctx, api.OpenRequest{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		g, err := c.Acquire(ctx, api.AcquireRequest{Name: "a", Session: s.ID, Holder: "h"})
		if err != nil {
			t.Fatal(err)
		}
		o.token = fmt.Sprint(g.Token)
		if _, err := c.KeepAlive(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
		chk, err := c.CheckSequencer(ctx, g.Sequencer.String())
		if err != nil {
			t.Fatal(err)
		}
		o.checkValid = map[bool]string{true: "valid", false: "stale"}[chk.Valid]
		// The error answers, in order: busy, wait timeout, not the holder,
		// no such session, a bad name.
		_, err = c.Acquire(ctx, api.AcquireRequest{Name: "a", Session: other.ID, Holder: "o"})
		o.codes = append(o.codes, api.CodeOf(err))
		_, err = c.Acquire(ctx, api.AcquireRequest{Name: "a", Session: other.ID, Holder: "o", Wait: 20 * time.Millisecond})
		o.codes = append(o.codes, api.CodeOf(err))
		err = c.Release(ctx, api.ReleaseRequest{Name: "a", Session: other.ID, Holder: "o"})
		o.codes = append(o.codes, api.CodeOf(err))
		_, err = c.KeepAlive(ctx, "no-such-session-0123")
		o.codes = append(o.codes, api.CodeOf(err))
		_, err = c.Acquire(ctx, api.AcquireRequest{Name: "", Session: s.ID, Holder: "h"})
		o.codes = append(o.codes, api.CodeOf(err))
		if err := c.Release(ctx, api.ReleaseRequest{Name: "a", Session: s.ID, Holder: "h"}); err != nil {
			t.Fatal(err)
		}
		if err := c.CloseSession(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
		return o, n
	}
	overHTTP, hn := run(t, false)
	overStream, sn := run(t, true)
	if overHTTP.token != overStream.token || overHTTP.checkValid != overStream.checkValid || len(overHTTP.codes) != len(overStream.codes) {
		t.Fatalf("over HTTP %+v, over the stream protocol %+v", overHTTP, overStream)
	}
	for i := range overHTTP.codes {
		if overHTTP.codes[i] != overStream.codes[i] || overHTTP.codes[i] == "" {
			t.Fatalf("error %d: over HTTP %q, over the stream protocol %q", i, overHTTP.codes[i], overStream.codes[i])
		}
	}
	if hn.overS.Load() != 0 {
		t.Fatalf("a client with WithStreamProtocol(false) sent %d requests over the stream protocol", hn.overS.Load())
	}
	if h, s := sn.overHTTP.Load(), sn.overS.Load(); h != 1 || s < 10 {
		t.Fatalf("by default: %d requests over HTTP and %d over the stream protocol, want 1 and the rest", h, s)
	}
}

// By default, against a node that serves the stream protocol, sixteen sessions acquiring and releasing at
// once share one stream connection to the node.
func TestStreamProtocolMultiplexesOneConnection(t *testing.T) {
	n := newStreamNode(t, httpapitest.New("n1"))
	var dials atomic.Int64
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	c, err := NewClient([]string{hostOf(n.http)}, WithDialer(dial))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	ctx := testCtx(t)
	if _, err := c.Health(ctx); err != nil {
		t.Fatal(err)
	}
	lockInParallel(t, ctx, c, 16)
	// One HTTP connection (the first request), one stream connection.
	if d, h := dials.Load(), n.overHTTP.Load(); d != 2 || h != 1 {
		t.Fatalf("%d dials and %d requests over HTTP, want 2 and 1", d, h)
	}
}

// When the stream port does not answer, the client goes back to HTTP (no
// call fails for it) and does not try the port again at once, however
// many answers name it.
func TestStreamProtocolFallsBackToHTTP(t *testing.T) {
	f := httpapitest.New("n1")
	h := httpapi.NewServer(f)
	dead := httpapitest.ClosedAddr(t)
	_, deadPort, _ := net.SplitHostPort(dead)
	ts := httptest.NewServer(stream.Advertise(h, deadPort))
	t.Cleanup(ts.Close)
	var streamDials atomic.Int64
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == dead {
			streamDials.Add(1)
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	c, err := NewClient([]string{hostOf(ts)}, WithDialer(dial))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	ctx := testCtx(t)
	for range 5 {
		if _, err := c.Health(ctx); err != nil {
			t.Fatalf("with a stream port that refuses: %v", err)
		}
	}
	// One try of the stream port; then HTTP, though every answer names it.
	if n := streamDials.Load(); n != 1 {
		t.Fatalf("%d dials of the refusing stream port, want 1", n)
	}
}

// A call whose ctx ends while its request waits over the stream protocol
// returns the ctx's error, and the node's handler sees its context end
// (the client cancelled the stream) and returns. (The waiter keeps its
// place in the queue until its wait ends, as over HTTP.)
func TestStreamProtocolCancelsAWaitingAcquire(t *testing.T) {
	f := httpapitest.New("n1")
	n := newStreamNode(t, f)
	c, err := NewClient([]string{hostOf(n.http)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	ctx := testCtx(t)
	holder, err := c.OpenSession(ctx, api.OpenRequest{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	waiter, err := c.OpenSession(ctx, api.OpenRequest{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(ctx, api.AcquireRequest{Name: "a", Session: holder.ID, Holder: "h"}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Acquire(wctx, api.AcquireRequest{Name: "a", Session: waiter.ID, Holder: "w", Wait: time.Minute})
		errc <- err
	}()
	httpapitest.WaitFor(t, "the acquire waiting in the queue", func() bool {
		st, err := c.LockState(ctx, "a")
		return err == nil && st.Waiters == 1
	})
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("acquire: %v, want context.Canceled", err)
	}
	httpapitest.WaitFor(t, "the node's acquire handler ending with its context", func() bool {
		return n.cancelled.Load() == 1
	})
}
