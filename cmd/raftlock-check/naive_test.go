package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
)

// apiError writes an API error answer.
func apiError(w http.ResponseWriter, status int, code api.Code) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(api.ErrorReply{Error: api.ErrorBody{Code: string(code), Message: "test"}})
}

func TestAttemptCounterTellsUnsureAttempts(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.WriteHeader(http.StatusOK)
		case "/busy":
			apiError(w, http.StatusConflict, api.CodeLockBusy)
		case "/no-leader":
			apiError(w, http.StatusServiceUnavailable, api.CodeNoLeader)
		case "/unknown":
			apiError(w, http.StatusServiceUnavailable, api.CodeUnknownOutcome)
		case "/broken":
			// The request arrived; the connection breaks before an answer.
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		}
	}))
	defer srv.Close()
	down, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downAddr := down.Addr().String()
	down.Close()
	hc, err := httpClient("", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		url    string
		unsure int
	}{
		{srv.URL + "/ok", 0},
		{srv.URL + "/busy", 0},
		{srv.URL + "/no-leader", 0},
		{srv.URL + "/unknown", 1},
		{srv.URL + "/broken", 1},
		{"http://" + downAddr + "/ok", 0},
	} {
		ctx, a := withAttempts(context.Background())
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, tc.url, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err == nil {
			body, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode >= 500 {
				var er api.ErrorReply
				if rerr != nil || json.Unmarshal(body, &er) != nil || er.Error.Code == "" {
					t.Errorf("%s: the body was not handed on whole: %q, %v", tc.url, body, rerr)
				}
			}
		}
		if n, unsure := a.counts(); n != 1 || unsure != tc.unsure {
			t.Errorf("%s: %d attempts, %d unsure; want 1, %d", tc.url, n, unsure, tc.unsure)
		}
	}
}

// naiveServer is a fake node: it answers every acquire with acquire and
// counts the requests.
type naiveServer struct {
	*httptest.Server
	mu       sync.Mutex
	acquires []api.AcquireBody
	releases []api.ReleaseBody
}

func newNaiveServer(t *testing.T, acquire func(w http.ResponseWriter)) *naiveServer {
	t.Helper()
	s := &naiveServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		switch r.URL.Path {
		case "/v1/acquire":
			var b api.AcquireBody
			_ = json.NewDecoder(r.Body).Decode(&b)
			s.acquires = append(s.acquires, b)
			acquire(w)
		case "/v1/release":
			var b api.ReleaseBody
			_ = json.NewDecoder(r.Body).Decode(&b)
			s.releases = append(s.releases, b)
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(api.ReleaseReply{Released: true})
		default:
			apiError(w, http.StatusNotFound, api.CodeNotFound)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *naiveServer) counts() (acquires, releases int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.acquires), len(s.releases)
}

func TestNaiveAcquireIsOneRequest(t *testing.T) {
	srv := newNaiveServer(t, func(w http.ResponseWriter) { apiError(w, http.StatusServiceUnavailable, api.CodeNoLeader) })
	b := &rawBackend{hc: http.DefaultClient, addrs: []string{strings.TrimPrefix(srv.URL, "http://")}, pick: func(int) int { return 0 }}
	_, err := b.Acquire(context.Background(), api.AcquireRequest{Name: lk, Session: sA, Holder: hA, Wait: 20 * time.Second})
	if api.CodeOf(err) != api.CodeNoLeader {
		t.Errorf("answer %v, want no_leader", err)
	}
	if n, _ := srv.counts(); n != 1 {
		t.Errorf("%d requests sent, want 1 (no retry)", n)
	}
	if a := srv.acquires[0]; a.Wait != "20s" || a.Holder != hA || a.Session != sA || a.Name != lk {
		t.Errorf("request %+v: want lock %s, session %s, holder %s, wait 20s", a, lk, sA, hA)
	}
}

func TestNaiveAcquireReturnsTheGrant(t *testing.T) {
	srv := newNaiveServer(t, func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set(api.HeaderTerm, "3")
		_ = json.NewEncoder(w).Encode(api.GrantReply{Name: lk, Mode: "exclusive", Token: 42, Sequencer: "rl1:x:42:" + lk})
	})
	b := &rawBackend{hc: http.DefaultClient, addrs: []string{strings.TrimPrefix(srv.URL, "http://")}, pick: func(int) int { return 0 }}
	g, err := b.Acquire(context.Background(), api.AcquireRequest{Name: lk, Session: sA, Holder: hA, Wait: time.Second})
	if err != nil || g.Token != 42 || g.Term != 3 {
		t.Errorf("grant %+v, %v; want token 42 in term 3", g, err)
	}
}

// naiveRun runs one naive wait against srv and returns what the client
// recorded.
func naiveRun(t *testing.T, srv *naiveServer) []message {
	t.Helper()
	var out bytes.Buffer
	l := newLink(&out)
	w, err := newWorkload(clientConfig{Addrs: []string{strings.TrimPrefix(srv.URL, "http://")}, Locks: []string{lk}, Seed: 1}, l, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	w.naiveWait(context.Background(), sA, lk)
	var ms []message
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var m message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	return ms
}

// recorded returns the first operation of kind in ms (its call merged
// with its return).
func recorded(ms []message, kind string) (call, ret message, ok bool) {
	for _, m := range ms {
		if m.T == msgCall && m.Kind == kind && !ok {
			call, ok = m, true
		}
		if ok && m.T == msgRet && m.ID == call.ID {
			return call, m, true
		}
	}
	return call, ret, false
}

func TestNaiveWaiterTakesNoLeaderAtItsWord(t *testing.T) {
	srv := newNaiveServer(t, func(w http.ResponseWriter) { apiError(w, http.StatusServiceUnavailable, api.CodeNoLeader) })
	ms := naiveRun(t, srv)
	if a, r := srv.counts(); a != 1 || r != 0 {
		t.Errorf("%d acquires, %d releases sent; want one acquire and nothing else", a, r)
	}
	call, ret, ok := recorded(ms, kindAcquire)
	if !ok || !call.Naive || !call.Wait || call.WaitFor < int64(naiveWaitMin) || ret.Result != resNoLeader || ret.Attempts != 1 || ret.Unsure != 0 {
		t.Errorf("recorded %+v / %+v: want a naive wait answered no_leader in one sure attempt", call, ret)
	}
}

func TestNaiveWaiterCancelsAfterAnUnknownOutcome(t *testing.T) {
	srv := newNaiveServer(t, func(w http.ResponseWriter) { apiError(w, http.StatusServiceUnavailable, api.CodeUnknownOutcome) })
	ms := naiveRun(t, srv)
	if a, r := srv.counts(); a != 1 || r != 1 {
		t.Fatalf("%d acquires, %d releases sent; want one of each", a, r)
	}
	if srv.releases[0].Holder != srv.acquires[0].Holder {
		t.Errorf("released holder %q, want the waiter's %q", srv.releases[0].Holder, srv.acquires[0].Holder)
	}
	if _, ret, ok := recorded(ms, kindAcquire); !ok || ret.Result != resUnknown || ret.Unsure != 1 {
		t.Errorf("recorded acquire %+v: want unknown, one unsure attempt", ret)
	}
	if call, ret, ok := recorded(ms, kindRelease); !ok || call.Unlock || ret.Result != resOK {
		t.Errorf("recorded release %+v / %+v: want a cancel (not an Unlock) answered ok", call, ret)
	}
}

func TestOutcomeNamesNoLeaderAndWaitCancelled(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{api.ErrNoLeader, resNoLeader},
		{fmt.Errorf("via n1: %w", &api.Error{Code: "wait_cancelled"}), resWaitCancelled},
		{api.ErrWaitTimeout, resWaitTimeout},
		// The Go client retries no_leader until its ctx ends: unknown.
		{fmt.Errorf("%w (gave up: %w)", api.ErrNoLeader, context.Canceled), resUnknown},
		{api.ErrUnknownOutcome, resUnknown},
		{errors.New("connection reset"), resUnknown},
	} {
		if got, _ := outcome(tc.err); got != tc.want {
			t.Errorf("outcome(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
	for _, tc := range []struct {
		err  error
		wait bool
		want bool
	}{
		{api.ErrNoLeader, true, true},
		{api.ErrWaitTimeout, true, true},
		{api.ErrSessionNotFound, true, true},
		{api.ErrLockBusy, false, true},
		{api.ErrLockBusy, true, false},
		{api.ErrUnknownOutcome, true, false},
		{fmt.Errorf("%w (gave up: %w)", api.ErrNoLeader, context.DeadlineExceeded), true, false},
	} {
		if got := definiteNoPlace(tc.err, tc.wait); got != tc.want {
			t.Errorf("definiteNoPlace(%v, wait %v) = %v, want %v", tc.err, tc.wait, got, tc.want)
		}
	}
}
