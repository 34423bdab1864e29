package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/cmd/internal/proccluster"
	"github.com/raftlock/raftlock/transport/client"
	"github.com/raftlock/raftlock/transport/stream"
)

// openFDs counts the open file descriptors of process pid.
func openFDs(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatalf("fds of %d: %v", pid, err)
	}
	return len(ents)
}

// idleConns fills process pid's descriptor table through addr: from
// 127.0.0.<first>, <first+1>, ... it opens up to perIP connections each,
// sends one request on each (GET /v1/health, so that the node holds it
// for its idle timeout, not only its header timeout) and keeps it open,
// until the node holds want descriptors or a request goes unanswered (the
// node cannot accept any more). The connections are closed at the test's
// end.
func idleConns(t *testing.T, addr string, pid, want, first, ips, perIP int) []net.Conn {
	t.Helper()
	var open []net.Conn
	t.Cleanup(func() {
		for _, c := range open {
			c.Close()
		}
	})
	for ip := first; ip < first+ips; ip++ {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(ip))}, Timeout: 2 * time.Second}
		for range perIP {
			if openFDs(t, pid) >= want {
				return open
			}
			c, err := openIdle(context.Background(), d, addr, 2*time.Second)
			if err != nil {
				return open // refused, or not accepted: the table is full
			}
			open = append(open, c)
		}
	}
	return open
}

// TestNoListenerStopsTheNodeWhenDescriptorsRunOut pins issue 40 items 1
// and 2 on a node limited to 256 open files, as a service manager limits
// it: idle connections to the unauthenticated metrics port from many
// source addresses fill its descriptor table; a dial to the stream port
// then makes its accept fail (EMFILE), which used to stop the daemon.
// The node must log the failure, go on running and, once the idle
// connections are gone, serve the stream connection.
func TestNoListenerStopsTheNodeWhenDescriptorsRunOut(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs a raftlockd process")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const nofile = 256
	bin := limitedDaemon(t, proccluster.BuildDaemon(t), nofile)
	maddr, saddr := proccluster.FreeAddr(t), proccluster.FreeAddr(t)
	c := proccluster.StartEach(t, bin, 1, func(int) []string {
		return []string{"--metrics-addr", maddr, "--stream-addr", saddr}
	})
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	pid := c.PID(0)
	// api.MetricsConnsPerIP from each address: 20 addresses are more
	// than 256 descriptors.
	flood := idleConns(t, maddr, pid, nofile, 2, 20, api.MetricsConnsPerIP)
	t.Logf("%d idle metrics connections; the node holds %d descriptors of %d", len(flood), openFDs(t, pid), nofile)
	sc, err := net.DialTimeout("tcp", saddr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial the stream port: %v", err)
	}
	defer sc.Close()
	proccluster.Eventually(t, 30*time.Second, "the node meets a failed accept", func() error {
		if strings.Contains(c.Nodes[0].Log(), "too many open files") {
			return nil
		}
		return fmt.Errorf("no accept failed yet (%d descriptors); log:\n%s", openFDs(t, pid), tail(c.Nodes[0].Log(), 8))
	})
	for _, conn := range flood {
		conn.Close()
	}
	tr := &stream.Transport{Fallback: &http.Transport{}}
	defer tr.CloseIdleConnections()
	cl, err := client.NewClient(c.Addrs(), client.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		t.Fatal(err)
	}
	proccluster.Eventually(t, 30*time.Second, "a session over the stream protocol after the descriptors came back", func() error {
		if code, exited := c.Exited(0); exited {
			t.Fatalf("the node exited (status %d) when its descriptors ran out; its log:\n%s", code, tail(c.Nodes[0].Log(), 40))
		}
		s, err := cl.OpenSession(ctx, api.OpenRequest{TTL: time.Minute, Name: "after-emfile"})
		if err != nil {
			return err
		}
		if tr.StreamPort(c.Addrs()[0]) == "" {
			return fmt.Errorf("session opened over HTTP (%d s lease), not yet over the stream port", int(s.TTL.Seconds()))
		}
		_, err = cl.KeepAlive(ctx, s.ID)
		return err
	})
}

// TestMetricsPortCapsConnectionsPerSourceAndClosesIdleOnes pins issue 40
// item 2: the metrics port, which answers without a certificate or a
// token, holds at most api.MetricsConnsPerIP connections from one source
// address and closes a connection idle for --http-idle-timeout, as the
// API port does (it held 3,000 idle connections from one address for
// 150 s).
func TestMetricsPortCapsConnectionsPerSourceAndClosesIdleOnes(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs a raftlockd process")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	maddr := proccluster.FreeAddr(t)
	c := proccluster.StartEach(t, proccluster.BuildDaemon(t), 1, func(int) []string {
		return []string{"--metrics-addr", maddr, "--http-idle-timeout", "2s"}
	})
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	open := flood(ctx, t, "127.0.0.2", maddr, 100)
	if len(open) > api.MetricsConnsPerIP || len(open) == 0 {
		t.Fatalf("%d of 100 connections from one source answered and held on the metrics port; want 1 to %d",
			len(open), api.MetricsConnsPerIP)
	}
	pending := append([]net.Conn(nil), open...) // flood closes open at the end
	proccluster.Eventually(t, 30*time.Second, "idle metrics connections closed by the node", func() error {
		for i, conn := range pending {
			if conn == nil {
				continue
			}
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
			var b [1]byte
			if _, err := conn.Read(b[:]); err != nil && !os.IsTimeout(err) {
				pending[i] = nil
				continue
			}
			return fmt.Errorf("connection %d still open", i)
		}
		return nil
	})
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
