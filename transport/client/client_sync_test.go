package client

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"
)

// clusterBody is a GET /v1/cluster answer naming leader (an id) and the
// members n1, n2... at addrs.
func clusterBody(leader string, term uint64, addrs ...string) string {
	var ms []string
	for i, a := range addrs {
		ms = append(ms, fmt.Sprintf(`{"id":"n%d","http_addr":%q,"voter":true}`, i+1, a))
	}
	return fmt.Sprintf(`{"leader":%q,"term":%d,"serving":true,"members":[%s]}`, leader, term, joinComma(ms))
}

func joinComma(xs []string) string {
	out := ""
	for i, x := range xs {
		if i > 0 {
			out += ","
		}
		out += x
	}
	return out
}

// A leader address an answer names that the client was not given is
// added to its addresses and used (the member sync is on by default): a
// client follows the leader wherever the cluster's members now are.
func TestClientFollowsALeaderAddressItWasNotGiven(t *testing.T) {
	a, stranger := newScriptedNode(t), newScriptedNode(t)
	c, cnt := newCountingClient(t, []string{a.addr()}, WithMemberSync(DefaultMemberSync))
	a.names(a.addr(), 4) // the given address is a member's own
	healthGoesTo(t, c, cnt, a.addr())
	a.names(stranger.addr(), 5)
	healthGoesTo(t, c, cnt, a.addr())
	if l := knownLeader(c); l != stranger.addr() {
		t.Fatalf("leader %q, want %s", l, stranger.addr())
	}
	healthGoesTo(t, c, cnt, stranger.addr())
	if got := c.Addrs(); !slices.Equal(got, []string{a.addr(), stranger.addr()}) {
		t.Fatalf("addresses %v", got)
	}
	// Anything but host:port is refused.
	for _, bad := range []string{"http://x:1", "x:1/path", "nohost", ":1", "a b:1"} {
		stranger.names(bad, 6)
		healthGoesTo(t, c, cnt, stranger.addr())
		if slices.Contains(c.Addrs(), bad) {
			t.Fatalf("the client took %q as an address", bad)
		}
	}
}

// A client whose given addresses the cluster does not know (proxies, a
// load balancer) keeps to them: it takes no address an answer names, nor
// a member list without any of them.
func TestClientBehindProxiesKeepsItsAddresses(t *testing.T) {
	a, b := newScriptedNode(t), newScriptedNode(t)
	c, cnt := newCountingClient(t, []string{a.addr()}, WithMemberSync(DefaultMemberSync))
	a.names(b.addr(), 5)
	healthGoesTo(t, c, cnt, a.addr())
	healthGoesTo(t, c, cnt, a.addr())
	a.answers(http.StatusOK, clusterBody("n1", 7, b.addr()))
	if _, err := c.Cluster(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if got := c.Addrs(); !slices.Equal(got, []string{a.addr()}) {
		t.Fatalf("addresses %v, want only the given %s", got, a.addr())
	}
	if cnt.count(b.addr()) != 0 {
		t.Fatalf("requests %v, want none at %s", cnt.n, b.addr())
	}
}

// The cluster's member list becomes the client's address list: new
// members are added, removed ones dropped, and an answer that names no
// address changes nothing (the list never drops to none).
func TestClientTakesTheMembersFromCluster(t *testing.T) {
	a, b, cn := newScriptedNode(t), newScriptedNode(t), newScriptedNode(t)
	c, cnt := newCountingClient(t, []string{a.addr()}, WithMemberSync(DefaultMemberSync))
	a.answers(http.StatusOK, clusterBody("n2", 6, a.addr(), b.addr(), cn.addr()))
	if _, err := c.Cluster(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if got := c.Addrs(); !slices.Equal(got, []string{a.addr(), b.addr(), cn.addr()}) {
		t.Fatalf("addresses %v, want the members'", got)
	}
	for _, n := range []*scriptedNode{a, b, cn} {
		n.answers(http.StatusOK, clusterBody("n2", 7, b.addr(), cn.addr()))
	}
	if _, err := c.Cluster(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if got := c.Addrs(); !slices.Equal(got, []string{b.addr(), cn.addr()}) {
		t.Fatalf("addresses %v, want the members' %v", got, []string{b.addr(), cn.addr()})
	}
	healthGoesTo(t, c, cnt, cn.addr()) // n2, the leader
	cn.answers(http.StatusOK, `{"leader":"n1","term":7,"serving":true,"members":[]}`)
	if _, err := c.Cluster(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if got := c.Addrs(); !slices.Equal(got, []string{b.addr(), cn.addr()}) {
		t.Fatalf("addresses %v after an answer with no members, want them kept", got)
	}
}

// A client none of whose addresses answers asks again where the members
// are, at the addresses it was given too: those it learned all failed,
// the seed answers, and the call goes through.
func TestClientFallsBackToItsSeedsWhenEveryAddressFails(t *testing.T) {
	a := newScriptedNode(t)
	gone := newScriptedNode(t)
	goneAddr := gone.addr()
	gone.ts.Close() // a member that was removed and stopped: refused
	c, _ := newCountingClient(t, []string{a.addr()}, WithMemberSync(DefaultMemberSync))
	for _, body := range []string{clusterBody("n1", 2, a.addr(), goneAddr), clusterBody("n1", 3, goneAddr)} {
		a.answers(http.StatusOK, body)
		if _, err := c.Cluster(testCtx(t)); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.Addrs(); !slices.Equal(got, []string{goneAddr}) {
		t.Fatalf("addresses %v", got)
	}
	// The seed now answers with itself as the only member.
	a.answers(http.StatusOK, clusterBody("n1", 4, a.addr()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := c.Health(ctx); err != nil {
		t.Fatalf("health: %v (addresses %v)", err, c.Addrs())
	}
	t.Logf("the call went through %v after every address it knew failed", time.Since(start).Round(time.Millisecond))
	if got := c.Addrs(); !slices.Equal(got, []string{a.addr()}) {
		t.Fatalf("addresses %v, want the seed's answer %v", got, []string{a.addr()})
	}
}

// An answer whose membership digest (X-Raftlock-Members) differs from the
// last one the client saw makes it learn the members at once, not at its
// next period: a rotation of every member, faster than the period, leaves
// it addresses that answer.
func TestClientSyncsMembersWhenTheMembershipDigestChanges(t *testing.T) {
	a, b := newScriptedNode(t), newScriptedNode(t)
	c, cnt := newCountingClient(t, []string{a.addr()}, WithMemberSync(time.Hour))
	a.names(a.addr(), 4) // the given address is a member's own
	a.tags("1f")
	healthGoesTo(t, c, cnt, a.addr())
	healthGoesTo(t, c, cnt, a.addr())
	// b joins: the digest changes, and GET /v1/cluster would name it (a
	// scripted node answers every route with the same body, which the
	// health call ignores).
	a.answers(http.StatusOK, clusterBody("n1", 4, a.addr(), b.addr()))
	if slices.Contains(c.Addrs(), b.addr()) {
		t.Fatalf("addresses %v before any change", c.Addrs())
	}
	a.tags("2e")
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Contains(c.Addrs(), b.addr()) {
		if time.Now().After(deadline) {
			t.Fatalf("addresses %v 5 s after the membership changed, want %s learned (period: an hour)", c.Addrs(), b.addr())
		}
		if _, err := c.Health(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond) // pacing calls to a test server
	}
}

// The sync runs on its period from the client's first call.
func TestClientSyncsMembersOnItsPeriod(t *testing.T) {
	a, b := newScriptedNode(t), newScriptedNode(t)
	c, _ := newCountingClient(t, []string{a.addr()}, WithMemberSync(20*time.Millisecond))
	a.answers(http.StatusOK, clusterBody("n1", 2, a.addr(), b.addr()))
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Contains(c.Addrs(), b.addr()) {
		if time.Now().After(deadline) {
			t.Fatalf("addresses %v after 5 s of calls, want %s learned", c.Addrs(), b.addr())
		}
		if _, err := c.Health(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond) // pacing calls to a test server
	}
}

// A client given one address talks to that node alone unless told to
// follow the cluster: the sync is off by default, on for two or more.
func TestClientGivenOneAddressStaysWithIt(t *testing.T) {
	a, b := newScriptedNode(t), newScriptedNode(t)
	c, cnt := newCountingClient(t, []string{a.addr()})
	a.names(a.addr(), 4)
	healthGoesTo(t, c, cnt, a.addr())
	a.names(b.addr(), 5)
	healthGoesTo(t, c, cnt, a.addr())
	healthGoesTo(t, c, cnt, a.addr())
	if got := c.Addrs(); !slices.Equal(got, []string{a.addr()}) {
		t.Fatalf("addresses %v", got)
	}
	two, cnt2 := newCountingClient(t, []string{a.addr(), b.addr()})
	stranger := newScriptedNode(t)
	a.names(a.addr(), 6)
	healthGoesTo(t, two, cnt2, a.addr())
	a.names(stranger.addr(), 7)
	healthGoesTo(t, two, cnt2, a.addr())
	healthGoesTo(t, two, cnt2, stranger.addr())
}

// A learned address takes the scheme of the given ones.
func TestLearnedAddressesTakeTheGivenScheme(t *testing.T) {
	for _, tc := range []struct {
		given []string
		want  string
	}{
		{[]string{"https://127.0.0.1:1", "https://127.0.0.1:2"}, "https://127.0.0.1:3/x"},
		{[]string{"127.0.0.1:1", "http://127.0.0.1:2"}, "http://127.0.0.1:3/x"},
	} {
		c, err := NewClient(tc.given)
		if err != nil {
			t.Fatal(err)
		}
		c.learn("127.0.0.1:1", 1) // a given address leads: the sync may add
		if !c.addLearned("127.0.0.1:3") {
			t.Fatalf("%v: the address was not added", tc.given)
		}
		if got := c.url("127.0.0.1:3", "/x"); got != tc.want {
			t.Errorf("%v: learned address URL %q, want %q", tc.given, got, tc.want)
		}
	}
}
