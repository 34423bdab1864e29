package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/cmd/internal/proccluster"
	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/transport/client"
)

// aclCluster starts a three-node --acl cluster of raftlockd processes,
// bootstraps its ACLs and returns it with the management token's secret.
func aclCluster(ctx context.Context, t *testing.T, extra ...string) (*proccluster.Cluster, string) {
	t.Helper()
	c := proccluster.Start(t, proccluster.BuildDaemon(t), 3, append([]string{"--acl"}, extra...)...)
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	boot, err := c.Client().ACLBootstrap(ctx)
	if err != nil {
		t.Fatalf("acl bootstrap: %v", err)
	}
	return c, boot.Secret
}

// procKB reads a field of /proc/PID/status in kB (VmRSS, VmHWM).
func procKB(t *testing.T, pid int, field string) int {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatalf("%s: %q: %v", field, line, err)
			}
			return kb
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// rawUpload posts size bytes of zeros to path at addr over a raw TCP
// connection, writing the body while it reads the answer: it returns the
// answer and how many body bytes the kernel took before the server closed
// the connection (or the whole size).
func rawUpload(ctx context.Context, t *testing.T, addr, path, secret string, size int64) (*http.Response, []byte, int64) {
	t.Helper()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n",
		path, addr, secret, size)
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	var written atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		chunk := make([]byte, 64<<10)
		for written.Load() < size {
			n := min(int64(len(chunk)), size-written.Load())
			m, err := conn.Write(chunk[:n])
			written.Add(int64(m))
			if err != nil {
				return
			}
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("read the answer (after %d body bytes): %v", written.Load(), err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	// The server closes the connection after its answer (it does not read
	// the rest of a large body); the writer then fails and stops.
	_ = conn.(*net.TCPConn).CloseRead()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("the upload neither finished nor was cut off (%d bytes written)", written.Load())
	}
	return resp, body, written.Load()
}

// TestRestoreRefusesNonAdminBeforeReadingTheBody pins issue 27 item 6: a
// read-only token's 300 MB restore upload is refused permission_denied on
// the leader and through a follower, and the server took no more than a
// few MiB of it (socket buffers), where it used to read and buffer it all.
func TestRestoreRefusesNonAdminBeforeReadingTheBody(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs raftlockd processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, admin := aclCluster(ctx, t)
	tok, err := c.Client(client.WithToken(admin)).CreateToken(ctx, api.TokenRequest{Name: "reader", Rules: []string{"read:"}})
	if err != nil {
		t.Fatal(err)
	}
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	follower := (leader + 1) % len(c.Nodes)
	const size = 300 << 20
	// The bound: loopback socket buffers (a few MiB each way) and what
	// net/http discards of an unread body (256 KiB), far below the upload.
	const bound = 32 << 20
	for _, target := range []struct {
		name string
		i    int
	}{{"leader", leader}, {"follower", follower}} {
		pid := c.PID(target.i)
		before := procKB(t, pid, "VmRSS")
		resp, body, written := rawUpload(ctx, t, c.Nodes[target.i].HTTPAddr, "/v1/snapshot/restore", tok.Secret, size)
		after, hwm := procKB(t, pid, "VmRSS"), procKB(t, pid, "VmHWM")
		t.Logf("via the %s: HTTP %d after %d of %d body bytes; its RSS %d -> %d kB (peak %d kB)",
			target.name, resp.StatusCode, written, size, before, after, hwm)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), `"permission_denied"`) {
			t.Fatalf("via the %s: HTTP %d %s, want 403 permission_denied", target.name, resp.StatusCode, body)
		}
		if written > bound {
			t.Fatalf("via the %s: the server took %d bytes of a refused upload; want at most %d", target.name, written, bound)
		}
	}
	// An admin's upload is taken in, but spooled to the data dir and
	// checked there: 200 MB that are not a backup are refused without
	// costing their size in memory, and the spool file is gone.
	pid := c.PID(leader)
	before := procKB(t, pid, "VmRSS")
	resp, body, _ := rawUpload(ctx, t, c.Nodes[leader].HTTPAddr, "/v1/snapshot/restore", admin, 200<<20)
	after, hwm := procKB(t, pid, "VmRSS"), procKB(t, pid, "VmHWM")
	t.Logf("admin, 200 MB of zeros: HTTP %d; leader RSS %d -> %d kB (peak %d kB)", resp.StatusCode, before, after, hwm)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "not a valid raftlock backup") {
		t.Fatalf("admin, 200 MB of zeros: HTTP %d %s, want 400 invalid_argument", resp.StatusCode, body)
	}
	if hwm > 150<<10 {
		t.Errorf("the leader's peak RSS is %d kB after a 200 MB upload: it was buffered, not spooled", hwm)
	}
	left, err := filepath.Glob(filepath.Join(c.Flag(leader, "--data-dir"), "restore-upload-*"))
	if err != nil || len(left) > 0 {
		t.Errorf("spool files left behind: %v %v", left, err)
	}
}

// limitedDaemon writes a script that runs bin with at most nofile open
// files (soft and hard), as a node under a service manager's limit runs.
func limitedDaemon(t *testing.T, bin string, nofile int) string {
	t.Helper()
	script := filepath.Join(t.TempDir(), "raftlockd-limited")
	body := fmt.Sprintf("#!/bin/sh\nulimit -n %d || exit 97\nexec %q \"$@\"\n", nofile, bin)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

// flood opens n connections from the local address from to addr, each of
// which sends one request (GET /v1/health) and then idles; it returns the
// connections that were answered (the others were refused or closed).
func flood(ctx context.Context, t *testing.T, from, addr string, n int) []net.Conn {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	var open []net.Conn
	for range n {
		if c, err := openIdle(ctx, d, addr, 5*time.Second); err == nil {
			open = append(open, c)
		}
	}
	t.Cleanup(func() {
		for _, c := range open {
			c.Close()
		}
	})
	return open
}

// openIdle dials addr with d, sends one request (GET /v1/health, so that
// the node holds the connection for its idle timeout, not only its
// header timeout), reads the answer within timeout and returns the
// connection, idle; an error if the node refused, closed or did not
// answer it.
func openIdle(ctx context.Context, d *net.Dialer, addr string, timeout time.Duration) (net.Conn, error) {
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(c, "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		c.Close()
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		c.Close()
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	_ = c.SetDeadline(time.Time{})
	return c, nil
}

// TestIdleConnectionsAreCappedPerSourceAndClosed pins issue 27 item 7 on
// nodes limited to 1024 open files: 1,500 connections to each of the
// leader's ports from one foreign source (127.0.0.2), each idle after one
// request, are capped per source (--max-conns-per-ip), so the leader
// still serves a new client and its peers still replicate over new
// connections (a restarted follower is needed for the quorum); and idle
// connections are closed after --http-idle-timeout.
func TestIdleConnectionsAreCappedPerSourceAndClosed(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs raftlockd processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const capPerIP = 200
	bin := limitedDaemon(t, proccluster.BuildDaemon(t), 1024)
	c := proccluster.Start(t, bin, 3, "--max-conns-per-ip", strconv.Itoa(capPerIP), "--http-idle-timeout", "3s")
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l := c.Nodes[leader]
	var held []net.Conn
	for _, port := range []struct{ name, addr string }{{"http", l.HTTPAddr}, {"peer", c.Flag(leader, "--raft-addr")}} {
		open := flood(ctx, t, "127.0.0.2", port.addr, 1500)
		t.Logf("%s port: %d of 1500 connections from 127.0.0.2 answered and held", port.name, len(open))
		if len(open) > capPerIP {
			t.Errorf("%s port: %d connections from one source held open; the cap is %d", port.name, len(open), capPerIP)
		}
		held = append(held, open...)
	}
	// A new client is served.
	only := func(i int) *client.Client {
		cl, err := client.NewClient([]string{c.Nodes[i].HTTPAddr}, client.WithRetryBackoff(50*time.Millisecond, 200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	if _, err := only(leader).Health(ctx); err != nil {
		t.Fatalf("the flooded leader does not serve a new client: %v", err)
	}
	// Peers replicate over new connections: restart one follower, then
	// stop the other, so that every write needs the restarted one.
	f1, f2 := (leader+1)%3, (leader+2)%3
	c.Kill(f1)
	c.Restart(f1)
	c.Kill(f2)
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if _, err := only(leader).OpenSession(wctx, api.OpenRequest{TTL: time.Minute, Name: "after-flood"}); err != nil {
		t.Fatalf("no write commits with the restarted follower while the leader is flooded: %v", err)
	}
	c.Restart(f2)
	// Every idle connection is closed by the node.
	proccluster.Eventually(t, 30*time.Second, "idle connections closed", func() error {
		for i, conn := range held {
			if conn == nil {
				continue
			}
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
			var b [1]byte
			if _, err := conn.Read(b[:]); err == io.EOF || (err != nil && !os.IsTimeout(err)) {
				held[i] = nil
				continue
			}
			return fmt.Errorf("connection %d (%s) still open", i, conn.RemoteAddr())
		}
		return nil
	})
}

// TestOneTokenCannotTakeEveryLockSlot pins issue 27 item 8 end to end: with
// --max-locks-per-token 5 and --max-waiters-per-token 2, a write token's
// sixth lock over two sessions, and its third wait, are refused
// resource_exhausted (429), while another token still takes locks.
func TestOneTokenCannotTakeEveryLockSlot(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs raftlockd processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, admin := aclCluster(ctx, t, "--max-locks-per-token", "5", "--max-waiters-per-token", "2")
	ac := c.Client(client.WithToken(admin))
	// The leader writes the caps once every member has recorded that its
	// build reads the command format that carries them.
	awaitCommandVersion(ctx, t, ac)
	clientOf := func(name string) *client.Client {
		tok, err := ac.CreateToken(ctx, api.TokenRequest{Name: name, Rules: []string{"write:"}})
		if err != nil {
			t.Fatal(err)
		}
		return c.Client(client.WithToken(tok.Secret))
	}
	greedy, other := clientOf("greedy"), clientOf("other")
	open := func(cl *client.Client) string {
		info, err := cl.OpenSession(ctx, api.OpenRequest{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return info.ID
	}
	s1, s2, o := open(greedy), open(greedy), open(other)
	for i := range 5 {
		s := []string{s1, s2}[i%2]
		if _, err := greedy.Acquire(ctx, api.AcquireRequest{Name: fmt.Sprintf("slot/%d", i), Session: s, Holder: "h"}); err != nil {
			t.Fatalf("lock %d of 5: %v", i, err)
		}
	}
	_, err := greedy.Acquire(ctx, api.AcquireRequest{Name: "slot/5", Session: s2, Holder: "h"})
	if api.CodeOf(err) != api.CodeResourceExhausted || !strings.Contains(err.Error(), "locks this token's sessions hold or wait for") {
		t.Fatalf("the token's sixth lock: %v, want resource_exhausted", err)
	}
	if _, err := other.Acquire(ctx, api.AcquireRequest{Name: "slot/5", Session: o, Holder: "h"}); err != nil {
		t.Fatalf("another token's lock: %v", err)
	}
	// Waits: free three slots, wait twice on other's locks, the third
	// wait is refused (2 holds and 3 waits would pass the waiters' cap
	// before the locks' cap).
	for i := range 3 {
		if err := greedy.Release(ctx, api.ReleaseRequest{Name: fmt.Sprintf("slot/%d", i), Session: []string{s1, s2}[i%2], Holder: "h"}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		name := fmt.Sprintf("other/%d", i)
		if _, err := other.Acquire(ctx, api.AcquireRequest{Name: name, Session: o, Holder: "h"}); err != nil {
			t.Fatal(err)
		}
		wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_, err := greedy.Acquire(wctx, api.AcquireRequest{Name: name, Session: s1, Holder: "h", Wait: time.Minute})
		wcancel()
		if i < 2 && api.CodeOf(err) == api.CodeResourceExhausted {
			t.Fatalf("wait %d of 2 refused: %v", i+1, err)
		}
		if i == 2 && (api.CodeOf(err) != api.CodeResourceExhausted || !strings.Contains(err.Error(), "waits of this token's sessions")) {
			t.Fatalf("the token's third wait: %v, want resource_exhausted", err)
		}
	}
}

// awaitCommandVersion waits until every member of c records that its
// build reads this build's command version.
func awaitCommandVersion(ctx context.Context, t *testing.T, cl *client.Client) {
	t.Helper()
	proccluster.Eventually(t, time.Minute, "every member reads this build's commands", func() error {
		info, err := cl.Cluster(ctx)
		if err != nil {
			return err
		}
		for _, m := range info.Members {
			if m.Commands != fsm.Version {
				return fmt.Errorf("member %s reads command version %d", m.ID, m.Commands)
			}
		}
		if len(info.Members) != 3 {
			return fmt.Errorf("%d members", len(info.Members))
		}
		return nil
	})
}

// TestLostBootstrapAnswerHasAWayBackThroughTheDataDir pins issue 27 item
// 5: once the management token's answer is lost, a bootstrap is refused
// naming the reset index; with that index in acl-bootstrap-reset in the
// leader's data dir (and only then) one more bootstrap answers a new
// management token, the file is removed, and neither the file nor the
// request allows another.
func TestLostBootstrapAnswerHasAWayBackThroughTheDataDir(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs raftlockd processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, lost := aclCluster(ctx, t)
	awaitCommandVersion(ctx, t, c.Client(client.WithToken(lost)))
	cl := c.Client()
	_, err := cl.ACLBootstrap(ctx)
	var idx uint64
	if api.CodeOf(err) != api.CodePermissionDenied {
		t.Fatalf("a second bootstrap: %v, want permission_denied", err)
	}
	if _, err := fmt.Sscanf(err.Error()[strings.Index(err.Error(), "reset index: "):], "reset index: %d", &idx); err != nil || idx == 0 {
		t.Fatalf("the refusal names no reset index: %v (%v)", err, idx)
	}
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(c.Flag(leader, "--data-dir"), "acl-bootstrap-reset")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(text+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const secret = "0123456789abcdef-operator"
	n := strconv.FormatUint(idx, 10)
	refused := func(what string, err error) {
		t.Helper()
		if api.CodeOf(err) != api.CodePermissionDenied {
			t.Fatalf("%s: %v, want permission_denied", what, err)
		}
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("%s: the refusal shows the secret: %v", what, err)
		}
	}
	write(strconv.FormatUint(idx+1, 10) + " " + secret)
	_, err = cl.ACLBootstrapReset(ctx, secret)
	refused("a bootstrap with a wrong reset index", err)
	// Issue 40 item 7: the file alone must not hand the token to
	// whoever asks first. The old format (the index alone) is refused,
	// naming the new one; a request without the secret, or with
	// another, is refused while the file is there.
	write(n)
	_, err = cl.ACLBootstrap(ctx)
	refused("a reset file without a secret", err)
	if !strings.Contains(err.Error(), "SECRET") {
		t.Errorf("the refusal of a reset file without a secret does not say how to write one: %v", err)
	}
	write(n + " " + secret)
	_, err = cl.ACLBootstrap(ctx)
	refused("a reset without the secret (a client polling the endpoint)", err)
	_, err = cl.ACLBootstrapReset(ctx, secret+"x")
	refused("a reset with another secret", err)
	write(n + " short")
	_, err = cl.ACLBootstrapReset(ctx, "short")
	refused("a reset file with a short secret", err)
	write(n + " " + secret)
	boot, err := cl.ACLBootstrapReset(ctx, secret)
	if err != nil {
		t.Fatalf("the bootstrap with the reset index and secret: %v", err)
	}
	if _, err := c.Client(client.WithToken(boot.Secret)).CreateToken(ctx, api.TokenRequest{Name: "x", Rules: []string{"read:"}}); err != nil {
		t.Fatalf("the new management token is not admin: %v", err)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("the reset file is still there: %v", err)
	}
	write(n + " " + secret)
	_, err = cl.ACLBootstrapReset(ctx, secret)
	refused("a replayed reset", err)
	// The hashed form: the data dir holds the secret's SHA-256 only.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	_, err = cl.ACLBootstrap(ctx)
	var next uint64
	if _, serr := fmt.Sscanf(err.Error()[strings.Index(err.Error(), "reset index: "):], "reset index: %d", &next); serr != nil || next <= idx {
		t.Fatalf("the refusal after a reset names no newer reset index: %v (%d)", err, next)
	}
	sum := sha256.Sum256([]byte(secret))
	write(strconv.FormatUint(next, 10) + " sha256:" + hex.EncodeToString(sum[:]))
	_, err = cl.ACLBootstrap(ctx)
	refused("a reset without the secret of a hashed reset file", err)
	if _, err := cl.ACLBootstrapReset(ctx, secret); err != nil {
		t.Fatalf("the bootstrap with the secret of a hashed reset file: %v", err)
	}
}
