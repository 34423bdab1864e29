package httpapi

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/transport/httpapi/httpapitest"
	"github.com/raftlock/raftlock/transport/raftnet"
)

// TestNoSessionIDInLogsOrEchoedErrors pins issue 27 item 9: a session id in
// a malformed path ("//v1/sessions/ID") or in a wrong field (a ttl, an
// index, a query parameter's or a JSON field's name) appears neither in
// the answer nor in any log line, DEBUG and TRACE included.
func TestNoSessionIDInLogsOrEchoedErrors(t *testing.T) {
	const id = "5f0c4b2e9a8d7c6b5a4f3e2d1c0b9a88"
	var logs bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Trace, Output: &logs})
	ts := newTestServer(t, httpapitest.New("n1"), WithLogger(log))
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "//v1/sessions/" + id, ""},
		{"POST", "//v1/sessions/" + id + "/keepalive", ""},
		{"GET", "/v1//sessions/" + id, ""},
		{"GET", "/v1/session/" + id, ""},
		{"POST", "/v1/sessions", `{"ttl":"` + id + `"}`},
		{"POST", "/v1/sessions", `{"` + id + `":1}`},
		{"GET", "/v1/lock?name=x&index=" + id, ""},
		{"GET", "/v1/lock?name=x&wait=" + id, ""},
		{"GET", "/v1/lock?" + id + "=1", ""},
		{"GET", "/v1/locks?limit=" + id, ""},
	} {
		req, err := http.NewRequest(tc.method, ts.URL+tc.path, strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Errorf("%s %s: HTTP %d, want an error", tc.method, tc.path, resp.StatusCode)
		}
		if strings.Contains(string(body), id) {
			t.Errorf("%s %s %s: the answer echoes the session id: %s", tc.method, tc.path, tc.body, body)
		}
	}
	if strings.Contains(logs.String(), id) {
		t.Fatalf("a log line names the session id:\n%s", logs.String())
	}
}

// TestTLSPeerRecordsOnlyItself pins issue 27 item 9: on a TLS peer port a
// member record is taken only from the node whose certificate names its
// id; n2's certificate cannot rewrite n3's record (n1's rewrote n2's).
func TestTLSPeerRecordsOnlyItself(t *testing.T) {
	pki := newTestPKI(t)
	f := httpapitest.New("n1")
	leader := newTLSPeerPort(t, f, pki.identity(t, "n1", true))
	n2 := newTLSPeerPort(t, httpapitest.New("n2"), pki.identity(t, "n2", true))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	to := string(leader.Transport.LocalAddr())
	forged := api.Member{ID: "n3", RaftAddr: "127.0.0.1:9", HTTPAddr: "127.0.0.1:10"}
	if err := raftnet.PostMember(ctx, n2.DialContext, to, forged); err == nil || !strings.Contains(err.Error(), "permission_denied") {
		t.Fatalf("n2 recording n3: %v, want permission_denied", err)
	}
	own := api.Member{ID: "n2", RaftAddr: string(n2.Transport.LocalAddr()), HTTPAddr: "127.0.0.1:10"}
	if err := raftnet.PostMember(ctx, n2.DialContext, to, own); err != nil {
		t.Fatalf("n2 recording itself: %v", err)
	}
	if _, ok := f.Member("n3"); ok {
		t.Fatal("the forged record was stored")
	}
	if _, ok := f.Member("n2"); !ok {
		t.Fatal("n2's own record was not stored")
	}
}
