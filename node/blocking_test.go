package node

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
)

// A node counts its blocking queries (lock watches, prefix watches,
// blocking overviews) against Config.MaxBlockingQueries: one past the cap
// is answered resource_exhausted naming it, and each query ends its
// count on every way it ends: answered on a change, its wait passed, its
// context cancelled, its client's connection dropped.
func TestBlockingQueriesAreCappedPerNodeAndReleasedOnEveryPath(t *testing.T) {
	c := newTestCluster(t, 1, func(cfg *Config) { cfg.MaxBlockingQueries = 2 }, withHTTP)
	ctx := ctxT(t)
	n, _ := c.leader()
	addr := c.httpAddrs[0]
	held := func(want int) {
		t.Helper()
		eventually(t, 10*time.Second, fmt.Sprintf("%d blocking queries counted", want), func() error {
			if got := n.blocking.count(""); got != want {
				return fmt.Errorf("%d counted", got)
			}
			return nil
		})
	}
	far := uint64(1 << 40)

	// Answered on a change of the lock.
	sess, err := n.OpenSession(ctx, api.OpenRequest{Name: "s", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	st, err := n.LockState(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	changed := make(chan error, 1)
	go func() {
		_, err := n.WatchLock(ctx, "a", st.Index, time.Minute)
		changed <- err
	}()
	held(1)
	if _, err := n.Acquire(ctx, api.AcquireRequest{Name: "a", Session: sess.ID, Holder: "h"}); err != nil {
		t.Fatal(err)
	}
	if err := <-changed; err != nil {
		t.Fatalf("a watch answered on a change: %v", err)
	}
	held(0)

	// Its wait passed.
	if _, err := n.WatchLock(ctx, "b", far, 10*time.Millisecond); err != nil {
		t.Fatalf("a watch whose wait passed: %v", err)
	}
	held(0)

	// Cancelled; and the cap: two waiting, a third of any kind refused.
	wctx, cancel := context.WithCancel(ctx)
	ended := make(chan error, 2)
	go func() { _, err := n.WatchLock(wctx, "b", far, time.Minute); ended <- err }()
	go func() { _, err := n.WatchLocks(wctx, "p/", far, time.Minute); ended <- err }()
	held(2)
	for _, path := range []string{
		fmt.Sprintf("/v1/lock?name=c&index=%d", far),
		fmt.Sprintf("/v1/locks?prefix=q/&index=%d", far),
		fmt.Sprintf("/v1/overview?index=%d", far),
	} {
		status, code, body := aclDo(ctx, addr, "GET", path, "", nil)
		if status != 429 || code != "resource_exhausted" || !bytes.Contains(body, []byte("limit of 2 blocking queries")) {
			t.Fatalf("GET %s past the cap: %d %s %s; want 429 resource_exhausted naming the limit", path, status, code, body)
		}
	}
	if status, _, body := aclDo(ctx, addr, "GET", "/v1/overview", "", nil); status != 200 {
		t.Fatalf("an overview without index (not blocking) past the cap: %d %s; want 200", status, body)
	}
	cancel()
	for range 2 {
		if err := <-ended; err != context.Canceled {
			t.Fatalf("a cancelled watch ended with %v", err)
		}
	}
	held(0)

	// Its client's connection dropped mid-wait.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /v1/lock?name=d&index=%d&wait=1m HTTP/1.1\r\nHost: x\r\n\r\n", far)
	held(1)
	conn.Close()
	held(0)
	if n.lockWakers.len() != 0 {
		t.Fatalf("%d locks still watched after every watch ended", n.lockWakers.len())
	}
}

// With ACLs on, one token holds at most MaxBlockingQueriesPerToken
// blocking queries on a node, whatever other tokens do; a follower counts
// the queries it forwards by the secret they carry (AdmitForwardedQuery).
func TestBlockingQueriesAreCappedPerToken(t *testing.T) {
	c := newTestCluster(t, 1, func(cfg *Config) {
		cfg.ACL = true
		cfg.MaxBlockingQueriesPerToken = 1
	}, withHTTP)
	ctx := ctxT(t)
	n, _ := c.leader()
	addr := c.httpAddrs[0]
	_, admin := c.bootstrapACL(t, ctx)
	reader, err := admin.CreateToken(ctx, api.TokenRequest{Name: "reader", Rules: []string{"read:"}})
	if err != nil {
		t.Fatal(err)
	}
	other, err := admin.CreateToken(ctx, api.TokenRequest{Name: "other", Rules: []string{"read:"}})
	if err != nil {
		t.Fatal(err)
	}
	far := uint64(1 << 40)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		aclDo(wctx, addr, "GET", fmt.Sprintf("/v1/lock?name=a&index=%d&wait=1m", far), reader.Secret, nil)
	}()
	eventually(t, 10*time.Second, "the reader's watch waiting", func() error {
		if got := n.blocking.count(reader.ID); got != 1 {
			return fmt.Errorf("%d watches", got)
		}
		return nil
	})
	status, code, body := aclDo(ctx, addr, "GET", "/v1/lock?name=b&index=1", reader.Secret, nil)
	if status != 429 || code != "resource_exhausted" || !bytes.Contains(body, []byte(reader.ID)) {
		t.Fatalf("the reader's second watch: %d %s %s; want 429 resource_exhausted naming the token", status, code, body)
	}
	if status, _, body := aclDo(ctx, addr, "GET", "/v1/lock?name=b&index=1", other.Secret, nil); status != 200 {
		t.Fatalf("another token's watch: %d %s, want 200", status, body)
	}
	cancel()
	<-done
	eventually(t, 10*time.Second, "the reader's watch uncounted", func() error {
		if got := n.blocking.count(""); got != 0 {
			return fmt.Errorf("%d watches", got)
		}
		return nil
	})

	// Forwarded queries count by their secret: one per secret here.
	release, err := n.AdmitForwardedQuery(reader.Secret)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.AdmitForwardedQuery(reader.Secret); api.CodeOf(err) != api.CodeResourceExhausted {
		t.Fatalf("a second forwarded query of one secret: %v, want resource_exhausted", err)
	}
	if bytes.Contains([]byte(fmt.Sprint(err)), []byte(reader.Secret)) {
		t.Fatal("the refusal quotes the secret")
	}
	again, err := n.AdmitForwardedQuery(other.Secret)
	if err != nil {
		t.Fatalf("another secret's forwarded query: %v", err)
	}
	release()
	release() // a second call does nothing
	again()
	if got := n.blocking.count(""); got != 0 {
		t.Fatalf("%d blocking queries counted after every forwarded one ended", got)
	}
}
