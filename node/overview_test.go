package node

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
)

// getOverview asks addr for GET /v1/overview with query q and secret
// ("": none), and decodes a 200 answer.
func getOverview(ctx context.Context, addr, q, secret string) (int, string, api.Overview, []byte) {
	st, code, body := aclDo(ctx, addr, "GET", "/v1/overview"+q, secret, nil)
	var ov api.Overview
	if st == http.StatusOK {
		if err := json.Unmarshal(body, &ov); err != nil {
			return st, "undecodable: " + err.Error(), ov, body
		}
	}
	return st, code, ov, body
}

// TestOverviewNeedsReadOnEveryLockAndShowsMembersToAdminsOnly pins the
// overview's ACL rule: no token is 401, a token reading only a prefix is
// 403, a token reading every lock sees locks, sessions and events but no
// members, and an admin token sees every member; the status page's own
// assets are served without a token.
func TestOverviewNeedsReadOnEveryLockAndShowsMembersToAdminsOnly(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) {
		slowRaft(cfg)
		cfg.ACL = true
	}, withHTTP)
	ctx := ctxT(t)
	_, li := c.leader()
	follower := c.httpAddrs[(li+1)%3]
	mgmt, admin := c.bootstrapACL(t, ctx)
	readAll, err := admin.CreateToken(ctx, api.TokenRequest{Name: "page", Rules: []string{"read:"}})
	if err != nil {
		t.Fatal(err)
	}
	readJobs, err := admin.CreateToken(ctx, api.TokenRequest{Name: "jobs", Rules: []string{"read:jobs/"}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := admin.OpenSession(ctx, api.OpenRequest{Name: "acl-page"})
	if err != nil {
		t.Fatal(err)
	}
	g, err := admin.Acquire(ctx, api.AcquireRequest{Name: "jobs/a", Session: info.ID, Holder: "h1"})
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, secret string
		status       int
		code         string
	}{
		{"no token", "", 401, "unauthenticated"},
		{"read:jobs/ token", readJobs.Secret, 403, "permission_denied"},
	} {
		if st, code, _, _ := getOverview(ctx, follower, "", tc.secret); st != tc.status || code != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, st, code, tc.status, tc.code)
		}
	}

	st, code, ov, body := getOverview(ctx, follower, "", readAll.Secret)
	if st != 200 {
		t.Fatalf("read: token: %d %s", st, code)
	}
	if !ov.MembersHidden || len(ov.Members) != 0 {
		t.Errorf("read: token: members_hidden %v, %d members; want hidden, none", ov.MembersHidden, len(ov.Members))
	}
	if len(ov.Locks) != 1 || len(ov.Locks[0].Holders) != 1 || ov.Locks[0].Holders[0].Token != uint64(g.Token) ||
		ov.Locks[0].Holders[0].SessionName != "acl-page" {
		t.Errorf("read: token: locks %+v, want jobs/a held by acl-page with token %d", ov.Locks, g.Token)
	}
	if strings.Contains(string(body), info.ID) {
		t.Errorf("the overview carries the session id: %s", body)
	}

	st, code, ov, _ = getOverview(ctx, follower, "", mgmt)
	if st != 200 {
		t.Fatalf("admin: %d %s", st, code)
	}
	if ov.MembersHidden || len(ov.Members) != 3 {
		t.Errorf("admin: members_hidden %v, members %+v; want the 3 members", ov.MembersHidden, ov.Members)
	}

	for _, p := range []string{"/ui/", "/ui/app.js", "/ui/style.css"} {
		if st, _, _ := aclDo(ctx, follower, "GET", p, "", nil); st != 200 {
			t.Errorf("GET %s without a token: %d, want 200", p, st)
		}
	}
}

// TestOverviewBlocksUntilAChangeAndNamesSessionsNeverByID pins the
// overview's blocking query and its content: a query at the current index
// answers only once a lock changes, with the holder's session name,
// handle, holder, token and grant time, the sessions by handle and name,
// the grant as an event, each member's state, and no session id anywhere.
func TestOverviewBlocksUntilAChangeAndNamesSessionsNeverByID(t *testing.T) {
	c := newTestCluster(t, 3, slowRaft, withHTTP)
	ctx := ctxT(t)
	_, li := c.leader()
	follower := c.httpAddrs[(li+1)%3]
	cl := c.client(t)
	info, err := cl.OpenSession(ctx, api.OpenRequest{Name: "watcher-test"})
	if err != nil {
		t.Fatal(err)
	}
	// The query answers once the applied index moves, whatever moved it:
	// wait until every member has registered its HTTP address (the last
	// entries a quiet cluster appends) before taking the index.
	var first api.Overview
	eventually(t, 20*time.Second, "every member registered", func() error {
		st, code, ov, _ := getOverview(ctx, follower, "", "")
		if st != 200 {
			return fmt.Errorf("overview: %d %s", st, code)
		}
		for _, m := range ov.Members {
			if m.HTTPAddr == "" {
				return fmt.Errorf("%s has no HTTP address yet", m.ID)
			}
		}
		first = ov
		return nil
	})

	type answer struct {
		st   int
		code string
		ov   api.Overview
		body []byte
		at   time.Time
	}
	got := make(chan answer, 1)
	go func() {
		st, code, ov, body := getOverview(ctx, follower, fmt.Sprintf("?index=%d&wait=30s", first.Index), "")
		got <- answer{st, code, ov, body, time.Now()}
	}()
	// The query must still be waiting: nothing changed yet.
	select {
	case a := <-got:
		t.Fatalf("the blocking query answered before any change: %d %s index %d", a.st, a.code, a.ov.Index)
	case <-time.After(300 * time.Millisecond):
	}
	acquired := time.Now()
	g, err := cl.Acquire(ctx, api.AcquireRequest{Name: "jobs/x", Session: info.ID, Holder: "worker", Value: "v"})
	if err != nil {
		t.Fatal(err)
	}
	a := <-got
	if a.st != 200 {
		t.Fatalf("blocking overview: %d %s", a.st, a.code)
	}
	if a.at.Sub(acquired) > 10*time.Second {
		t.Errorf("the blocking query answered %v after the change", a.at.Sub(acquired))
	}
	ov := a.ov
	if ov.Index <= first.Index {
		t.Errorf("index %d, want above %d", ov.Index, first.Index)
	}
	if len(ov.Locks) != 1 {
		t.Fatalf("locks %+v, want jobs/x only", ov.Locks)
	}
	h := ov.Locks[0].Holders[0]
	if h.SessionName != "watcher-test" || h.SessionHandle != api.SessionHandle(info.ID) || h.Holder != "worker" ||
		h.Token != uint64(g.Token) || h.Value != "v" || h.Since == "" {
		t.Errorf("holder %+v, want watcher-test/worker token %d value v with since", h, g.Token)
	}
	if len(ov.Sessions) != 1 || ov.Sessions[0].Handle != api.SessionHandle(info.ID) || ov.Sessions[0].Name != "watcher-test" ||
		strings.Join(ov.Sessions[0].Locks, ",") != "jobs/x" {
		t.Errorf("sessions %+v, want watcher-test holding jobs/x", ov.Sessions)
	}
	if len(ov.Events) < 2 || ov.Events[0].Kind != "granted" || ov.Events[0].Token != uint64(g.Token) ||
		ov.Events[0].SessionName != "watcher-test" || ov.Events[1].Kind != "session_opened" {
		t.Errorf("events %+v, want the grant, then the session's opening", ov.Events)
	}
	states := map[string]int{}
	for _, m := range ov.Members {
		states[m.State]++
	}
	if len(ov.Members) != 3 || states["leader"] != 1 || states["follower"] != 2 {
		t.Errorf("members %+v, want a leader and 2 followers", ov.Members)
	}
	if strings.Contains(string(a.body), info.ID) {
		t.Errorf("the overview carries the session id: %s", a.body)
	}

	// A release is an event too, and the lock leaves the list.
	if err := cl.Release(ctx, api.ReleaseRequest{Name: "jobs/x", Session: info.ID, Holder: "worker"}); err != nil {
		t.Fatal(err)
	}
	st, code, after, _ := getOverview(ctx, follower, fmt.Sprintf("?index=%d&wait=30s", ov.Index), "")
	if st != 200 || len(after.Locks) != 0 || len(after.Events) == 0 || after.Events[0].Kind != "released" {
		t.Errorf("after the release: %d %s locks %+v events %+v; want no lock, a release event first", st, code, after.Locks, after.Events)
	}
}

// TestOverviewShowsAnExpiredSessionsLockDelayAndTheExpiry pins what the
// page counts down: a session that expires holding a lock leaves the lock
// in lock-delay, listed with no holder and its delay_until, after the
// leader's now; the events say the session expired (by name) and the
// lock-delay started.
func TestOverviewShowsAnExpiredSessionsLockDelayAndTheExpiry(t *testing.T) {
	c := newTestCluster(t, 3, slowRaft, withHTTP)
	ctx := ctxT(t)
	_, li := c.leader()
	addr := c.httpAddrs[li]
	cl := c.client(t)
	info, err := cl.OpenSession(ctx, api.OpenRequest{Name: "doomed", TTL: time.Second, LockDelay: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Acquire(ctx, api.AcquireRequest{Name: "jobs/delayed", Session: info.ID, Holder: "h"}); err != nil {
		t.Fatal(err)
	}
	var ov api.Overview
	for index := uint64(0); ; {
		st, code, got, _ := getOverview(ctx, addr, fmt.Sprintf("?index=%d&wait=20s", index), "")
		if st != 200 {
			t.Fatalf("overview: %d %s", st, code)
		}
		if ov = got; len(ov.Sessions) == 0 {
			break // expired
		}
		index = ov.Index
	}
	if len(ov.Locks) != 1 || ov.Locks[0].Name != "jobs/delayed" || len(ov.Locks[0].Holders) != 0 || ov.Locks[0].DelayUntil == "" {
		t.Fatalf("locks %+v, want jobs/delayed in lock-delay with no holder", ov.Locks)
	}
	until, err1 := time.Parse(time.RFC3339Nano, ov.Locks[0].DelayUntil)
	now, err2 := time.Parse(time.RFC3339Nano, ov.Now)
	if err1 != nil || err2 != nil || !until.After(now) || until.Sub(now) > 30*time.Second {
		t.Errorf("delay_until %s, now %s (%v %v): want within 30s after now", ov.Locks[0].DelayUntil, ov.Now, err1, err2)
	}
	kinds := map[string]api.EventReply{}
	for _, e := range ov.Events {
		if _, seen := kinds[e.Kind]; !seen {
			kinds[e.Kind] = e
		}
	}
	if e, ok := kinds["session_expired"]; !ok || e.SessionName != "doomed" || e.SessionHandle != api.SessionHandle(info.ID) {
		t.Errorf("events %+v, want doomed's expiry", ov.Events)
	}
	if e, ok := kinds["lock_delay"]; !ok || e.Lock != "jobs/delayed" || e.DelayUntil == "" {
		t.Errorf("events %+v, want the lock-delay of jobs/delayed", ov.Events)
	}
}
