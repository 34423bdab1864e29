package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/cmd/internal/proccluster"
	"github.com/raftlock/raftlock/transport/client"
)

// TestDaemonServesHTTP2BesideHTTP1 pins that raftlockd's API port
// speaks both protocols: a Go client over h2c opens a session and takes
// and releases a lock on every node (followers forward), while a plain
// HTTP/1.1 request to each node is answered in HTTP/1.1.
func TestDaemonServesHTTP2BesideHTTP1(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs raftlockd processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := proccluster.Start(t, proccluster.BuildDaemon(t), 3)
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	h1 := &http.Client{Transport: &http.Transport{}}
	h2 := &http.Client{Transport: &http.Transport{Protocols: client.HTTP2Only()}}
	defer h1.CloseIdleConnections()
	defer h2.CloseIdleConnections()
	for i, addr := range c.Addrs() {
		proccluster.Eventually(t, 30*time.Second, "node serving", func() error {
			resp, err := h1.Get("http://" + addr + "/v1/health")
			if err == nil {
				resp.Body.Close()
			}
			return err
		})
		for want, hc := range map[string]*http.Client{"HTTP/1.1": h1, "HTTP/2.0": h2} {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/health", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatalf("node %d, %s: %v", i, want, err)
			}
			resp.Body.Close()
			if resp.Proto != want {
				t.Fatalf("node %d: a %s request answered in %s", i, want, resp.Proto)
			}
		}
		cl, err := client.NewClient([]string{addr}, client.WithHTTP2())
		if err != nil {
			t.Fatal(err)
		}
		s, err := cl.OpenSession(ctx, api.OpenRequest{TTL: time.Minute, Name: "h2"})
		if err != nil {
			t.Fatalf("node %d over HTTP/2: open: %v", i, err)
		}
		g, err := cl.Acquire(ctx, api.AcquireRequest{Name: "h2/lock", Session: s.ID, Holder: "h"})
		if err != nil {
			t.Fatalf("node %d over HTTP/2: acquire: %v", i, err)
		}
		if err := cl.Release(ctx, api.ReleaseRequest{Name: "h2/lock", Session: s.ID, Holder: "h"}); err != nil {
			t.Fatalf("node %d over HTTP/2: release of token %d: %v", i, g.Token, err)
		}
		if err := cl.CloseSession(ctx, s.ID); err != nil {
			t.Fatalf("node %d over HTTP/2: close: %v", i, err)
		}
		cl.CloseIdleConnections()
	}
}
