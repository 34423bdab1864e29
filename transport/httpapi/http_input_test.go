package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/api/apitest"
	"github.com/raftlock/raftlock/transport/client"
	"github.com/raftlock/raftlock/transport/httpapi/httpapitest"
	"github.com/raftlock/raftlock/transport/internal/warnlimit"
)

// A duration given on the wire is taken as it is and judged by the
// contract's validator alone, in one form whichever bound it misses:
// "ttl":"0s" is refused (an omitted ttl takes the default), negative
// values name the range like values above it, and "lock_delay":"0s" means
// none.
func TestWireDurationsAreTakenAsGiven(t *testing.T) {
	f := httpapitest.New("n1")
	ts := newTestServer(t, f)
	for _, tc := range []struct {
		body, want string // want: the refusal, or "" for a session opened
		ttl, delay string
	}{
		{body: `{"ttl":"0s"}`, want: "ttl 0s out of range [1s, 5m0s]"},
		{body: `{"ttl":"0"}`, want: "ttl 0s out of range [1s, 5m0s]"},
		{body: `{"ttl":"-1s"}`, want: "ttl -1s out of range [1s, 5m0s]"},
		{body: `{"ttl":"-1ns"}`, want: "ttl -1ns out of range [1s, 5m0s]"},
		{body: `{"ttl":"999ms"}`, want: "ttl 999ms out of range [1s, 5m0s]"},
		{body: `{"ttl":"5m1s"}`, want: "ttl 5m1s out of range [1s, 5m0s]"},
		{body: `{"lock_delay":"-1ns"}`, want: "lock_delay -1ns out of range [0s, 1m0s]"},
		{body: `{"lock_delay":"-5s"}`, want: "lock_delay -5s out of range [0s, 1m0s]"},
		{body: `{"lock_delay":"61s"}`, want: "lock_delay 1m1s out of range [0s, 1m0s]"},
		{body: `{}`, ttl: "15s", delay: "10s"},
		{body: `{"ttl":"","lock_delay":""}`, ttl: "15s", delay: "10s"},
		{body: `{"ttl":"1s","lock_delay":"0s"}`, ttl: "1s", delay: "0s"},
		{body: `{"ttl":"5m","lock_delay":"1m"}`, ttl: "5m0s", delay: "1m0s"},
	} {
		r := rawDo(t, ts.URL, "POST", "/v1/sessions", strings.NewReader(tc.body))
		if tc.want != "" {
			checkRefused(t, tc.body, r, tc.want)
			continue
		}
		var got api.OpenSessionReply
		if err := json.Unmarshal(r.body, &got); err != nil || r.status != 200 || got.TTL != tc.ttl || got.LockDelay != tc.delay {
			t.Errorf("%s: HTTP %d %s; want ttl %s, lock_delay %s", tc.body, r.status, r.body, tc.ttl, tc.delay)
		}
	}
	// The waits likewise: a negative one names the range.
	s := rawDo(t, ts.URL, "POST", "/v1/sessions", nil)
	var open api.OpenSessionReply
	if err := json.Unmarshal(s.body, &open); err != nil || s.status != 200 {
		t.Fatalf("open: HTTP %d %s", s.status, s.body)
	}
	r := rawDo(t, ts.URL, "POST", "/v1/acquire", strings.NewReader(`{"name":"a","session":"`+open.ID+`","holder":"h","wait":"-1s"}`))
	checkRefused(t, "acquire wait -1s", r, "wait -1s out of range [0s, 10m0s]")
	r = rawDo(t, ts.URL, "GET", "/v1/lock?name=a&index=1&wait=-1s", nil)
	checkRefused(t, "watch wait -1s", r, "wait -1s out of range [0s, 10m0s]")
}

// fakeWithSession serves a fake service over HTTP, with a client of it
// and a session opened through that client.
func fakeWithSession(t *testing.T) (*httpapitest.Fake, *httptest.Server, *client.Client, api.Info) {
	t.Helper()
	f := httpapitest.New("n1")
	ts := newTestServer(t, f)
	c := newTestClient(t, hostOf(ts))
	s, err := c.OpenSession(testCtx(t), api.OpenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return f, ts, c, s
}

// checkRefused asserts r is a 400 invalid_argument whose message is want.
func checkRefused(t *testing.T, what string, r rawResp, want string) {
	t.Helper()
	var e api.ErrorReply
	if err := json.Unmarshal(r.body, &e); err != nil || r.status != 400 || e.Error.Code != string(api.CodeInvalidArgument) || e.Error.Message != want {
		t.Errorf("%s: HTTP %d %s; want 400 invalid_argument %q", what, r.status, r.body, want)
	}
}

// Text the contract checks must be valid UTF-8, and the JSON decoder must
// not make it so behind the checks' back (it would replace invalid bytes
// and lone surrogate escapes with U+FFFD, making "inv\xff" and "inv\xfe"
// one lock): such a request is refused with invalid_argument and changes
// nothing. Valid text, U+FFFD itself and surrogate pairs included, passes.
func TestInvalidUTF8IsRefusedNotReplaced(t *testing.T) {
	f, ts, _, s := fakeWithSession(t)
	acq := func(name, holder string) string {
		return `{"name":"` + name + `","session":"` + s.ID + `","holder":"` + holder + `"}`
	}
	for _, tc := range []struct {
		what, method, path, body string
	}{
		{"lock name", "POST", "/v1/acquire", acq("inv\xff", "h")},
		{"another lock name", "POST", "/v1/acquire", acq("inv\xfe", "h")},
		{"holder", "POST", "/v1/acquire", acq("a", "h\xff")},
		{"value", "POST", "/v1/acquire", `{"name":"a","session":"` + s.ID + `","holder":"h","value":"v\xc3"}`},
		{"release", "POST", "/v1/release", acq("inv\xff", "h")},
		{"session name", "POST", "/v1/sessions", `{"name":"s\xff"}`},
		{"sequencer", "POST", "/v1/sequencer/check", `{"sequencer":"rl1:x:1:inv\xff"}`},
		{"lone high surrogate", "POST", "/v1/acquire", acq(`inv\ud800`, "h")},
		{"lone low surrogate", "POST", "/v1/acquire", acq(`inv\uDC00x`, "h")},
		{"high surrogate then no low", "POST", "/v1/acquire", acq(`inv\ud83d\u0041`, "h")},
		{"query name", "GET", "/v1/lock?name=inv%FF", ""},
		{"query prefix", "GET", "/v1/locks?prefix=inv%FF", ""},
	} {
		before := f.State()
		r := rawDo(t, ts.URL, tc.method, tc.path, strings.NewReader(tc.body))
		if r.status != 400 || r.errCode() != string(api.CodeInvalidArgument) {
			t.Errorf("%s: HTTP %d %s; want 400 invalid_argument", tc.what, r.status, r.body)
		}
		if after := f.State(); after != before {
			t.Errorf("%s: state changed:\n%s\n%s", tc.what, before, after)
		}
	}
	for body, name := range map[string]string{
		acq(`\ud83d\ude00`, "h1"):     "\U0001F600",
		acq("\U0001F600x", "h2"):      "\U0001F600x",
		acq("inv\uFFFD", "h3"):        "inv\uFFFD",
		acq(`inv\ufffd\\ud800`, "h4"): `inv` + "\uFFFD" + `\ud800`,
	} {
		r := rawDo(t, ts.URL, "POST", "/v1/acquire", strings.NewReader(body))
		var g api.GrantReply
		if err := json.Unmarshal(r.body, &g); err != nil || r.status != 200 || g.Name != name {
			t.Errorf("%s: HTTP %d %s; want a grant of %q", body, r.status, r.body, name)
		}
	}
}

// The Go client never sends text that is not valid UTF-8 (encoding/json
// would turn it into U+FFFD): the call fails with invalid_argument and
// nothing reaches the service.
func TestClientRefusesInvalidUTF8(t *testing.T) {
	f, _, c, s := fakeWithSession(t)
	ctx := testCtx(t)
	before := f.Calls("*")
	for what, call := range map[string]func() error{
		"open": func() error { _, err := c.OpenSession(ctx, api.OpenRequest{Name: "s\xff"}); return err },
		"acquire": func() error {
			_, err := c.Acquire(ctx, api.AcquireRequest{Name: "inv\xff", Session: s.ID, Holder: "h"})
			return err
		},
		"value": func() error {
			_, err := c.Acquire(ctx, api.AcquireRequest{Name: "a", Session: s.ID, Holder: "h", Value: "\xc3"})
			return err
		},
		"release": func() error { return c.Release(ctx, api.ReleaseRequest{Name: "a", Session: s.ID, Holder: "h\xfe"}) },
		"check":   func() error { _, err := c.CheckSequencer(ctx, "rl1:x:1:inv\xff"); return err },
	} {
		if err := call(); api.CodeOf(err) != api.CodeInvalidArgument || !strings.Contains(err.Error(), "not valid UTF-8") {
			t.Errorf("%s with invalid UTF-8: %v; want invalid_argument, not valid UTF-8", what, err)
		}
	}
	if after := f.Calls("*"); after != before {
		t.Fatalf("%d calls reached the service; want none", after-before)
	}
}

func TestLoneSurrogate(t *testing.T) {
	for in, want := range map[string]string{
		`"a"`:                     "",
		`"\ud83d\ude00"`:          "",
		`"\\ud800"`:               "",
		`"\\\ud800"`:              `\ud800`,
		`"\ud800"`:                `\ud800`,
		`"\ud800\ud800\udc00"`:    `\ud800`,
		`"\ud83d\ude00\udc00"`:    `\udc00`,
		`"x\uDBFF"`:               `\uDBFF`,
		`"\u00e9\ud7ff\ue000"`:    "",
		`{"a":"\ud800","b":"\u"}`: `\ud800`,
	} {
		if got := loneSurrogate([]byte(in)); got != want {
			t.Errorf("loneSurrogate(%s) = %q, want %q", in, got, want)
		}
	}
}

// A client retrying against a leaderless node costs the server no log
// line at INFO: no_leader (like every answer of the contract) is logged at
// DEBUG.
func TestRetriedNoLeaderLogsNothingAtInfo(t *testing.T) {
	var logs apitest.LogBuffer
	f := httpapitest.New("n1")
	f.SetLeader(api.LeaderInfo{Term: 3}) // no leader known
	ts := newTestServer(t, f, WithLogger(hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: &logs})))
	for range 100 {
		if r := rawDo(t, ts.URL, "GET", "/v1/cluster", nil); r.status != 503 || r.errCode() != string(api.CodeNoLeader) {
			t.Fatalf("leaderless node: HTTP %d %s; want 503 no_leader", r.status, r.body)
		}
	}
	// The Go client retries no_leader until its ctx ends.
	ctx, cancel := testCtxTimeout(t, 200*time.Millisecond)
	defer cancel()
	if _, err := newTestClient(t, hostOf(ts)).Cluster(ctx); !errors.Is(err, api.ErrNoLeader) {
		t.Fatalf("status through a leaderless node: %v; want no_leader", err)
	}
	if l := logs.Lines(); len(l) != 0 {
		t.Fatalf("retried no_leader answers logged %d lines at INFO:\n%s", len(l), strings.Join(l, "\n"))
	}
}

// An internal error stays at WARN, but at most one line per code per
// warnlimit.Every, the next one counting the lines left out.
func TestInternalErrorWarningsAreRateLimited(t *testing.T) {
	var logs apitest.LogBuffer
	f := httpapitest.New("n1")
	srv := NewServer(f, WithLogger(hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: &logs})))
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	srv.warns.Now = func() time.Time { return now }
	fail := func(n int) {
		t.Helper()
		for range n {
			f.Fail("Locks", errors.New("disk on fire"))
			w := httptest.NewRecorder()
			srv.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/locks", nil))
			if w.Code != 500 {
				t.Fatalf("injected failure answered HTTP %d %s", w.Code, w.Body)
			}
		}
	}
	fail(50)
	if l := logs.Lines(); len(l) != 1 || !strings.Contains(l[0], "[WARN]") || !strings.Contains(l[0], "code=internal") ||
		strings.Contains(l[0], "suppressed") {
		t.Fatalf("50 internal errors logged:\n%s\nwant one WARN line", strings.Join(l, "\n"))
	}
	now = now.Add(warnlimit.Every - time.Nanosecond)
	fail(1)
	if l := logs.Lines(); len(l) != 1 {
		t.Fatalf("an internal error within %v of the last line logged: %d lines", warnlimit.Every, len(l))
	}
	now = now.Add(time.Nanosecond)
	fail(1)
	if l := logs.Lines(); len(l) != 2 || !strings.Contains(l[1], "suppressed=50") {
		t.Fatalf("after %v:\n%s\nwant a second line with suppressed=50", warnlimit.Every, strings.Join(l, "\n"))
	}
}

// /v1/health says whether the answering node leads and serves.
func TestHealthSaysServing(t *testing.T) {
	f := httpapitest.New("n1")
	ts := newTestServer(t, f)
	for _, tc := range []struct {
		li   api.LeaderInfo
		want string
	}{
		{api.LeaderInfo{ID: "n1", Self: true, Serving: true, Term: 3}, `{"ok":true,"leader":"n1","term":3,"is_leader":true,"serving":true}`},
		{api.LeaderInfo{ID: "n1", Self: true, Term: 3}, `{"ok":true,"leader":"n1","term":3,"is_leader":true,"serving":false}`},
		{api.LeaderInfo{ID: "n2", Serving: true, Term: 3}, `{"ok":true,"leader":"n2","term":3,"is_leader":false,"serving":false}`},
	} {
		f.SetLeader(tc.li)
		if r := rawDo(t, ts.URL, "GET", "/v1/health", nil); r.status != 200 || string(r.body) != tc.want+"\n" {
			t.Errorf("health of %+v: HTTP %d %s; want %s", tc.li, r.status, r.body, tc.want)
		}
	}
}
