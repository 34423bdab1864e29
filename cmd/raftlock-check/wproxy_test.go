package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/raftlock/raftlock/api"
)

// lockedBuffer is an io.Writer the tests read while the proxy writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// messages returns the messages written so far.
func (b *lockedBuffer) messages(t *testing.T) []message {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []message
	sc := bufio.NewScanner(bytes.NewReader(b.buf.Bytes()))
	for sc.Scan() {
		var m message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// proxyTo starts a recording proxy for targets; it returns the proxy and
// what it sends to the checker.
func proxyTo(t *testing.T, targets ...string) (*recProxy, *lockedBuffer) {
	t.Helper()
	out := &lockedBuffer{}
	p, err := newRecProxy(newLink(out), &http.Client{}, targets)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.close)
	return p, out
}

func post(t *testing.T, addr, path, body string) *http.Response {
	t.Helper()
	resp, err := http.Post("http://"+addr+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// freeAddr returns a loopback address nobody listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().String()
	ln.Close()
	return a
}

func TestProxyRecordsAcquireAsTheClusterAnsweredIt(t *testing.T) {
	node := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Raftlock-Leader-Addr", r.Host)
		w.Write([]byte(`{"name":"a","mode":"exclusive","token":42,"sequencer":"x"}`))
	}))
	defer node.Close()
	p, out := proxyTo(t, node.URL)
	resp := post(t, p.addrs[0], "/v1/acquire", `{"name":"a","session":"s1","holder":"h1","wait":"1.5s"}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if got := resp.Header.Get("X-Raftlock-Leader-Addr"); got != p.addrs[0] {
		t.Errorf("leader address %q passed on, want the proxy's %q", got, p.addrs[0])
	}
	ms := out.messages(t)
	if len(ms) != 2 {
		t.Fatalf("got %d messages, want call and ret: %+v", len(ms), ms)
	}
	call, ret := ms[0], ms[1]
	if call.T != msgCall || call.Kind != kindAcquire || call.Lock != "a" || call.Session != "s1" || call.Holder != "h1" ||
		!call.Wait || call.WaitFor != 1500e6 {
		t.Errorf("call %+v", call)
	}
	if ret.T != msgRet || ret.ID != call.ID || ret.Result != resOK || ret.Token != 42 || ret.Attempts != 1 || ret.Unsure != 0 {
		t.Errorf("ret %+v", ret)
	}
	if p.where() != hostPort(node.URL) {
		t.Errorf("where %q, want %q", p.where(), hostPort(node.URL))
	}
}

func TestProxyAnswersNoLeaderWhenNothingWasSent(t *testing.T) {
	p, out := proxyTo(t, "http://"+freeAddr(t))
	resp := post(t, p.addrs[0], "/v1/acquire", `{"name":"a","session":"s1","holder":"h1"}`)
	var er struct{ Error struct{ Code string } }
	if err := json.NewDecoder(resp.Body).Decode(&er); err != nil || api.Code(er.Error.Code) != api.CodeNoLeader {
		t.Fatalf("answer %d %+v (%v), want no_leader", resp.StatusCode, er, err)
	}
	ms := out.messages(t)
	if len(ms) != 2 || ms[1].Result != resNoLeader || ms[1].Unsure != 0 || ms[1].Attempts != 1 {
		t.Errorf("recorded %+v, want one sure no_leader attempt", ms)
	}
}

func TestProxyCutsTheWorkerWhenTheAnswerIsLost(t *testing.T) {
	node := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	defer node.Close()
	p, out := proxyTo(t, node.URL)
	_, err := http.Post("http://"+p.addrs[0]+"/v1/release", "application/json", strings.NewReader(`{"name":"a","session":"s1","holder":"h1"}`))
	if err == nil {
		t.Fatal("the worker got an answer to a request whose answer was lost")
	}
	ms := out.messages(t)
	if len(ms) != 2 || ms[0].Kind != kindRelease || ms[1].Result != resUnknown || ms[1].Unsure != 1 {
		t.Errorf("recorded %+v, want one unsure release of unknown outcome", ms)
	}
}

func TestProxyMarksReleasesOfAnUnlockAsUnlock(t *testing.T) {
	node := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"released":true}`))
	}))
	defer node.Close()
	p, out := proxyTo(t, node.URL)
	post(t, p.addrs[0], "/v1/release", `{"name":"a","session":"s1","holder":"h1"}`)
	done := p.unlock("h1")
	post(t, p.addrs[0], "/v1/release", `{"name":"a","session":"s1","holder":"h1"}`)
	done()
	post(t, p.addrs[0], "/v1/release", `{"name":"a","session":"s1","holder":"h1"}`)
	var unlock []bool
	for _, m := range out.messages(t) {
		if m.T == msgCall {
			unlock = append(unlock, m.Unlock)
		}
	}
	if len(unlock) != 3 || unlock[0] || !unlock[1] || unlock[2] {
		t.Errorf("Unlock marks %v, want [false true false]", unlock)
	}
}

func TestProxyRecordsTheOpenedSessionAndItsKeepalives(t *testing.T) {
	node := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v1/sessions":
			w.Write([]byte(`{"id":"sid1","ttl":"3s","lock_delay":"10s"}`))
		case strings.HasSuffix(r.URL.Path, "/keepalive"):
			w.Write([]byte(`{"ttl":"3s"}`))
		default:
			w.Write([]byte(`{"closed":true}`))
		}
	}))
	defer node.Close()
	p, out := proxyTo(t, node.URL)
	post(t, p.addrs[0], "/v1/sessions", `{"ttl":"3s"}`)
	if p.lastOpened() != "sid1" {
		t.Errorf("last opened %q", p.lastOpened())
	}
	post(t, p.addrs[0], "/v1/sessions/sid1/keepalive", ``)
	req, _ := http.NewRequest(http.MethodDelete, "http://"+p.addrs[0]+"/v1/sessions/sid1", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var got []string
	for _, m := range out.messages(t) {
		if m.T == msgRet {
			got = append(got, m.Kind+":"+m.Result)
		}
		if m.T == msgRet && m.Kind == kindOpen && (m.Session != "sid1" || m.TTL != 3e9 || m.LockDelay != 10e9) {
			t.Errorf("open ret %+v", m)
		}
		if m.T == msgCall && m.Kind != kindOpen && m.Session != "sid1" {
			t.Errorf("call %+v names no session", m)
		}
	}
	if strings.Join(got, " ") != "open:ok keepalive:ok close:ok" {
		t.Errorf("recorded %v", got)
	}
}

func TestProxyAnswersNameNodesByTheProxysAddresses(t *testing.T) {
	var other string
	node := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"leader":"n2","members":[{"id":"n1","http_addr":"` + r.Host + `"},{"id":"n2","http_addr":"` + other + `"}]}`))
	}))
	defer node.Close()
	other = freeAddr(t)
	p, _ := proxyTo(t, node.URL, "http://"+other)
	resp, err := http.Get("http://" + p.addrs[0] + "/v1/cluster")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Members []struct {
			HTTPAddr string `json:"http_addr"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if len(body.Members) != 2 || body.Members[0].HTTPAddr != p.addrs[0] || body.Members[1].HTTPAddr != p.addrs[1] {
		t.Errorf("members %+v, want the proxy's addresses %v", body.Members, p.addrs)
	}
}
