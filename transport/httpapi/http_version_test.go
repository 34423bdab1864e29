package httpapi

import (
	"encoding/json"
	"strings"
	"testing"
)

// In a rolling upgrade whose leader is not upgraded yet (its member
// record reads command version 4), an upgraded follower answers a
// semaphore acquire, a hold limit, a revocation, a release request and a
// close by handle itself, with the documented invalid_argument "every
// member must run a build that reads command version 5", instead of
// forwarding them to a leader that answers `unknown field "permits"` or
// `no route`; a plain acquire is forwarded as before, with its body.
func TestFollowerAnswersWhatAnOldLeaderCannotServe(t *testing.T) {
	leader, follower, _, fURL := twoNodes(t)
	li := follower.Leader()
	li.Commands = 4
	follower.SetLeader(li)
	before := leader.Calls("*")
	for _, c := range []struct{ path, body string }{
		{"/v1/acquire", `{"name":"pool","session":"s","holder":"h","permits":3}`},
		{"/v1/acquire", `{"name":"job","session":"s","holder":"h","max_hold":"30s"}`},
		{"/v1/locks/revoke", `{"name":"job","holder":"h","reason":"stuck"}`},
		{"/v1/locks/request-release", `{"name":"job","reason":"deploy"}`},
		{"/v1/sessions/close-by-handle", `{"handle":"8324516dfd4ac34b","reason":"stuck"}`},
	} {
		r := rawDo(t, fURL, "POST", c.path, strings.NewReader(c.body))
		if r.status != 400 || r.errCode() != "invalid_argument" ||
			!strings.Contains(string(r.body), "every member must run a build that reads command version 5 (the leader n1 reads 4)") {
			t.Errorf("POST %s %s via a new follower of an old leader: %d %s", c.path, c.body, r.status, r.body)
		}
	}
	if n := leader.Calls("*") - before; n != 0 {
		t.Fatalf("the old leader was sent %d of those calls", n)
	}
	r := rawDo(t, fURL, "POST", "/v1/sessions", strings.NewReader(`{"name":"plain"}`))
	if r.status != 200 {
		t.Fatalf("open session via the follower: %d %s", r.status, r.body)
	}
	var info struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(r.body, &info); err != nil {
		t.Fatal(err)
	}
	r = rawDo(t, fURL, "POST", "/v1/acquire", strings.NewReader(`{"name":"plain","session":"`+info.ID+`","holder":"h","permits":0}`))
	if r.status != 200 {
		t.Fatalf("a plain acquire via the follower: %d %s", r.status, r.body)
	}
}
