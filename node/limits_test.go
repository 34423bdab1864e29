package node

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
)

// Over HTTP, a request past any limit is answered 429 resource_exhausted
// and changes nothing: no session opened, no lock taken, no queue place.
// The limits are the leader's Config, stamped into the commands.
func TestLimitsAreAnswered429ResourceExhaustedAndChangeNothing(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.Limits = api.Limits{Sessions: 3, Locks: 3, WaitersPerLock: 1, LocksPerSession: 2}
	}, withHTTP)
	cl := c.client(t)
	ctx := ctxT(t)
	var ids []string
	for range 3 {
		info, err := cl.OpenSession(ctx, api.OpenRequest{Name: "lim"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, info.ID)
	}
	for _, req := range []api.AcquireRequest{{Name: "a", Session: ids[0], Holder: "h"},
		{Name: "b", Session: ids[0], Holder: "h"}, {Name: "c", Session: ids[1], Holder: "h"}} {
		if _, err := cl.Acquire(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	n, i := c.leader()
	addr := c.httpAddrs[i]
	// The queue of a is full with one waiter.
	waiting := goPost(ctx, addr, "/v1/acquire", acquireBody{Name: "a", Session: ids[1], Holder: "w", Wait: "1m"})
	eventually(t, 10*time.Second, "the waiter queued", func() error {
		if l, _ := n.fsm.Lock("a"); len(l.Waiters) != 1 {
			return fmt.Errorf("lock a: %d waiters", len(l.Waiters))
		}
		return nil
	})
	sessions, locks := n.fsm.Sessions(), n.fsm.Locks("")
	for _, tc := range []struct {
		what, path string
		body       any
	}{
		{"sessions", "/v1/sessions", map[string]string{"name": "one too many"}},
		{"locks", "/v1/acquire", acquireBody{Name: "d", Session: ids[2], Holder: "h"}},
		{"locks per session", "/v1/acquire", acquireBody{Name: "c", Session: ids[0], Holder: "h", Wait: "1s"}},
		{"waiters per lock", "/v1/acquire", acquireBody{Name: "a", Session: ids[2], Holder: "w", Wait: "1s"}},
	} {
		if a := rawPost(ctx, addr, tc.path, tc.body); a.status != http.StatusTooManyRequests || a.code != string(api.CodeResourceExhausted) {
			t.Errorf("%s: past the limit answered %d %q (%v), want 429 resource_exhausted", tc.what, a.status, a.code, a.err)
		}
	}
	if s, l := n.fsm.Sessions(), n.fsm.Locks(""); !reflect.DeepEqual(s, sessions) || !reflect.DeepEqual(l, locks) {
		t.Fatalf("refused requests changed the state:\n%+v\n%+v\n->\n%+v\n%+v", sessions, locks, s, l)
	}
	if err := cl.Release(ctx, api.ReleaseRequest{Name: "a", Session: ids[0], Holder: "h"}); err != nil {
		t.Fatal(err)
	}
	if a := <-waiting; a.status != http.StatusOK {
		t.Fatalf("the queued waiter: %d %q (%v)", a.status, a.code, a.err)
	}
}

// GET /v1/locks answers pages of at most limit locks in name order with
// the next cursor; a request without limit gets the default page; the Go
// client pages through them all.
func TestLocksListingIsPaginated(t *testing.T) {
	c := newTestCluster(t, 3, nil, withHTTP)
	cl := c.client(t)
	ctx := ctxT(t)
	info, err := cl.OpenSession(ctx, api.OpenRequest{Name: "pages"})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 25 {
		name := fmt.Sprintf("p/%02d", i)
		want = append(want, name)
		if _, err := cl.Acquire(ctx, api.AcquireRequest{Name: name, Session: info.ID, Holder: "h"}); err != nil {
			t.Fatal(err)
		}
	}
	_, i := c.leader()
	get := func(query string) (int, []string, string) {
		resp, err := http.Get("http://" + c.httpAddrs[i] + "/v1/locks?" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		var out struct {
			Locks []struct {
				Name string `json:"name"`
			} `json:"locks"`
			Next *string `json:"next"`
		}
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, l := range out.Locks {
			names = append(names, l.Name)
		}
		if resp.StatusCode == http.StatusOK && out.Next == nil {
			t.Fatalf("%s: no next in %s", query, data)
		}
		next := ""
		if out.Next != nil {
			next = *out.Next
		}
		return resp.StatusCode, names, next
	}
	var got []string
	after := ""
	for pages := 1; ; pages++ {
		code, names, next := get("prefix=p/&limit=10&after=" + after)
		if code != http.StatusOK || len(names) > 10 {
			t.Fatalf("page %d: %d, %d locks", pages, code, len(names))
		}
		got = append(got, names...)
		if next == "" {
			if pages != 3 {
				t.Fatalf("%d pages, want 3", pages)
			}
			break
		}
		after = next
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("pages listed %v, want %v", got, want)
	}
	if code, names, next := get("prefix=p/"); code != http.StatusOK || len(names) != 25 || next != "" {
		t.Fatalf("default page: %d, %d locks, next %q", code, len(names), next)
	}
	for _, q := range []string{"limit=0", "limit=10001", "limit=x", "limit=-1"} {
		if code, _, _ := get(q); code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", q, code)
		}
	}
	all, err := cl.Locks(ctx, "p/")
	if err != nil || len(all) != 25 {
		t.Fatalf("client listing: %d locks, %v", len(all), err)
	}
}

// With ACLs on, one token holds at most Limits.SessionsPerToken open
// sessions: the next open with it is answered 429 resource_exhausted and
// opens nothing, while another token still opens its own.
func TestSessionsPerTokenLimitIsAnswered429AndLeavesOtherTokensAlone(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.ACL = true
		cfg.Limits = api.Limits{SessionsPerToken: 2}
	}, withHTTP)
	ctx := ctxT(t)
	_, admin := c.bootstrapACL(t, ctx)
	var secrets []string
	for _, name := range []string{"alice", "bob"} {
		tok, err := admin.CreateToken(ctx, api.TokenRequest{Name: name, Rules: []string{"write:"}})
		if err != nil {
			t.Fatal(err)
		}
		secrets = append(secrets, tok.Secret)
	}
	alice, bob := tokenClient(t, c.httpAddrs, secrets[0]), tokenClient(t, c.httpAddrs, secrets[1])
	for range 2 {
		if _, err := alice.OpenSession(ctx, api.OpenRequest{Name: "a"}); err != nil {
			t.Fatal(err)
		}
	}
	n, i := c.leader()
	before := n.fsm.Sessions()
	if st, code, _ := aclDo(ctx, c.httpAddrs[i], "POST", "/v1/sessions", secrets[0], map[string]string{"name": "third"}); st != http.StatusTooManyRequests || code != string(api.CodeResourceExhausted) {
		t.Fatalf("alice's third session: %d %q, want 429 resource_exhausted", st, code)
	}
	if after := n.fsm.Sessions(); !reflect.DeepEqual(after, before) {
		t.Fatalf("the refused open changed the sessions: %+v -> %+v", before, after)
	}
	if _, err := bob.OpenSession(ctx, api.OpenRequest{Name: "b"}); err != nil {
		t.Fatalf("bob's first session: %v", err)
	}
}
