package main

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/cmd/internal/proccluster"
	"github.com/raftlock/raftlock/transport/client"
	"github.com/raftlock/raftlock/transport/stream"
)

// TestDaemonServesTheStreamProtocol pins --stream-addr: every node names
// its stream port on its HTTP answers, a Go client with the stream
// Transport takes and releases a lock through every node over it
// (followers forward to the leader, as over HTTP), and when the leader
// stops, the session's calls reach the new leader, over the stream
// protocol again.
func TestDaemonServesTheStreamProtocol(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs raftlockd processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := proccluster.StartEach(t, proccluster.BuildDaemon(t), 3, func(int) []string {
		return []string{"--stream-addr", "127.0.0.1:0"}
	})
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tr := &stream.Transport{Fallback: &http.Transport{}}
	defer tr.CloseIdleConnections()
	for i, addr := range c.Addrs() {
		cl, err := client.NewClient([]string{addr}, client.WithHTTPClient(&http.Client{Transport: tr}))
		if err != nil {
			t.Fatal(err)
		}
		s, err := cl.OpenSession(ctx, api.OpenRequest{TTL: time.Minute, Name: "stream"})
		if err != nil {
			t.Fatalf("node %d: open: %v", i, err)
		}
		if tr.StreamPort(addr) == "" {
			t.Fatalf("node %d named no stream port on its HTTP answer", i)
		}
		if _, err := cl.Acquire(ctx, api.AcquireRequest{Name: "stream/lock", Session: s.ID, Holder: "h"}); err != nil {
			t.Fatalf("node %d over the stream protocol: acquire: %v", i, err)
		}
		if _, err := cl.KeepAlive(ctx, s.ID); err != nil {
			t.Fatalf("node %d over the stream protocol: keepalive: %v", i, err)
		}
		if err := cl.Release(ctx, api.ReleaseRequest{Name: "stream/lock", Session: s.ID, Holder: "h"}); err != nil {
			t.Fatalf("node %d over the stream protocol: release: %v", i, err)
		}
		if err := cl.CloseSession(ctx, s.ID); err != nil {
			t.Fatalf("node %d over the stream protocol: close: %v", i, err)
		}
	}

	// Leader change: a client given every node keeps its session.
	cl, err := client.NewClient(c.Addrs(), client.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		t.Fatal(err)
	}
	s, err := cl.OpenSession(ctx, api.OpenRequest{TTL: time.Minute, Name: "failover"})
	if err != nil {
		t.Fatal(err)
	}
	g1, err := cl.Acquire(ctx, api.AcquireRequest{Name: "stream/failover", Session: s.ID, Holder: "h"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stop(leader, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.KeepAlive(ctx, s.ID); err != nil {
		t.Fatalf("keepalive after the leader stopped: %v", err)
	}
	g2, err := cl.Acquire(ctx, api.AcquireRequest{Name: "stream/failover", Session: s.ID, Holder: "h"})
	if err != nil {
		t.Fatalf("acquire after the leader stopped: %v", err)
	}
	if g2.Token != g1.Token {
		t.Fatalf("the retried acquire got token %d, want the held grant's %d", g2.Token, g1.Token)
	}
	if err := cl.Release(ctx, api.ReleaseRequest{Name: "stream/failover", Session: s.ID, Holder: "h"}); err != nil {
		t.Fatal(err)
	}
}

// With TLS the stream port takes the API's certificates and its client
// certificate requirement: a client with the cluster's client certificate
// is served over it, a TLS connection without one gets no answer.
func TestTLSClusterServesTheStreamProtocol(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a raftlockd process")
	}
	cli := proccluster.Build(t, "github.com/raftlock/raftlock/cmd/raftlock", "raftlock")
	dir := tlsInit(t, cli, 1)
	c := proccluster.StartTLS(t, proccluster.BuildDaemon(t), dir, 1, "--client-cert-auth", "--stream-addr", "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	cfg := proccluster.ClientTLS(t, dir)
	tr := &stream.Transport{Fallback: &http.Transport{TLSClientConfig: cfg}, TLSConfig: cfg}
	defer tr.CloseIdleConnections()
	cl, err := client.NewClient(c.Addrs(), client.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		t.Fatal(err)
	}
	s, err := cl.OpenSession(ctx, api.OpenRequest{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	hostport := strings.TrimPrefix(c.Addrs()[0], "https://")
	port := tr.StreamPort(hostport)
	if port == "" {
		t.Fatal("the node named no stream port")
	}
	if _, err := cl.Acquire(ctx, api.AcquireRequest{Name: "tls/stream", Session: s.ID, Holder: "h"}); err != nil {
		t.Fatalf("acquire over the stream protocol with TLS: %v", err)
	}
	if err := cl.Release(ctx, api.ReleaseRequest{Name: "tls/stream", Session: s.ID, Holder: "h"}); err != nil {
		t.Fatal(err)
	}

	// No client certificate: the handshake or the first read fails.
	noCert := cfg.Clone()
	noCert.Certificates = nil
	host, _, _ := net.SplitHostPort(hostport)
	conn, err := tls.Dial("tcp", net.JoinHostPort(host, port), noCert)
	if err == nil {
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		_, err = conn.Write([]byte{'R', 'L', 'S', 'P', api.StreamVersion})
		if err == nil {
			_, err = conn.Read(make([]byte, 1))
		}
	}
	if err == nil {
		t.Fatal("a stream connection without a client certificate was answered")
	}
}
