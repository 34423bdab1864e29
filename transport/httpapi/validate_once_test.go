package httpapi

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/transport/httpapi/httpapitest"
)

// TestRangeErrorsAreTheContractsOwn pins that the wire layer parses and
// the contract's validators judge: a duration out of range, above or
// below, is answered with exactly the message of the api validator, in the
// same form whichever bound it misses (the handler once had its own
// checks, with another form and another lower bound).
func TestRangeErrorsAreTheContractsOwn(t *testing.T) {
	ts := newTestServer(t, httpapitest.New("n1"))
	for _, tc := range []struct {
		body string
		want error
	}{
		{`{"ttl":"6m"}`, api.CheckTTL("ttl", 6*time.Minute)},
		{`{"ttl":"500ms"}`, api.CheckTTL("ttl", 500*time.Millisecond)},
		{`{"lock_delay":"61s"}`, api.CheckLockDelay("lock_delay", 61*time.Second)},
		{`{"name":"a\u0001b"}`, api.CheckText("session name", "a\x01b", 0, api.MaxSessionNameBytes)},
	} {
		r := rawDo(t, ts.URL, "POST", "/v1/sessions", strings.NewReader(tc.body))
		var e api.ErrorReply
		if err := json.Unmarshal(r.body, &e); err != nil || r.status != 400 {
			t.Fatalf("%s: HTTP %d %s", tc.body, r.status, r.body)
		}
		want := tc.want.(*api.Error)
		if e.Error.Code != string(want.Code) || e.Error.Message != want.Message {
			t.Errorf("%s: answered %s %q; want the contract's %s %q", tc.body, e.Error.Code, e.Error.Message, want.Code, want.Message)
		}
	}
}
