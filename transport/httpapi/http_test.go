package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/api/apitest"
	"github.com/raftlock/raftlock/transport/client"
	"github.com/raftlock/raftlock/transport/httpapi/httpapitest"

	"github.com/raftlock/raftlock/sequencer"
)

func newTestServer(t testing.TB, f *httpapitest.Fake, opts ...ServerOption) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(NewServer(f, opts...))
	t.Cleanup(ts.Close)
	return ts
}

func hostOf(ts *httptest.Server) string { return strings.TrimPrefix(ts.URL, "http://") }

func newTestClient(t testing.TB, addrs ...string) *client.Client {
	t.Helper()
	c, err := client.NewClient(addrs, client.WithRetryBackoff(time.Millisecond, 5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

type rawResp struct {
	status int
	header http.Header
	body   []byte
}

func (r rawResp) errCode() string {
	var e api.ErrorReply
	_ = json.Unmarshal(r.body, &e)
	return e.Error.Code
}

func rawDo(t testing.TB, base, method, path string, body io.Reader, hdr ...string) rawResp {
	t.Helper()
	req, err := http.NewRequest(method, base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return rawResp{status: resp.StatusCode, header: resp.Header, body: data}
}

// TestRoundTrip drives every route of API.md through Client → Server → fake.
func TestRoundTrip(t *testing.T) {
	f := httpapitest.New("n1")
	ts := newTestServer(t, f)
	c := newTestClient(t, hostOf(ts))
	ctx := testCtx(t)

	info, err := c.OpenSession(ctx, api.OpenRequest{Name: "demo", TTL: 20 * time.Second, LockDelay: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if info.ID == "" || info.Name != "demo" || info.TTL != 20*time.Second || info.LockDelay != 5*time.Second {
		t.Fatalf("open: %+v", info)
	}
	def, err := c.OpenSession(ctx, api.OpenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if def.TTL != api.DefaultTTL || def.LockDelay != api.DefaultLockDelay {
		t.Fatalf("open with defaults: %+v", def)
	}
	none, err := c.OpenSession(ctx, api.OpenRequest{LockDelay: api.NoLockDelay})
	if err != nil || none.LockDelay != 0 {
		t.Fatalf("open without lock-delay: %+v %v", none, err)
	}
	ttl, err := c.KeepAlive(ctx, info.ID)
	if err != nil || ttl.TTL != 20*time.Second {
		t.Fatalf("keepalive: %v %v", ttl, err)
	}
	g, err := c.Acquire(ctx, api.AcquireRequest{Name: "jobs/a:b", Session: info.ID, Holder: "h1", Value: "10.0.0.7:8080"})
	if err != nil {
		t.Fatal(err)
	}
	if g.Name != "jobs/a:b" || g.Mode != sequencer.Exclusive || g.Token == 0 || g.Term != 3 ||
		g.Sequencer != (sequencer.Sequencer{Name: "jobs/a:b", Mode: sequencer.Exclusive, Token: g.Token}) {
		t.Fatalf("grant: %+v", g)
	}
	// Idempotent retry: the same grant.
	g2, err := c.Acquire(ctx, api.AcquireRequest{Name: "jobs/a:b", Session: info.ID, Holder: "h1", Value: "10.0.0.7:8080"})
	if err != nil || g2 != g {
		t.Fatalf("retried acquire: %+v %v, want %+v", g2, err, g)
	}
	gs, err := c.Acquire(ctx, api.AcquireRequest{Name: "jobs/shared", Session: info.ID, Holder: "r1", Mode: sequencer.Shared})
	if err != nil || gs.Mode != sequencer.Shared || gs.Sequencer.String() != "rl1:s:"+itoa(uint64(gs.Token))+":jobs/shared" {
		t.Fatalf("shared grant: %+v %v", gs, err)
	}
	if _, err := c.Acquire(ctx, api.AcquireRequest{Name: "jobs/shared", Session: def.ID, Holder: "r2", Mode: sequencer.Shared}); err != nil {
		t.Fatal(err)
	}
	si, err := c.SessionInfo(ctx, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if si.ID != info.ID || si.Name != "demo" || si.TTL != 20*time.Second || strings.Join(si.Locks, ",") != "jobs/a:b,jobs/shared" {
		t.Fatalf("session info: %+v", si)
	}
	l, err := c.LockState(ctx, "jobs/a:b")
	if err != nil {
		t.Fatal(err)
	}
	if l.Name != "jobs/a:b" || l.Mode != sequencer.Exclusive || len(l.Holders) != 1 || l.Holders[0] !=
		(api.Holder{SessionHandle: api.SessionHandle(info.ID), SessionName: "demo", Holder: "h1", Token: g.Token, Value: "10.0.0.7:8080"}) || !l.DelayUntil.IsZero() {
		t.Fatalf("lock: %+v", l)
	}
	free, err := c.LockState(ctx, "nobody/holds/this")
	if err != nil || free.Mode != 0 || len(free.Holders) != 0 || free.Holders == nil {
		t.Fatalf("free lock: %+v %v", free, err)
	}
	ls, err := c.Locks(ctx, "jobs/")
	if err != nil || len(ls) != 2 || ls[0].Name != "jobs/a:b" || ls[1].Name != "jobs/shared" || len(ls[1].Holders) != 2 {
		t.Fatalf("locks: %+v %v", ls, err)
	}
	all, err := c.Locks(ctx, "")
	if err != nil || len(all) != 2 {
		t.Fatalf("all locks: %+v %v", all, err)
	}
	chk, err := c.CheckSequencer(ctx, g.Sequencer.String())
	if err != nil || !chk.Valid || chk.CurrentToken != g.Token {
		t.Fatalf("check: %+v %v", chk, err)
	}
	if err := c.Release(ctx, api.ReleaseRequest{Name: "jobs/a:b", Session: info.ID, Holder: "h1"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(ctx, api.ReleaseRequest{Name: "jobs/a:b", Session: info.ID, Holder: "h1"}); err != nil {
		t.Fatalf("repeated release: %v", err)
	}
	chk, err = c.CheckSequencer(ctx, g.Sequencer.String())
	if err != nil || chk.Valid || chk.CurrentToken != 0 {
		t.Fatalf("check after release: %+v %v", chk, err)
	}
	if err := f.RegisterMember(ctx, api.Member{ID: "n1", RaftAddr: "127.0.0.1:7101", HTTPAddr: hostOf(ts), Voter: true}); err != nil {
		t.Fatal(err)
	}
	// Members register on the peer port (its Server has the members'
	// routes), never on the client port.
	const member = `{"id":"n2","raft_addr":"127.0.0.1:7102","http_addr":"127.0.0.1:7002","voter":true}`
	if resp := rawDo(t, ts.URL, "POST", "/v1/internal/members", strings.NewReader(member)); resp.status != 404 {
		t.Fatalf("register member on the client port: %d %s", resp.status, resp.body)
	}
	peer := newTestServer(t, f, peerRoutes)
	if resp := rawDo(t, peer.URL, "POST", "/v1/internal/members", strings.NewReader(`{"raft_addr":"a","http_addr":"b"}`)); resp.status != 400 || resp.errCode() != string(api.CodeInvalidArgument) {
		t.Fatalf("register member without id: %d %s", resp.status, resp.body)
	}
	if resp := rawDo(t, peer.URL, "POST", "/v1/internal/members", strings.NewReader(member)); resp.status != 200 {
		t.Fatalf("register member: %d %s", resp.status, resp.body)
	}
	cl, err := c.Cluster(ctx)
	if err != nil || cl.Leader != "n1" || cl.Term != 3 || len(cl.Members) != 2 || cl.Members[1].HTTPAddr != "127.0.0.1:7002" || !cl.Members[1].Voter {
		t.Fatalf("cluster: %+v %v", cl, err)
	}
	h, err := c.Health(ctx)
	if err != nil || h != (api.HealthInfo{OK: true, Leader: "n1", Term: 3, IsLeader: true, Serving: false}) { // the fake's leader does not say it serves
		t.Fatalf("health: %+v %v", h, err)
	}
	if err := c.CloseSession(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SessionInfo(ctx, info.ID); !errors.Is(err, api.ErrSessionNotFound) {
		t.Fatalf("closed session: %v", err)
	}
	if err := c.CloseSession(ctx, info.ID); !errors.Is(err, api.ErrSessionNotFound) {
		t.Fatalf("second close: %v", err)
	}
}

func itoa(u uint64) string { b, _ := json.Marshal(u); return string(b) }

// TestWireFormat pins the JSON of API.md: field names, durations, tokens
// as numbers, sequencers as text, delay_until.
func TestWireFormat(t *testing.T) {
	f := httpapitest.New("n1")
	ts := newTestServer(t, f)
	r := rawDo(t, ts.URL, "POST", "/v1/sessions", strings.NewReader(`{"name":"w","ttl":"15s","lock_delay":"10s"}`))
	var open map[string]any
	if err := json.Unmarshal(r.body, &open); err != nil || r.status != 200 || open["ttl"] != "15s" || open["lock_delay"] != "10s" || open["id"] == "" {
		t.Fatalf("open: %d %s", r.status, r.body)
	}
	if r.header.Get(api.HeaderLeader) != "n1" || r.header.Get(api.HeaderTerm) != "3" || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("headers: %v", r.header)
	}
	// An explicit "0s" lock-delay means none; an absent one the default.
	for body, want := range map[string]string{`{"lock_delay":"0s"}`: "0s", `{}`: api.DefaultLockDelay.String()} {
		r := rawDo(t, ts.URL, "POST", "/v1/sessions", strings.NewReader(body))
		var got map[string]any
		if err := json.Unmarshal(r.body, &got); err != nil || r.status != 200 || got["lock_delay"] != want {
			t.Fatalf("open %s: %d %s, want lock_delay %s", body, r.status, r.body, want)
		}
	}
	id := open["id"].(string)
	r = rawDo(t, ts.URL, "POST", "/v1/acquire", strings.NewReader(`{"name":"x","session":"`+id+`","holder":"h","mode":"exclusive","wait":"0s","value":"v"}`))
	var g map[string]any
	_ = json.Unmarshal(r.body, &g)
	tok, ok := g["token"].(float64)
	if r.status != 200 || !ok || g["sequencer"] != "rl1:x:"+itoa(uint64(tok))+":x" || g["mode"] != "exclusive" || g["name"] != "x" {
		t.Fatalf("acquire: %d %s", r.status, r.body)
	}
	r = rawDo(t, ts.URL, "GET", "/v1/lock?name=x", nil)
	want := `{"name":"x","mode":"exclusive","holders":[{"session_handle":"` + api.SessionHandle(id) + `","session_name":"w","holder":"h","token":` + itoa(uint64(tok)) + `,"value":"v"}],"waiters":0,"queue":[],"index":` + itoa(uint64(tok)) + "}\n"
	if r.status != 200 || string(r.body) != want {
		t.Fatalf("lock:\n got %s\nwant %s", r.body, want)
	}
	r = rawDo(t, ts.URL, "POST", "/v1/sessions/"+id+"/keepalive", nil)
	if r.status != 200 || string(r.body) != `{"ttl":"15s"}`+"\n" {
		t.Fatalf("keepalive: %d %s", r.status, r.body)
	}
	// delay_until is RFC 3339 with nanoseconds when set.
	du := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	lr := api.NewLockReply(api.LockState{Name: "d", DelayUntil: du, Holders: []api.Holder{}})
	if lr.DelayUntil != "2030-01-02T03:04:05.000000006Z" || lr.Mode != "" {
		t.Fatalf("delay_until: %+v", lr)
	}
	back, err := lr.State()
	if err != nil || !back.DelayUntil.Equal(du) {
		t.Fatalf("delay_until back: %+v %v", back, err)
	}
	r = rawDo(t, ts.URL, "DELETE", "/v1/sessions/"+id, nil)
	if r.status != 200 || string(r.body) != `{"closed":true}`+"\n" {
		t.Fatalf("close: %d %s", r.status, r.body)
	}
	r = rawDo(t, ts.URL, "GET", "/v1/health", nil)
	if r.status != 200 || string(r.body) != `{"ok":true,"leader":"n1","term":3,"is_leader":true,"serving":false}`+"\n" {
		t.Fatalf("health: %d %s", r.status, r.body)
	}
}

func TestWaitingAcquire(t *testing.T) {
	f := httpapitest.New("n1")
	ts := newTestServer(t, f)
	c := newTestClient(t, hostOf(ts))
	ctx := testCtx(t)
	s, err := c.OpenSession(ctx, api.OpenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	g1, err := c.Acquire(ctx, api.AcquireRequest{Name: "w", Session: s.ID, Holder: "a"})
	if err != nil {
		t.Fatal(err)
	}
	// A wait that times out.
	start := time.Now()
	_, err = c.Acquire(ctx, api.AcquireRequest{Name: "w", Session: s.ID, Holder: "b", Wait: 50 * time.Millisecond})
	if !errors.Is(err, api.ErrWaitTimeout) || time.Since(start) < 50*time.Millisecond {
		t.Fatalf("wait timeout: %v after %v", err, time.Since(start))
	}
	// A wait that is granted on release.
	done := make(chan error, 1)
	var g2 api.Grant
	go func() {
		var err error
		g2, err = c.Acquire(ctx, api.AcquireRequest{Name: "w", Session: s.ID, Holder: "b", Wait: 5 * time.Second})
		done <- err
	}()
	httpapitest.WaitFor(t, "queued waiter", func() bool { l, _ := c.LockState(ctx, "w"); return l.Waiters == 1 })
	if err := c.Release(ctx, api.ReleaseRequest{Name: "w", Session: s.ID, Holder: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if g2.Token <= g1.Token {
		t.Fatalf("token %d after %d", g2.Token, g1.Token)
	}
	// Cancelling the caller's ctx cancels the server-side wait.
	wctx, cancel := context.WithCancel(ctx)
	go func() {
		_, err := c.Acquire(wctx, api.AcquireRequest{Name: "w", Session: s.ID, Holder: "c", Wait: time.Minute})
		done <- err
	}()
	httpapitest.WaitFor(t, "queued waiter", func() bool { l, _ := c.LockState(ctx, "w"); return l.Waiters == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
	httpapitest.WaitFor(t, "server-side wait cancelled", func() bool { return f.Answered("Acquire", context.Canceled) == 1 })
}

// TestErrorCodes: every code travels back into a *api.Error that
// matches its sentinel under errors.Is.
func TestErrorCodes(t *testing.T) {
	f := httpapitest.New("n1")
	ts := newTestServer(t, f)
	c := newTestClient(t, hostOf(ts))
	ctx := testCtx(t)
	s, _ := c.OpenSession(ctx, api.OpenRequest{})
	if _, err := c.Acquire(ctx, api.AcquireRequest{Name: "busy", Session: s.ID, Holder: "a"}); err != nil {
		t.Fatal(err)
	}
	check := func(name string, err error, want *api.Error) {
		t.Helper()
		var e *api.Error
		if !errors.Is(err, want) || !errors.As(err, &e) || e.Code != want.Code || e.Message == "" {
			t.Errorf("%s: error %v, want code %s", name, err, want.Code)
		}
	}
	_, err := c.Acquire(ctx, api.AcquireRequest{Name: "busy", Session: s.ID, Holder: "b"})
	check("busy", err, api.ErrLockBusy)
	check("not holder", c.Release(ctx, api.ReleaseRequest{Name: "busy", Session: s.ID, Holder: "b"}), api.ErrNotHolder)
	_, err = c.KeepAlive(ctx, "0123456789abcdef")
	check("no session", err, api.ErrSessionNotFound)
	_, err = c.Acquire(ctx, api.AcquireRequest{Name: "", Session: s.ID, Holder: "b"})
	check("empty name", err, api.ErrInvalidArgument)
	_, err = c.Acquire(ctx, api.AcquireRequest{Name: "v", Session: s.ID, Holder: "b", Value: strings.Repeat("x", api.MaxValueBytes+1)})
	check("big value", err, api.ErrTooLarge)
	_, err = c.CheckSequencer(ctx, "not-a-sequencer")
	check("bad sequencer", err, api.ErrInvalidArgument)
	_, err = c.Acquire(ctx, api.AcquireRequest{Name: "w", Session: s.ID, Holder: "b", Wait: time.Hour})
	check("wait too long", err, api.ErrInvalidArgument)
	_, err = c.OpenSession(ctx, api.OpenRequest{TTL: time.Millisecond})
	check("ttl too short", err, api.ErrInvalidArgument)

	// Codes only a real node produces, injected.
	f.Fail("Acquire", api.Errorf(api.CodeUnknownOutcome, "leadership lost"))
	before := f.Calls("*")
	_, err = c.Acquire(ctx, api.AcquireRequest{Name: "u", Session: s.ID})
	check("acquire without holder: unknown outcome", err, api.ErrUnknownOutcome)
	if n := f.Calls("*") - before; n != 1 {
		t.Errorf("acquire without holder with unknown outcome was tried %d times, want 1 (not idempotent)", n)
	}
	// An open is retried after an unknown outcome: a session the lost
	// attempt opened is never used and expires.
	f.Fail("OpenSession", api.Errorf(api.CodeUnknownOutcome, "leadership lost"))
	before = f.Calls("*")
	if _, err = c.OpenSession(ctx, api.OpenRequest{}); err != nil {
		t.Errorf("open after an unknown outcome: %v", err)
	}
	if n := f.Calls("*") - before; n != 2 {
		t.Errorf("open with unknown outcome was tried %d times, want 2", n)
	}
	f.Fail("LockState", errors.New("disk on fire"))
	_, err = c.LockState(ctx, "x")
	if api.CodeOf(err) != api.CodeInternal {
		t.Errorf("internal: %v", err)
	}
	// no_leader is retried until ctx ends.
	f.Fail("*", api.ErrNoLeader, api.ErrNoLeader, api.ErrNoLeader, api.ErrNoLeader, api.ErrNoLeader,
		api.ErrNoLeader, api.ErrNoLeader, api.ErrNoLeader, api.ErrNoLeader, api.ErrNoLeader,
		api.ErrNoLeader, api.ErrNoLeader, api.ErrNoLeader, api.ErrNoLeader, api.ErrNoLeader,
		api.ErrNoLeader, api.ErrNoLeader, api.ErrNoLeader, api.ErrNoLeader, api.ErrNoLeader,
		api.ErrNoLeader, api.ErrNoLeader, api.ErrNoLeader, api.ErrNoLeader, api.ErrNoLeader,
		api.ErrNoLeader, api.ErrNoLeader, api.ErrNoLeader, api.ErrNoLeader, api.ErrNoLeader)
	sctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	_, err = c.KeepAlive(sctx, s.ID)
	cancel()
	check("no leader", err, api.ErrNoLeader)
	f.ClearFaults()
}

// TestRetries: idempotent calls are retried after unknown outcomes and
// no_leader; a close whose retry finds the session gone succeeded.
func TestRetries(t *testing.T) {
	f := httpapitest.New("n1")
	ts := newTestServer(t, f)
	c := newTestClient(t, hostOf(ts))
	ctx := testCtx(t)
	f.Fail("OpenSession", api.ErrNoLeader, api.ErrNoLeader)
	s, err := c.OpenSession(ctx, api.OpenRequest{})
	if err != nil {
		t.Fatalf("open after no_leader: %v", err)
	}
	f.Fail("Acquire", api.ErrUnknownOutcome)
	if _, err := c.Acquire(ctx, api.AcquireRequest{Name: "r", Session: s.ID, Holder: "h"}); err != nil {
		t.Fatalf("acquire after unknown outcome: %v", err)
	}
	f.Fail("Release", api.ErrUnknownOutcome, api.ErrNoLeader)
	if err := c.Release(ctx, api.ReleaseRequest{Name: "r", Session: s.ID, Holder: "h"}); err != nil {
		t.Fatalf("release after unknown outcome: %v", err)
	}
	// The first close applies but its answer is lost (unknown outcome);
	// the retry finds no session: closed.
	f.FailApplied("CloseSession", api.ErrUnknownOutcome)
	if err := c.CloseSession(ctx, s.ID); err != nil {
		t.Fatalf("close after unknown outcome: %v", err)
	}
}

// TestBadInput: each bad request gets its code and status and leaves the
// service's state unchanged.
func TestBadInput(t *testing.T) {
	f := httpapitest.New("n1")
	ts := newTestServer(t, f)
	c := newTestClient(t, hostOf(ts))
	ctx := testCtx(t)
	s, err := c.OpenSession(ctx, api.OpenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(ctx, api.AcquireRequest{Name: "held", Session: s.ID, Holder: "h"}); err != nil {
		t.Fatal(err)
	}
	acq := func(extra string) string {
		return `{"name":"new","session":"` + s.ID + `","holder":"h2"` + extra + `}`
	}
	big := `{"name":"` + strings.Repeat("a", 1<<20) + `"}`
	tests := []struct {
		name, method, path, body string
		status                   int
		code                     api.Code
	}{
		{"malformed", "POST", "/v1/acquire", `{"name":`, 400, api.CodeInvalidArgument},
		{"not an object", "POST", "/v1/acquire", `[1,2]`, 400, api.CodeInvalidArgument},
		{"unknown field", "POST", "/v1/acquire", acq(`,"bogus":1`), 400, api.CodeInvalidArgument},
		{"trailing garbage", "POST", "/v1/acquire", acq(``) + `xyz`, 400, api.CodeInvalidArgument},
		{"trailing object", "POST", "/v1/acquire", acq(``) + `{}`, 400, api.CodeInvalidArgument},
		{"oversize body", "POST", "/v1/acquire", big, 413, api.CodeTooLarge},
		{"oversize body open", "POST", "/v1/sessions", big, 413, api.CodeTooLarge},
		{"oversize value", "POST", "/v1/acquire", acq(`,"value":"` + strings.Repeat("v", api.MaxValueBytes+1) + `"`), 413, api.CodeTooLarge},
		{"bad mode", "POST", "/v1/acquire", acq(`,"mode":"EXCLUSIVE"`), 400, api.CodeInvalidArgument},
		{"numeric mode", "POST", "/v1/acquire", acq(`,"mode":1`), 400, api.CodeInvalidArgument},
		{"negative wait", "POST", "/v1/acquire", acq(`,"wait":"-1s"`), 400, api.CodeInvalidArgument},
		{"garbage wait", "POST", "/v1/acquire", acq(`,"wait":"soon"`), 400, api.CodeInvalidArgument},
		{"numeric wait", "POST", "/v1/acquire", acq(`,"wait":30`), 400, api.CodeInvalidArgument},
		{"wait over max", "POST", "/v1/acquire", acq(`,"wait":"11m"`), 400, api.CodeInvalidArgument},
		{"empty name", "POST", "/v1/acquire", `{"name":"","session":"` + s.ID + `","holder":"h"}`, 400, api.CodeInvalidArgument},
		{"control char name", "POST", "/v1/acquire", `{"name":"a\u0001b","session":"` + s.ID + `","holder":"h"}`, 400, api.CodeInvalidArgument},
		{"long name", "POST", "/v1/acquire", `{"name":"` + strings.Repeat("n", 513) + `","session":"` + s.ID + `","holder":"h"}`, 400, api.CodeInvalidArgument},
		{"no holder", "POST", "/v1/acquire", `{"name":"new","session":"` + s.ID + `"}`, 400, api.CodeInvalidArgument},
		{"busy", "POST", "/v1/acquire", `{"name":"held","session":"` + s.ID + `","holder":"other"}`, 409, api.CodeLockBusy},
		{"not holder", "POST", "/v1/release", `{"name":"held","session":"` + s.ID + `","holder":"other"}`, 409, api.CodeNotHolder},
		{"negative ttl", "POST", "/v1/sessions", `{"ttl":"-1s"}`, 400, api.CodeInvalidArgument},
		{"garbage ttl", "POST", "/v1/sessions", `{"ttl":"15"}`, 400, api.CodeInvalidArgument},
		{"ttl over max", "POST", "/v1/sessions", `{"ttl":"6m"}`, 400, api.CodeInvalidArgument},
		{"negative lock delay", "POST", "/v1/sessions", `{"lock_delay":"-5s"}`, 400, api.CodeInvalidArgument},
		{"lock delay over max", "POST", "/v1/sessions", `{"lock_delay":"61s"}`, 400, api.CodeInvalidArgument},
		{"unknown session", "POST", "/v1/sessions/ffff/keepalive", ``, 404, api.CodeSessionNotFound},
		{"keepalive body", "POST", "/v1/sessions/" + s.ID + "/keepalive", `{"x":1}`, 400, api.CodeInvalidArgument},
		{"bad sequencer", "POST", "/v1/sequencer/check", `{"sequencer":"rl1:q:1:x"}`, 400, api.CodeInvalidArgument},
		{"lock without name", "GET", "/v1/lock", ``, 400, api.CodeInvalidArgument},
		{"lock unknown param", "GET", "/v1/lock?name=a&x=1", ``, 400, api.CodeInvalidArgument},
		{"lock repeated param", "GET", "/v1/lock?name=a&name=b", ``, 400, api.CodeInvalidArgument},
		{"lock bad query", "GET", "/v1/lock?name=%zz", ``, 400, api.CodeInvalidArgument},
		{"watch bad index", "GET", "/v1/lock?name=a&index=-1", ``, 400, api.CodeInvalidArgument},
		{"watch index not a number", "GET", "/v1/lock?name=a&index=x", ``, 400, api.CodeInvalidArgument},
		{"watch bad wait", "GET", "/v1/lock?name=a&index=1&wait=soon", ``, 400, api.CodeInvalidArgument},
		{"watch wait too long", "GET", "/v1/lock?name=a&index=1&wait=11m", ``, 400, api.CodeInvalidArgument},
		{"watch negative wait", "GET", "/v1/lock?name=a&index=1&wait=-1s", ``, 400, api.CodeInvalidArgument},
		{"members' route on the client port", "POST", "/v1/internal/members", `{"id":"evil","raft_addr":"a","http_addr":"b"}`, 404, api.CodeNotFound},
		{"unknown route", "GET", "/v1/nope", ``, 404, api.CodeNotFound},
		{"root", "GET", "/", ``, 404, api.CodeNotFound},
		{"unclean path", "GET", "/v1//cluster", ``, 404, api.CodeNotFound},
		{"dot path", "GET", "/v1/x/../cluster", ``, 404, api.CodeNotFound},
		{"wrong method", "GET", "/v1/acquire", ``, 405, api.CodeMethodNotAllowed},
		{"wrong method sessions", "PUT", "/v1/sessions/" + s.ID, ``, 405, api.CodeMethodNotAllowed},
		{"wrong method cluster", "DELETE", "/v1/cluster", ``, 405, api.CodeMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := f.State()
			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			}
			r := rawDo(t, ts.URL, tt.method, tt.path, body)
			if r.status != tt.status || r.errCode() != string(tt.code) {
				t.Fatalf("%s %s: %d %s, want %d %s", tt.method, tt.path, r.status, r.body, tt.status, tt.code)
			}
			var e api.ErrorReply
			if err := json.Unmarshal(r.body, &e); err != nil || e.Error.Message == "" {
				t.Fatalf("error body %s: %v", r.body, err)
			}
			if r.header.Get(api.HeaderLeader) != "n1" || r.header.Get(api.HeaderTerm) != "3" {
				t.Fatalf("leader headers missing: %v", r.header)
			}
			if tt.status == 405 && r.header.Get("Allow") == "" {
				t.Fatalf("405 without Allow")
			}
			if after := f.State(); after != before {
				t.Fatalf("state changed:\n%s\n%s", before, after)
			}
		})
	}
	// Chunked oversize body (no Content-Length).
	pr, pw := io.Pipe()
	go func() {
		_, _ = pw.Write([]byte(`{"name":"`))
		_, _ = pw.Write([]byte(strings.Repeat("a", 1<<20)))
		_ = pw.Close()
	}()
	r := rawDo(t, ts.URL, "POST", "/v1/acquire", pr)
	if r.status != 413 || r.errCode() != "too_large" {
		t.Fatalf("chunked oversize: %d %s", r.status, r.body)
	}
}

func TestPanicRecovery(t *testing.T) {
	f := httpapitest.New("n1")
	ts := newTestServer(t, f)
	f.SetHook(func(_ context.Context, c apitest.Call) error {
		if c.Method == "LockState" {
			panic("fake panic in LockState")
		}
		return nil
	})
	r := rawDo(t, ts.URL, "GET", "/v1/lock?name=x", nil)
	if r.status != 500 || r.errCode() != "internal" {
		t.Fatalf("panic: %d %s", r.status, r.body)
	}
	f.SetHook(nil)
	f.LeaderPanics.Store(true)
	r = rawDo(t, ts.URL, "GET", "/v1/health", nil)
	if r.status != 500 || r.errCode() != "internal" {
		t.Fatalf("panic in Leader: %d %s", r.status, r.body)
	}
	f.LeaderPanics.Store(false)
	if r := rawDo(t, ts.URL, "GET", "/v1/lock?name=x", nil); r.status != 200 {
		t.Fatalf("after panic: %d %s", r.status, r.body)
	}
}

func TestNewClientAddrs(t *testing.T) {
	for _, bad := range [][]string{nil, {}, {""}, {"nohost"}, {":7001"}, {"127.0.0.1:"}} {
		if _, err := client.NewClient(bad); err == nil {
			t.Errorf("NewClient(%q): no error", bad)
		}
	}
	if _, err := client.NewClient([]string{"127.0.0.1:7001", " 127.0.0.1:7002 "}); err != nil {
		t.Error(err)
	}
}

func testCtxTimeout(t testing.TB, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(testCtx(t), d)
}

// The Go client's WatchLock: a blocking query that answers when the lock
// changes past the index, and the index header on lock answers.
func TestWatchLockThroughClient(t *testing.T) {
	svc := httpapitest.New("n1")
	ts := httptest.NewServer(NewServer(svc))
	defer ts.Close()
	c, err := client.NewClient([]string{strings.TrimPrefix(ts.URL, "http://")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := c.OpenSession(ctx, api.OpenRequest{TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	free, err := c.LockState(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	r := rawDo(t, ts.URL, "GET", "/v1/lock?name=w", nil)
	if r.header.Get(api.HeaderIndex) != fmt.Sprint(free.Index) {
		t.Fatalf("%s header %q, want %d", api.HeaderIndex, r.header.Get(api.HeaderIndex), free.Index)
	}
	got := make(chan api.LockState, 1)
	go func() {
		st, err := c.WatchLock(ctx, "w", free.Index, time.Minute)
		if err != nil {
			t.Error(err)
		}
		got <- st
	}()
	g, err := c.Acquire(ctx, api.AcquireRequest{Name: "w", Session: info.ID, Holder: "h"})
	if err != nil {
		t.Fatal(err)
	}
	st := <-got
	if len(st.Holders) != 1 || st.Holders[0].Token != g.Token || st.Index <= free.Index {
		t.Fatalf("watch answered %+v, want the grant %d at an index above %d", st, g.Token, free.Index)
	}
	// Nothing changes: the wait runs out with the same state.
	st2, err := c.WatchLock(ctx, "w", st.Index, 50*time.Millisecond)
	if err != nil || st2.Index != st.Index {
		t.Fatalf("timed-out watch: %+v, %v", st2, err)
	}
}
