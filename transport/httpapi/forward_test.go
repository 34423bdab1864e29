package httpapi

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/transport/client"
	"github.com/raftlock/raftlock/transport/httpapi/httpapitest"
)

// twoNodes is a leader and a follower that forwards to it.
func twoNodes(t *testing.T) (leader, follower *httpapitest.Fake, leaderURL, followerURL string) {
	t.Helper()
	leader = httpapitest.New("n1")
	lts := newTestServer(t, leader)
	follower = httpapitest.New("n2")
	follower.SetLeader(api.LeaderInfo{ID: "n1", HTTPAddr: hostOf(lts), Self: false, Term: 3})
	fts := newTestServer(t, follower)
	return leader, follower, lts.URL, fts.URL
}

func TestForwarding(t *testing.T) {
	leader, follower, _, fURL := twoNodes(t)
	c := newTestClient(t, strings.TrimPrefix(fURL, "http://"))
	ctx := testCtx(t)

	before := leader.Calls("*")
	s, err := c.OpenSession(ctx, api.OpenRequest{Name: "via-follower"})
	if err != nil {
		t.Fatal(err)
	}
	g, err := c.Acquire(ctx, api.AcquireRequest{Name: "f", Session: s.ID, Holder: "h", Value: "v"})
	if err != nil {
		t.Fatal(err)
	}
	if g.Term != 3 {
		t.Fatalf("term %d", g.Term)
	}
	l, err := c.LockState(ctx, "f")
	if err != nil || len(l.Holders) != 1 || l.Holders[0].Value != "v" {
		t.Fatalf("lock via follower: %+v %v", l, err)
	}
	if _, err := c.Acquire(ctx, api.AcquireRequest{Name: "f", Session: s.ID, Holder: "other"}); !errors.Is(err, api.ErrLockBusy) {
		t.Fatalf("busy via follower: %v", err)
	}
	if n := leader.Calls("*") - before; n != 4 {
		t.Fatalf("leader served %d calls, want 4", n)
	}
	if n := follower.Calls("*"); n != 0 {
		t.Fatalf("follower served %d calls itself", n)
	}
	// A waiting acquire passes through the proxy and is granted on release.
	done := make(chan error, 1)
	go func() {
		_, err := c.Acquire(ctx, api.AcquireRequest{Name: "f", Session: s.ID, Holder: "w", Wait: 5 * time.Second})
		done <- err
	}()
	httpapitest.WaitFor(t, "waiter queued on the leader", func() bool { l, _ := c.LockState(ctx, "f"); return l.Waiters == 1 })
	time.Sleep(20 * time.Millisecond)
	if err := c.Release(ctx, api.ReleaseRequest{Name: "f", Session: s.ID, Holder: "h"}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("waiting acquire via follower: %v", err)
	}
	// Health is answered locally.
	h, err := c.Health(ctx)
	if err != nil || h.IsLeader || h.Leader != "n1" {
		t.Fatalf("health: %+v %v", h, err)
	}
	// Raw: the answer carries the leader's headers, once.
	r := rawDo(t, fURL, "GET", "/v1/lock?name=f", nil)
	if r.status != 200 || len(r.header.Values(api.HeaderLeader)) != 1 || r.header.Get(api.HeaderLeader) != "n1" {
		t.Fatalf("forwarded answer: %d %v", r.status, r.header)
	}
	// Bad input is refused by the leader, unchanged.
	r = rawDo(t, fURL, "POST", "/v1/acquire", strings.NewReader(`{"name":`))
	if r.status != 400 || r.errCode() != "invalid_argument" {
		t.Fatalf("bad input via follower: %d %s", r.status, r.body)
	}
	r = rawDo(t, fURL, "POST", "/v1/acquire", strings.NewReader(`{"name":"`+strings.Repeat("a", 1<<20)+`"}`))
	if r.status != 413 || r.errCode() != "too_large" {
		t.Fatalf("oversize via follower: %d %s", r.status, r.body)
	}
	// Unknown routes are answered locally.
	before = leader.Calls("*")
	r = rawDo(t, fURL, "GET", "/v1/nope", nil)
	if r.status != 404 || r.errCode() != "not_found" || leader.Calls("*") != before {
		t.Fatalf("unknown route via follower: %d %s", r.status, r.body)
	}
}

func TestForwardingNoLeader(t *testing.T) {
	leader, follower, _, fURL := twoNodes(t)

	// A request that was already forwarded is not forwarded again.
	before := leader.Calls("*")
	r := rawDo(t, fURL, "GET", "/v1/cluster", nil, api.HeaderForwarded, "n9@2")
	if r.status != 503 || r.errCode() != "no_leader" || leader.Calls("*") != before {
		t.Fatalf("double forward: %d %s", r.status, r.body)
	}
	// Two followers that each take the other for the leader: no loop.
	other := httpapitest.New("n3")
	ots := newTestServer(t, other)
	follower.SetLeader(api.LeaderInfo{ID: "n3", HTTPAddr: hostOf(ots), Term: 4})
	other.SetLeader(api.LeaderInfo{ID: "n2", HTTPAddr: strings.TrimPrefix(fURL, "http://"), Term: 4})
	r = rawDo(t, fURL, "GET", "/v1/cluster", nil)
	if r.status != 503 || r.errCode() != "no_leader" {
		t.Fatalf("forwarding loop: %d %s", r.status, r.body)
	}

	// Leader unknown.
	follower.SetLeader(api.LeaderInfo{Term: 5})
	r = rawDo(t, fURL, "POST", "/v1/acquire", strings.NewReader(`{}`))
	if r.status != 503 || r.errCode() != "no_leader" || r.header.Get(api.HeaderTerm) != "5" {
		t.Fatalf("leader unknown: %d %s %v", r.status, r.body, r.header)
	}
	// Leader known by id only.
	follower.SetLeader(api.LeaderInfo{ID: "n1", Term: 5})
	r = rawDo(t, fURL, "GET", "/v1/lock?name=x", nil)
	if r.status != 503 || r.errCode() != "no_leader" {
		t.Fatalf("leader address unknown: %d %s", r.status, r.body)
	}
	// Leader unreachable.
	follower.SetLeader(api.LeaderInfo{ID: "n1", HTTPAddr: httpapitest.ClosedAddr(t), Term: 6})
	for _, m := range []string{"GET /v1/lock?name=x", "POST /v1/sessions"} {
		method, path, _ := strings.Cut(m, " ")
		r = rawDo(t, fURL, method, path, strings.NewReader(``))
		if r.status != 503 || r.errCode() != "no_leader" || r.header.Get(api.HeaderLeader) != "n1" || r.header.Get(api.HeaderTerm) != "6" {
			t.Fatalf("%s to unreachable leader: %d %s %v", m, r.status, r.body, r.header)
		}
	}
	// Health never forwards.
	r = rawDo(t, fURL, "GET", "/v1/health", nil)
	if r.status != 200 {
		t.Fatalf("health: %d %s", r.status, r.body)
	}
}

// TestClientRotates: the first address is down; the client moves on.
func TestClientRotates(t *testing.T) {
	f := httpapitest.New("n1")
	ts := newTestServer(t, f)
	c := newTestClient(t, httpapitest.ClosedAddr(t), hostOf(ts))
	ctx := testCtx(t)
	s, err := c.OpenSession(ctx, api.OpenRequest{})
	if err != nil {
		t.Fatalf("open with the first node down: %v", err)
	}
	if _, err := c.KeepAlive(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	// A node answering no_leader: the client moves to the next one.
	down := httpapitest.New("n2")
	down.SetLeader(api.LeaderInfo{Term: 1})
	dts := newTestServer(t, down)
	c2 := newTestClient(t, hostOf(dts), hostOf(ts))
	if _, err := c2.KeepAlive(ctx, s.ID); err != nil {
		t.Fatalf("keepalive with a leaderless first node: %v", err)
	}
	// Every node down: the call ends with ctx, code no_leader.
	c3 := newTestClient(t, httpapitest.ClosedAddr(t), httpapitest.ClosedAddr(t))
	sctx, cancel := testCtxTimeout(t, 50*time.Millisecond)
	defer cancel()
	if _, err := c3.KeepAlive(sctx, s.ID); !errors.Is(err, api.ErrNoLeader) {
		t.Fatalf("all down: %v", err)
	}
}

// frozenFirst is a live node behind a frozen one: a client whose first
// address is frozen, the live node's fake service, and a session on it.
func frozenFirst(t *testing.T) (*httpapitest.Fake, *client.Client, api.Info) {
	t.Helper()
	f := httpapitest.New("n1")
	ts := newTestServer(t, f)
	c := newTestClient(t, httpapitest.FrozenAddr(t), hostOf(ts))
	s, err := f.OpenSession(testCtx(t), api.OpenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return f, c, s
}

// A node that accepts connections and never answers costs a call with a
// deadline at most half of it: the attempt times out, the call moves on to
// the next address and succeeds there, and later calls start there.
func TestClientMovesOnFromFrozenNodeWithinTheDeadline(t *testing.T) {
	f, c, s := frozenFirst(t)
	before := f.Calls("*")
	ctx, cancel := testCtxTimeout(t, 2*time.Second)
	defer cancel()
	if _, err := c.KeepAlive(ctx, s.ID); err != nil {
		t.Fatalf("keepalive with a frozen first node and a 2s deadline: %v", err)
	}
	// The next call goes straight to the node that answers.
	ctx2, cancel2 := testCtxTimeout(t, 2*time.Second)
	defer cancel2()
	if _, err := c.KeepAlive(ctx2, s.ID); err != nil {
		t.Fatal(err)
	}
	if n := f.Calls("*") - before; n != 2 {
		t.Fatalf("%d keepalives reached the live node, want 2", n)
	}
}

// A caller that gives up on a call stuck at a frozen node (no deadline,
// its ctx cancelled) moves the client on: the next call starts at the next
// address instead of the frozen one.
func TestClientMovesOnWhenTheCallerAbandonsAFrozenNode(t *testing.T) {
	f, c, s := frozenFirst(t)
	before := f.Calls("*")
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan error, 1)
	go func() {
		_, err := c.KeepAlive(ctx, s.ID)
		done <- err
	}()
	// The call hangs at the frozen node until the caller gives up.
	select {
	case err := <-done:
		t.Fatalf("keepalive to a frozen node returned %v before it was abandoned", err)
	case <-time.After(200 * time.Millisecond):
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned call: %v", err)
	}
	ctx2, cancel2 := testCtxTimeout(t, 5*time.Second)
	defer cancel2()
	if _, err := c.KeepAlive(ctx2, s.ID); err != nil {
		t.Fatalf("keepalive after abandoning the frozen node: %v", err)
	}
	if n := f.Calls("*") - before; n != 1 {
		t.Fatalf("%d keepalives reached the live node, want 1", n)
	}
}

// A follower that forwarded a request to a leader that then stops being
// its leader (frozen, stepped down) answers it at once — unknown_outcome
// for a write, so that the client asks again — instead of waiting on the
// old leader.
func TestForwardedRequestFollowsLeaderChange(t *testing.T) {
	leader, follower, _, fURL := twoNodes(t)
	ctx := testCtx(t)
	s, err := leader.OpenSession(ctx, api.OpenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leader.Acquire(ctx, api.AcquireRequest{Name: "f", Session: s.ID, Holder: "h", Mode: 1}); err != nil {
		t.Fatal(err)
	}
	done := make(chan rawResp, 1)
	go func() {
		done <- rawDo(t, fURL, "POST", "/v1/acquire",
			strings.NewReader(`{"name":"f","session":"`+s.ID+`","holder":"w","wait":"30s"}`))
	}()
	select {
	case r := <-done:
		t.Fatalf("the forwarded wait answered %d %s before the leader changed", r.status, r.errCode())
	case <-time.After(300 * time.Millisecond):
	}
	follower.SetLeader(api.LeaderInfo{ID: "n3", HTTPAddr: httpapitest.ClosedAddr(t), Term: 4})
	select {
	case r := <-done:
		if r.status != 503 || r.errCode() != "unknown_outcome" {
			t.Fatalf("forwarded wait after the leader changed: %d %s, want 503 unknown_outcome", r.status, r.errCode())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the forwarded wait still hangs on the old leader")
	}
}
