package client

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
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

// lockInParallel has n goroutines each open a session of its own on c and
// take and release a lock of its own; the test fails on the first error.
func lockInParallel(t *testing.T, ctx context.Context, c *Client, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name, holder := fmt.Sprintf("l%d", i), fmt.Sprintf("h%d", i)
			info, err := c.OpenSession(ctx, api.OpenRequest{})
			if err == nil {
				_, err = c.Acquire(ctx, api.AcquireRequest{Name: name, Session: info.ID, Holder: holder})
			}
			if err == nil {
				err = c.Release(ctx, api.ReleaseRequest{Name: name, Session: info.ID, Holder: holder})
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}
