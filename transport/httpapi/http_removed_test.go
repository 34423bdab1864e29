package httpapi

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/transport/client"
	"github.com/raftlock/raftlock/transport/httpapi/httpapitest"
)

// removedService is a Fake whose node was removed from the
// cluster: Removed names peers.
type removedService struct {
	*httpapitest.Fake
	peers []string
	// member, while set, makes the node a member still (not removed).
	member atomic.Bool
}

func (r *removedService) Removed() (bool, []string) {
	if r.member.Load() {
		return false, nil
	}
	return true, r.peers
}

// serve serves r's HTTP API until the test ends.
func (r *removedService) serve(t *testing.T) *httptest.Server {
	ts := httptest.NewServer(NewServer(r))
	t.Cleanup(ts.Close)
	return ts
}

// A node removed from the cluster answers every request it would forward
// with no_leader at once, naming the leader its peers name (the highest
// term's) in its leader headers and its message; with no peer naming one,
// it says so and names none.
func TestRemovedNodeAnswersNoLeaderNamingTheLeader(t *testing.T) {
	// Two peers (their peer ports serve the API): one lags (term 4,
	// leader n2), one is current (term 7, leader n6).
	lagging := httpapitest.New("n3")
	lagging.SetLeader(api.LeaderInfo{ID: "n2", HTTPAddr: "127.0.0.1:2", Term: 4})
	current := httpapitest.New("n6")
	current.SetLeader(api.LeaderInfo{ID: "n6", HTTPAddr: "127.0.0.1:6", Self: true, Term: 7})
	lp, cp := newTestServer(t, lagging), newTestServer(t, current)

	removed := httpapitest.New("n1")
	removed.SetLeader(api.LeaderInfo{Term: 5}) // knows no leader
	svc := &removedService{Fake: removed, peers: []string{hostOf(lp), hostOf(cp), "127.0.0.1:1"}}
	ts := svc.serve(t)

	for _, req := range []struct{ method, path, body string }{
		{http.MethodGet, "/v1/lock?name=x", ""},
		{http.MethodPost, "/v1/sessions/abc/keepalive", ""},
		{http.MethodPost, "/v1/acquire", `{"name":"x","session":"s","holder":"h"}`},
	} {
		r, err := http.NewRequest(req.method, ts.URL+req.path, strings.NewReader(req.body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var er api.ErrorReply
		_ = json.Unmarshal(body, &er)
		if resp.StatusCode != http.StatusServiceUnavailable || er.Error.Code != "no_leader" {
			t.Fatalf("%s %s: HTTP %d %s, want 503 no_leader", req.method, req.path, resp.StatusCode, body)
		}
		if !strings.Contains(er.Error.Message, "removed from the cluster") || !strings.Contains(er.Error.Message, "n6 at 127.0.0.1:6") {
			t.Fatalf("%s %s: message %q", req.method, req.path, er.Error.Message)
		}
		if got := resp.Header.Get(api.HeaderLeaderAddr); got != "127.0.0.1:6" || resp.Header.Get(api.HeaderLeader) != "n6" || resp.Header.Get(api.HeaderTerm) != "7" {
			t.Fatalf("%s %s: leader headers %v", req.method, req.path, resp.Header)
		}
	}
	if n := removed.Calls("*"); n != 0 {
		t.Fatalf("the removed node's service served %d calls", n)
	}

	// No peer names a leader.
	alone := &removedService{Fake: httpapitest.New("n1"), peers: []string{"127.0.0.1:1"}}
	alone.SetLeader(api.LeaderInfo{Term: 5})
	resp, err := http.Get(alone.serve(t).URL + "/v1/lock?name=x")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get(api.HeaderLeaderAddr) != "" ||
		!strings.Contains(string(body), "no member it knows of named the leader") {
		t.Fatalf("HTTP %d %s, headers %v", resp.StatusCode, body, resp.Header)
	}
}

// A client given only n1 reaches the leader n1 names once it was
// removed.
func TestClientFollowsTheLeaderARemovedNodeNames(t *testing.T) {
	current := httpapitest.New("n6")
	cur := newTestServer(t, current)
	current.SetLeader(api.LeaderInfo{ID: "n6", HTTPAddr: hostOf(cur), Self: true, Term: 7})
	n1 := httpapitest.New("n1")
	svc := &removedService{Fake: n1, peers: []string{hostOf(cur)}}
	svc.member.Store(true)
	old := svc.serve(t)
	n1.SetLeader(api.LeaderInfo{ID: "n1", HTTPAddr: hostOf(old), Self: true, Term: 5})
	c, err := client.NewClient([]string{hostOf(old)}, client.WithMemberSync(client.DefaultMemberSync))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.LockState(testCtx(t), "x"); err != nil { // n1 leads
		t.Fatal(err)
	}
	svc.member.Store(false)
	n1.SetLeader(api.LeaderInfo{Term: 5}) // removed: it knows no leader
	if _, err := c.LockState(testCtx(t), "x"); err != nil {
		t.Fatalf("lock read through a removed node: %v", err)
	}
	if current.Calls("LockState") != 1 {
		t.Fatalf("the leader served %d reads, want 1", current.Calls("LockState"))
	}
}
