package client

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/transport/httpapi"
	"github.com/raftlock/raftlock/transport/httpapi/httpapitest"
)

// newTestServer serves f's API on a loopback httptest server, closed at
// the end of the test.
func newTestServer(t testing.TB, f *httpapitest.Fake, opts ...httpapi.ServerOption) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(httpapi.NewServer(f, opts...))
	t.Cleanup(ts.Close)
	return ts
}

func hostOf(ts *httptest.Server) string { return strings.TrimPrefix(ts.URL, "http://") }

func newTestClient(t testing.TB, addrs ...string) *Client {
	t.Helper()
	c, err := NewClient(addrs, WithRetryBackoff(time.Millisecond, 5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}
