package client

import (
	"net"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/raftlock/raftlock/transport/httpapi"
	"github.com/raftlock/raftlock/transport/httpapi/httpapitest"
)

// With WithHTTP2 the client multiplexes all its sessions and requests
// over one connection per node: after a first call, sixteen sessions
// acquiring and releasing at once open no further connection, and every
// request arrives as HTTP/2.
func TestWithHTTP2MultiplexesOneConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns, notH2 atomic.Int64
	h := httpapi.NewServer(httpapitest.New("n1"))
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ProtoMajor != 2 {
				notH2.Add(1)
			}
			h.ServeHTTP(w, r)
		}),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		},
	}
	httpapi.ConfigureServer(srv, 0)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	c, err := NewClient([]string{ln.Addr().String()}, WithHTTP2())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	ctx := testCtx(t)
	if _, err := c.Health(ctx); err != nil {
		t.Fatal(err)
	}
	lockInParallel(t, ctx, c, 16)
	if n, h1 := conns.Load(), notH2.Load(); n != 1 || h1 != 0 {
		t.Fatalf("%d connections and %d requests not in HTTP/2, want 1 and 0", n, h1)
	}
}
