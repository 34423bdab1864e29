package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/transport/httpapi/httpapitest"
)

// hostCounter is a RoundTripper that counts a Client's requests per
// address. It counts in RoundTrip, so every request of a call is counted
// by the time the call returns.
type hostCounter struct {
	rt http.RoundTripper
	mu sync.Mutex
	n  map[string]int
}

func (h *hostCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	h.mu.Lock()
	h.n[r.URL.Host]++
	h.mu.Unlock()
	return h.rt.RoundTrip(r)
}

// count is how many requests went to addr.
func (h *hostCounter) count(addr string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[addr]
}

// total is how many requests went anywhere.
func (h *hostCounter) total() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, v := range h.n {
		n += v
	}
	return n
}

// newCountingClient is a client of addrs with short backoffs whose
// requests are counted per address.
func newCountingClient(t *testing.T, addrs []string, opts ...ClientOption) (*Client, *hostCounter) {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	cnt := &hostCounter{rt: tr, n: map[string]int{}}
	opts = append([]ClientOption{WithRetryBackoff(time.Millisecond, 5*time.Millisecond),
		WithHTTPClient(&http.Client{Transport: cnt})}, opts...)
	c, err := NewClient(addrs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c, cnt
}

// setSuspectFor changes how long addresses stay suspect (read under
// track.mu).
func setSuspectFor(c *Client, d time.Duration) {
	c.track.mu.Lock()
	defer c.track.mu.Unlock()
	c.suspectFor = d
}

// knownLeader is the leader address the client tracks ("" if none).
func knownLeader(c *Client) string {
	c.track.mu.Lock()
	defer c.track.mu.Unlock()
	return c.track.leader
}

// isSuspect reports whether the client takes addr for suspect now.
func isSuspect(c *Client, addr string) bool {
	c.track.mu.Lock()
	defer c.track.mu.Unlock()
	return c.suspectLocked(addr, time.Now())
}

// scriptedNode is an HTTP server that answers every request with the
// status, body and leader headers it is told to.
type scriptedNode struct {
	ts         *httptest.Server
	mu         sync.Mutex
	leaderAddr string
	term       uint64
	status     int
	body       string
	members    string // api.HeaderMembers, "" for none
}

func newScriptedNode(t *testing.T) *scriptedNode {
	t.Helper()
	n := &scriptedNode{status: http.StatusOK, body: `{"ok":true}`}
	n.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.mu.Lock()
		la, term, status, body, members := n.leaderAddr, n.term, n.status, n.body, n.members
		n.mu.Unlock()
		if members != "" {
			w.Header().Set(api.HeaderMembers, members)
		}
		w.Header().Set(api.HeaderLeader, "someone")
		if la != "" {
			w.Header().Set(api.HeaderLeaderAddr, la)
		}
		w.Header().Set(api.HeaderTerm, strconv.FormatUint(term, 10))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}))
	t.Cleanup(n.ts.Close)
	return n
}

func (n *scriptedNode) addr() string { return hostOf(n.ts) }

// tags makes the node's answers carry the membership digest m.
func (n *scriptedNode) tags(m string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.members = m
}

// names makes the node name leaderAddr ("": none) at term in its answers.
func (n *scriptedNode) names(leaderAddr string, term uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.leaderAddr, n.term = leaderAddr, term
}

// answers makes the node answer with status and body.
func (n *scriptedNode) answers(status int, body string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.status, n.body = status, body
}

// healthGoesTo makes one Health call and checks that it sent exactly one
// request, to want.
func healthGoesTo(t *testing.T, c *Client, cnt *hostCounter, want string) {
	t.Helper()
	before, total := cnt.count(want), cnt.total()
	if _, err := c.Health(testCtx(t)); err != nil {
		t.Fatalf("health: %v", err)
	}
	if cnt.count(want) != before+1 || cnt.total() != total+1 {
		t.Fatalf("health went elsewhere than %s (requests: %v)", want, cnt.n)
	}
}

// A follower's forwarded answer names the leader's address: the client's
// next calls go straight to the leader.
func TestClientSendsToTheLeaderItLearnedFromAnAnswer(t *testing.T) {
	leader, follower := httpapitest.New("b"), httpapitest.New("a")
	lts, fts := newTestServer(t, leader), newTestServer(t, follower)
	leader.SetLeader(api.LeaderInfo{ID: "b", HTTPAddr: hostOf(lts), Self: true, Term: 3})
	follower.SetLeader(api.LeaderInfo{ID: "b", HTTPAddr: hostOf(lts), Term: 3})
	ctx := testCtx(t)
	s, err := leader.OpenSession(ctx, api.OpenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	served := leader.Calls("*")
	c, cnt := newCountingClient(t, []string{hostOf(fts), hostOf(lts)})
	if _, err := c.KeepAlive(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if cnt.count(hostOf(fts)) != 1 || cnt.count(hostOf(lts)) != 0 {
		t.Fatalf("first call: requests %v, want one to the follower", cnt.n)
	}
	for i := range 3 {
		if _, err := c.KeepAlive(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
		if cnt.count(hostOf(fts)) != 1 || cnt.count(hostOf(lts)) != i+1 {
			t.Fatalf("call %d after learning the leader: requests %v, want it at the leader", i+2, cnt.n)
		}
	}
	if n := leader.Calls("*") - served; n != 4 {
		t.Fatalf("the leader served %d keepalives, want 4", n)
	}
}

// With the member sync off, a leader address that is not one of the
// client's addresses, even one spelled differently from a configured one,
// is never used.
func TestClientWithoutMemberSyncIgnoresALeaderAddressItWasNotGiven(t *testing.T) {
	a, b, stranger := newScriptedNode(t), newScriptedNode(t), newScriptedNode(t)
	_, port, err := net.SplitHostPort(b.addr())
	if err != nil {
		t.Fatal(err)
	}
	c, cnt := newCountingClient(t, []string{a.addr(), b.addr()}, WithMemberSync(-1))
	for _, la := range []string{stranger.addr(), net.JoinHostPort("localhost", port)} {
		a.names(la, 5)
		for range 3 {
			healthGoesTo(t, c, cnt, a.addr())
		}
		if l := knownLeader(c); l != "" {
			t.Fatalf("the client took %s for the leader when told %s", l, la)
		}
	}
	if cnt.count(stranger.addr()) != 0 || cnt.count(b.addr()) != 0 {
		t.Fatalf("requests %v, want all at the first address", cnt.n)
	}
}

// The client learns the leader at the newest term: an answer naming a
// leader at an older term than the known one does not replace it, one at
// the same or a newer term does.
func TestClientPrefersTheLeaderOfTheNewestTerm(t *testing.T) {
	a, b, cn := newScriptedNode(t), newScriptedNode(t), newScriptedNode(t)
	c, cnt := newCountingClient(t, []string{a.addr(), b.addr(), cn.addr()})
	a.names(b.addr(), 5)
	healthGoesTo(t, c, cnt, a.addr())
	healthGoesTo(t, c, cnt, b.addr())
	b.names(cn.addr(), 6) // newer term
	healthGoesTo(t, c, cnt, b.addr())
	healthGoesTo(t, c, cnt, cn.addr())
	cn.names(a.addr(), 4) // older term: ignored
	healthGoesTo(t, c, cnt, cn.addr())
	healthGoesTo(t, c, cnt, cn.addr())
	cn.names(a.addr(), 6) // same term: taken
	healthGoesTo(t, c, cnt, cn.addr())
	healthGoesTo(t, c, cnt, a.addr())
	a.names(b.addr(), 7) // newer term
	healthGoesTo(t, c, cnt, a.addr())
	healthGoesTo(t, c, cnt, b.addr())
}

// Cluster's answer names the leader (its member entry's http_addr): the
// next calls go there, under the same term rule as the headers.
func TestClientLearnsTheLeaderFromCluster(t *testing.T) {
	a, b := newScriptedNode(t), newScriptedNode(t)
	c, cnt := newCountingClient(t, []string{a.addr(), b.addr()})
	a.answers(http.StatusOK, fmt.Sprintf(`{"leader":"n2","term":9,"members":[{"id":"n1","http_addr":%q},{"id":"n2","http_addr":%q}]}`,
		a.addr(), b.addr()))
	if _, err := c.Cluster(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if l := knownLeader(c); l != b.addr() {
		t.Fatalf("leader after Cluster: %q, want %s", l, b.addr())
	}
	healthGoesTo(t, c, cnt, b.addr())
	// An older term does not replace the leader learned at term 9.
	b.answers(http.StatusOK, fmt.Sprintf(`{"leader":"n1","term":8,"members":[{"id":"n1","http_addr":%q},{"id":"n2","http_addr":%q}]}`,
		a.addr(), b.addr()))
	if _, err := c.Cluster(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	healthGoesTo(t, c, cnt, b.addr())
}

// An attempt at the known leader that fails over (here a no_leader answer)
// forgets it; an answer that fails over cannot name its own address the
// leader.
func TestClientForgetsTheLeaderWhenAnAttemptThereFails(t *testing.T) {
	a, b := newScriptedNode(t), newScriptedNode(t)
	c, cnt := newCountingClient(t, []string{a.addr(), b.addr()})
	a.names(b.addr(), 3)
	b.names(b.addr(), 3)
	healthGoesTo(t, c, cnt, a.addr())
	healthGoesTo(t, c, cnt, b.addr())
	a.names("", 3)
	b.answers(http.StatusServiceUnavailable, `{"error":{"code":"no_leader","message":"lost the lead"}}`)
	if _, err := c.Health(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if cnt.count(b.addr()) != 2 || cnt.count(a.addr()) != 2 {
		t.Fatalf("requests %v, want the failed attempt at b retried at a", cnt.n)
	}
	if l := knownLeader(c); l != "" {
		t.Fatalf("the client still takes %q for the leader", l)
	}
	if isSuspect(c, b.addr()) {
		t.Fatal("an address that answered is suspect")
	}
	healthGoesTo(t, c, cnt, a.addr())
}

// skipsSuspect drives a client whose first address, bad, gets no answer
// (the attempt's own timeout fires, or the dial fails) and whose second is
// a live node: the address is suspect, so neither calls nor retries go
// there even when the rotation points at it; once its suspicion is over it
// is tried again.
func skipsSuspect(t *testing.T, bad string) {
	f := httpapitest.New("n1")
	ts := newTestServer(t, f)
	good := hostOf(ts)
	c, cnt := newCountingClient(t, []string{bad, good}, WithRequestTimeout(400*time.Millisecond))
	setSuspectFor(c, time.Hour)
	ctx := testCtx(t)
	s, err := f.OpenSession(ctx, api.OpenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.KeepAlive(ctx, s.ID); err != nil {
		t.Fatalf("keepalive with the first address not answering: %v", err)
	}
	if cnt.count(bad) != 1 || cnt.count(good) != 1 {
		t.Fatalf("first call: requests %v, want one at each address", cnt.n)
	}
	if !isSuspect(c, bad) {
		t.Fatal("the address that did not answer is not suspect")
	}
	// A no_leader answer rotates the client back onto the suspect address:
	// the retry skips it.
	f.Fail("KeepAlive", api.Errorf(api.CodeNoLeader, "election"))
	if _, err := c.KeepAlive(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if got := c.list()[c.cur.Load()%2]; got != bad {
		t.Fatalf("the rotation points at %s, want the suspect %s", got, bad)
	}
	for range 4 {
		if _, err := c.KeepAlive(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
	}
	if cnt.count(bad) != 1 || cnt.count(good) != 7 {
		t.Fatalf("requests %v, want none more at the suspect address", cnt.n)
	}
	// Its suspicion over, the address is tried again.
	setSuspectFor(c, time.Nanosecond)
	if _, err := c.KeepAlive(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if cnt.count(bad) != 2 || cnt.count(good) != 8 {
		t.Fatalf("requests %v after the suspicion ended, want one more at each address", cnt.n)
	}
}

// An address where an attempt's own timeout fired (a frozen node) is
// suspect: calls and retries go elsewhere until its suspicion ends.
func TestClientSkipsAnAddressThatTimedOut(t *testing.T) {
	skipsSuspect(t, httpapitest.FrozenAddr(t))
}

// An address whose dial failed is suspect like one that timed out.
func TestClientSkipsAnAddressWhoseDialFailed(t *testing.T) {
	skipsSuspect(t, httpapitest.ClosedAddr(t))
}

// A caller that ends its ctx while the leader holds its request (a waiting
// acquire at a healthy leader that has no grant yet) makes the leader
// neither suspect nor forgotten: the next call goes to the leader again.
func TestClientKeepsTheLeaderWhenTheCallerAbandonsAnAttempt(t *testing.T) {
	for _, how := range []string{"cancel", "deadline"} {
		t.Run(how, func(t *testing.T) {
			leader, follower := httpapitest.New("b"), httpapitest.New("a")
			lts, fts := newTestServer(t, leader), newTestServer(t, follower)
			la := hostOf(lts)
			leader.SetLeader(api.LeaderInfo{ID: "b", HTTPAddr: la, Self: true, Term: 3})
			follower.SetLeader(api.LeaderInfo{ID: "b", HTTPAddr: la, Term: 3})
			ctx := testCtx(t)
			s, err := leader.OpenSession(ctx, api.OpenRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := leader.Acquire(ctx, api.AcquireRequest{Name: "x", Session: s.ID, Holder: "other"}); err != nil {
				t.Fatal(err)
			}
			c, cnt := newCountingClient(t, []string{hostOf(fts), la})
			if _, err := c.KeepAlive(ctx, s.ID); err != nil {
				t.Fatal(err)
			}
			if knownLeader(c) != la {
				t.Fatalf("leader %q, want %s", knownLeader(c), la)
			}
			var wctx context.Context
			var cancel context.CancelFunc
			if how == "cancel" {
				wctx, cancel = context.WithCancel(ctx)
			} else {
				wctx, cancel = context.WithTimeout(ctx, 200*time.Millisecond)
			}
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := c.Acquire(wctx, api.AcquireRequest{Name: "x", Session: s.ID, Holder: "me", Wait: time.Minute})
				done <- err
			}()
			httpapitest.WaitFor(t, "the acquire waiting at the leader", func() bool {
				return leader.Peek("x").Waiters == 1
			})
			if how == "cancel" {
				cancel()
			}
			err = <-done
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("abandoned acquire: %v", err)
			}
			if knownLeader(c) != la || isSuspect(c, la) {
				t.Fatalf("after the abandoned attempt: leader %q, leader suspect %v", knownLeader(c), isSuspect(c, la))
			}
			before := cnt.count(la)
			if _, err := c.KeepAlive(ctx, s.ID); err != nil {
				t.Fatal(err)
			}
			if cnt.count(la) != before+1 || cnt.count(hostOf(fts)) != 1 {
				t.Fatalf("requests %v, want the call after the abandoned one at the leader", cnt.n)
			}
		})
	}
}

// When every address is suspect, a call starts where the rotation points,
// as without suspicion; otherwise it starts at the first address from
// there that is not suspect.
func TestClientStartsAtTheRotationWhenEveryAddressIsSuspect(t *testing.T) {
	c, _ := newCountingClient(t, []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"})
	c.noAnswer("127.0.0.1:2", true)
	if pos, viaLeader := c.pick(c.list(), 1, nil); pos%3 != 2 || viaLeader {
		t.Fatalf("pick from 1 with 2 suspect: %d %v, want 2 (the third address)", pos, viaLeader)
	}
	c.noAnswer("127.0.0.1:1", true)
	c.noAnswer("127.0.0.1:3", true)
	for idx := range uint64(3) {
		if pos, viaLeader := c.pick(c.list(), idx, nil); pos != idx || viaLeader {
			t.Fatalf("pick from %d with all suspect: %d %v, want %d", idx, pos, viaLeader, idx)
		}
	}
}

// With a resolver, its order alone decides where attempts go: leader
// headers do not redirect calls.
func TestClientWithAResolverIgnoresLeaderAnswers(t *testing.T) {
	a, b := newScriptedNode(t), newScriptedNode(t)
	a.names(b.addr(), 3)
	c, cnt := newCountingClient(t, nil, WithResolver(func() []string { return []string{a.addr(), b.addr()} }))
	for range 3 {
		healthGoesTo(t, c, cnt, a.addr())
	}
}

// Any answer from a suspect address ends its suspicion.
func TestClientClearsTheSuspicionOfAnAddressThatAnswers(t *testing.T) {
	a, b := newScriptedNode(t), newScriptedNode(t)
	c, cnt := newCountingClient(t, []string{a.addr(), b.addr()})
	setSuspectFor(c, time.Hour)
	c.noAnswer(a.addr(), true)
	c.noAnswer(b.addr(), true)
	// Every address suspect: the call goes where the rotation points.
	healthGoesTo(t, c, cnt, a.addr())
	if isSuspect(c, a.addr()) || !isSuspect(c, b.addr()) {
		t.Fatalf("after a answered: a suspect %v, b suspect %v; want only b", isSuspect(c, a.addr()), isSuspect(c, b.addr()))
	}
	// An error answer counts too.
	b.answers(http.StatusConflict, `{"error":{"code":"lock_busy","message":"busy"}}`)
	c.cur.Store(1)
	c.noAnswer(a.addr(), true)
	if _, err := c.Health(testCtx(t)); !errors.Is(err, api.ErrLockBusy) {
		t.Fatalf("health at b: %v, want lock_busy", err)
	}
	if cnt.count(b.addr()) != 1 || isSuspect(c, b.addr()) {
		t.Fatalf("after b's error answer: requests %v, b suspect %v", cnt.n, isSuspect(c, b.addr()))
	}
}

// Within one call, an address whose attempt failed over is not taken up
// again as the leader because another node still names it (a follower
// whose forward to it failed): the retry moves on to the next address.
func TestClientDoesNotReturnToAFailedLeaderWithinACall(t *testing.T) {
	a, c2, b := newScriptedNode(t), newScriptedNode(t), newScriptedNode(t)
	c, cnt := newCountingClient(t, []string{a.addr(), c2.addr(), b.addr()})
	a.names(b.addr(), 3)
	healthGoesTo(t, c, cnt, a.addr())
	noLeader := `{"error":{"code":"no_leader","message":"cannot reach the leader"}}`
	b.answers(http.StatusServiceUnavailable, noLeader)
	a.answers(http.StatusServiceUnavailable, noLeader)
	if _, err := c.Health(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if cnt.count(b.addr()) != 1 || cnt.count(a.addr()) != 2 || cnt.count(c2.addr()) != 1 {
		t.Fatalf("requests %v, want the call at b, then a, then the third address", cnt.n)
	}
}
