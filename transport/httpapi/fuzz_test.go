package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/transport/httpapi/httpapitest"
)

// FuzzHTTPHandlers sends random methods, paths and bodies to the server
// over a fake service, on the client port and on the peer port: it never
// panics, every answer is 2xx with a JSON body or a JSON error body, with
// a status from the documented set; a read answers no session id (but that
// of /v1/sessions/{id}, whose caller has it), and the client port serves
// no member records.
func FuzzHTTPHandlers(f *testing.F) {
	seeds := []struct{ method, path, body string }{
		{"POST", "/v1/sessions", `{"name":"s","ttl":"15s","lock_delay":"10s"}`},
		{"POST", "/v1/sessions", `{"ttl":"-1s"}`},
		{"POST", "/v1/sessions/SID/keepalive", ``},
		{"GET", "/v1/sessions/SID", ``},
		{"DELETE", "/v1/sessions/SID", ``},
		{"POST", "/v1/acquire", `{"name":"a","session":"SID","holder":"h","mode":"shared","wait":"0s","value":"v"}`},
		{"POST", "/v1/acquire", `{"name":"a","session":"SID","holder":"h","wait":"5ms"}`},
		{"POST", "/v1/acquire", `{"name":`},
		{"POST", "/v1/release", `{"name":"a","session":"SID","holder":"h"}`},
		{"GET", "/v1/lock?name=a", ``},
		{"GET", "/v1/locks?prefix=", ``},
		{"POST", "/v1/sequencer/check", `{"sequencer":"rl1:x:1:a"}`},
		{"GET", "/v1/cluster", ``},
		{"GET", "/v1/health", ``},
		{"POST", "/v1/internal/members", `{"id":"n1","raft_addr":"a","http_addr":"b","voter":true}`},
		{"PATCH", "/v1/acquire", `{}`},
		{"GET", "/v1/../v1/cluster", ``},
		{"POST", "/v1/acquire", `{"name":"a"}{"name":"b"}`},
		{"POST", "/v1/acquire", "{\"name\":\"inv\xff\",\"session\":\"SID\",\"holder\":\"h\"}"},
		{"POST", "/v1/acquire", `{"name":"inv\ud800","session":"SID","holder":"h"}`},
		{"POST", "/v1/sessions", "{\"name\":\"s\xc3\"}"},
		{"GET", "/v1/lock?name=inv%FF", ``},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, []byte(s.body))
	}
	svc := httpapitest.New("n1")
	srv, peer := NewServer(svc), NewServer(svc, peerRoutes)
	// One real session so that SID-paths reach the service.
	sid := openFuzzSession(f, srv)
	f.Fuzz(func(t *testing.T, method, path string, body []byte) {
		path = strings.ReplaceAll(path, "SID", sid)
		if !validMethod(method) || !strings.HasPrefix(path, "/") {
			return // not a request net/http would deliver
		}
		// A waiting acquire in the fake ends with the request's ctx.
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		for _, port := range []struct {
			name string
			h    http.Handler
		}{{"client port", srv}, {"peer port", peer}} {
			req, err := http.NewRequestWithContext(ctx, method, "http://127.0.0.1"+path, bytes.NewReader(body))
			if err != nil {
				return
			}
			w := httptest.NewRecorder()
			port.h.ServeHTTP(w, req)
			checkFuzzAnswer(t, port.name, method, path, body, sid, w)
		}
	})
}

// fuzzStatuses are the statuses the API answers with.
var fuzzStatuses = map[int]bool{200: true, 400: true, 404: true, 405: true, 408: true, 409: true, 413: true, 500: true, 503: true}

// checkFuzzAnswer checks one answer of FuzzHTTPHandlers.
func checkFuzzAnswer(t *testing.T, port, method, path string, body []byte, sid string, w *httptest.ResponseRecorder) {
	t.Helper()
	res := w.Result()
	if port == "client port" && strings.HasPrefix(path, "/v1/internal/") && res.StatusCode == 200 {
		t.Fatalf("%s %q on the client port: answered 200", method, path)
	}
	if !fuzzStatuses[res.StatusCode] {
		t.Fatalf("%s %q: status %d", method, path, res.StatusCode)
	}
	if method == http.MethodHead {
		return
	}
	out := w.Body.Bytes()
	if !json.Valid(out) {
		t.Fatalf("%s %q: %d, body not JSON: %q", method, path, res.StatusCode, out)
	}
	if res.StatusCode != 200 {
		var e api.ErrorReply
		if err := json.Unmarshal(out, &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
			t.Fatalf("%s %q: %d, not an error body: %q", method, path, res.StatusCode, out)
		}
		if api.StatusOf(sessionCode(e.Error.Code)) != res.StatusCode {
			t.Fatalf("%s %q: code %s with status %d", method, path, e.Error.Code, res.StatusCode)
		}
	}
	if res.Header.Get(api.HeaderLeader) != "n1" {
		t.Fatalf("%s %q: no leader header", method, path)
	}
	// A body that is not UTF-8 is never decoded into a request (its
	// bytes would turn into U+FFFD).
	if method != http.MethodGet && method != http.MethodHead && len(bytes.TrimSpace(body)) > 0 &&
		!utf8.Valid(body) && res.StatusCode == 200 {
		t.Fatalf("%s %q: body %q, not UTF-8, answered 200", method, path, body)
	}
	if method == http.MethodGet && res.StatusCode == 200 && !strings.Contains(path, sid) &&
		bytes.Contains(out, []byte(sid)) {
		t.Fatalf("%s %q: the answer carries a session id: %s", method, path, out)
	}
}

func validMethod(m string) bool {
	if m == "" || !utf8.ValidString(m) {
		return false
	}
	for _, c := range m {
		if c <= ' ' || c >= 0x7f || strings.ContainsRune("()<>@,;:\\\"/[]?={}", c) {
			return false
		}
	}
	return true
}

func openFuzzSession(f *testing.F, srv http.Handler) string {
	req := httptest.NewRequest("POST", "/v1/sessions", strings.NewReader(`{}`))
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, req)
	var r api.OpenSessionReply
	if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil || r.ID == "" {
		f.Fatalf("open session: %s", w.Body.Bytes())
	}
	return r.ID
}

func sessionCode(s string) api.Code { return api.Code(s) }
