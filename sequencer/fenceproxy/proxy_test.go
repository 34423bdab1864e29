package fenceproxy

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftlock/raftlock/sequencer"
)

// backend records the requests that reach it, in order, and can hold one
// until released.
type backend struct {
	mu      sync.Mutex
	events  []string
	hold    map[string]chan struct{} // by X-Test-Id
	arrived chan string
	quit    chan struct{} // closed when the test ends: nothing holds on
}

func newBackend(t *testing.T) (*backend, *url.URL) {
	b := &backend{hold: map[string]chan struct{}{}, arrived: make(chan string, 16), quit: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Test-Id")
		b.record("start " + id)
		b.arrived <- id
		b.mu.Lock()
		h := b.hold[id]
		b.mu.Unlock()
		if h != nil {
			select {
			case <-h:
			case <-b.quit:
			}
		}
		body, _ := io.ReadAll(r.Body)
		b.record("end " + id)
		w.Header().Set("X-Seen-Sequencer", r.Header.Get(sequencer.Header))
		w.Write(append([]byte(r.Method+" "+r.URL.Path+" "), body...))
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(b.quit) }) // runs first
	u, _ := url.Parse(srv.URL)
	return b, u
}

func (b *backend) record(e string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.events = append(b.events, e)
}

func (b *backend) log() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.events...)
}

func newProxy(t *testing.T, up *url.URL, f Fence, o Options) *httptest.Server {
	t.Helper()
	p, err := New(up, f, o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return srv
}

func send(t *testing.T, base, id, seq string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, base+"/items/1", strings.NewReader("v-"+id))
	req.Header.Set("X-Test-Id", id)
	if seq != "" {
		req.Header.Set(sequencer.Header, seq)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("send %s: %v", id, err) // may run on another goroutine
		return 0, "", ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	code := ""
	if resp.StatusCode >= 300 {
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.Unmarshal(body, &e)
		code = e.Error.Code
	}
	return resp.StatusCode, code, string(body)
}

// The proxy forwards a current sequencer's request (path, body and the
// sequencer header intact) and refuses a missing, malformed or stale one
// with Middleware's statuses and codes, without forwarding it.
func TestProxyAdmitsOnlyCurrentSequencers(t *testing.T) {
	b, up := newBackend(t)
	srv := newProxy(t, up, sequencer.NewFence(), Options{})
	if st, _, body := send(t, srv.URL, "a", "rl1:x:7:jobs/a"); st != 200 || body != "PUT /items/1 v-a" {
		t.Fatalf("current: %d %q", st, body)
	}
	<-b.arrived
	for _, c := range []struct {
		seq    string
		status int
		code   string
	}{
		{"", 428, "sequencer_required"},
		{"rl1:x:0:jobs/a", 400, "invalid_argument"},
		{"not a sequencer", 400, "invalid_argument"},
		{"rl1:x:6:jobs/a", 409, "stale_sequencer"},
		{"rl1:s:6:jobs/a", 409, "stale_sequencer"},
	} {
		if st, code, _ := send(t, srv.URL, "x", c.seq); st != c.status || code != c.code {
			t.Errorf("%q: %d %s, want %d %s", c.seq, st, code, c.status, c.code)
		}
	}
	if got := b.log(); len(got) != 2 {
		t.Fatalf("refused requests reached the backend: %v", got)
	}
	if st, _, _ := send(t, srv.URL, "b", "rl1:x:8:jobs/a"); st != 200 {
		t.Fatalf("newer holder refused: %d", st)
	}
}

// A newer holder's request reaches the backend only after every request of
// an older holder that was already forwarded has been answered, so the
// backend never sees an older holder's write in progress once a newer
// holder's has begun; requests of one grant still run in parallel.
func TestProxyForwardsANewerHoldersRequestOnlyAfterOlderOnesEnd(t *testing.T) {
	b, up := newBackend(t)
	p, err := New(up, sequencer.NewFence(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	release := map[string]chan struct{}{"old1": make(chan struct{}), "old2": make(chan struct{})}
	b.mu.Lock()
	b.hold["old1"], b.hold["old2"] = release["old1"], release["old2"]
	b.mu.Unlock()

	var wg sync.WaitGroup
	status := map[string]int{}
	var smu sync.Mutex
	run := func(id, seq string) {
		defer wg.Done()
		st, _, _ := send(t, srv.URL, id, seq)
		smu.Lock()
		status[id] = st
		smu.Unlock()
	}
	wg.Add(2)
	go run("old1", "rl1:x:5:jobs/a")
	go run("old2", "rl1:x:5:jobs/a") // the same grant: in parallel
	<-b.arrived
	<-b.arrived
	wg.Add(1)
	go run("new", "rl1:x:6:jobs/a")
	waitFor(t, func() bool { return p.Waiting() == 1 })
	close(release["old1"])
	// One older request is still in progress: the newer one still waits.
	waitFor(t, func() bool { return contains(b.log(), "end old1") })
	if contains(b.log(), "start new") || p.Waiting() != 1 {
		t.Fatalf("newer holder's request forwarded while an older one was in progress: %v (waiting %d)", b.log(), p.Waiting())
	}
	close(release["old2"])
	wg.Wait()
	got := b.log()
	if !(index(got, "end old1") < index(got, "start new") && index(got, "end old2") < index(got, "start new")) {
		t.Fatalf("backend order %v", got)
	}
	if status["old1"] != 200 || status["old2"] != 200 || status["new"] != 200 {
		t.Fatalf("statuses %v", status)
	}
}

// A request that waited for an older holder's requests and was itself
// superseded meanwhile is refused as stale, never forwarded.
func TestProxyRefusesARequestSupersededWhileItWaited(t *testing.T) {
	b, up := newBackend(t)
	p, err := New(up, sequencer.NewFence(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	hold := make(chan struct{})
	b.mu.Lock()
	b.hold["t5"] = hold
	b.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); send(t, srv.URL, "t5", "rl1:x:5:jobs/a") }()
	<-b.arrived
	res := make(chan [2]string, 2)
	wg.Add(1)
	go func() {
		defer wg.Done()
		st, code, _ := send(t, srv.URL, "t6", "rl1:x:6:jobs/a")
		res <- [2]string{http.StatusText(st), code}
	}()
	waitFor(t, func() bool { return p.Waiting() == 1 })
	wg.Add(1)
	go func() {
		defer wg.Done()
		st, code, _ := send(t, srv.URL, "t7", "rl1:x:7:jobs/a")
		res <- [2]string{http.StatusText(st), code}
	}()
	waitFor(t, func() bool { return p.Waiting() == 2 })
	close(hold)
	wg.Wait()
	close(res)
	var got []string
	for r := range res {
		got = append(got, r[0]+"/"+r[1])
	}
	if !(contains(got, "Conflict/stale_sequencer") && contains(got, "OK/")) {
		t.Fatalf("answers %v, want one stale (t6) and one OK (t7)", got)
	}
	if contains(b.log(), "start t6") {
		t.Fatalf("superseded request forwarded: %v", b.log())
	}
}

// An older holder's request still in progress past the drain timeout makes
// the newer one fail with 503 draining (and Retry-After), not wait forever.
func TestProxyAnswersDrainingAfterTheDrainTimeout(t *testing.T) {
	b, up := newBackend(t)
	hold := make(chan struct{})
	defer close(hold)
	b.mu.Lock()
	b.hold["old"] = hold
	b.mu.Unlock()
	srv := newProxy(t, up, sequencer.NewFence(), Options{DrainTimeout: 50 * time.Millisecond})
	go send(t, srv.URL, "old", "rl1:x:5:jobs/a")
	<-b.arrived
	if st, code, _ := send(t, srv.URL, "new", "rl1:x:6:jobs/a"); st != 503 || code != CodeDraining {
		t.Fatalf("got %d %s, want 503 draining", st, code)
	}
}

// A backend that does not answer is a 502 upstream_unavailable.
func TestProxyAnswersUpstreamUnavailable(t *testing.T) {
	up, _ := url.Parse("http://127.0.0.1:1")
	srv := newProxy(t, up, sequencer.NewFence(), Options{})
	if st, code, _ := send(t, srv.URL, "a", "rl1:x:5:jobs/a"); st != 502 || code != CodeUpstreamUnavailable {
		t.Fatalf("got %d %s", st, code)
	}
}

// With a FileFence the marks outlive the proxy: after a restart a
// sequencer superseded before it is still refused.
func TestProxyWithFileFenceRefusesStaleAfterRestart(t *testing.T) {
	_, up := newBackend(t)
	path := filepath.Join(t.TempDir(), "fence.json")
	ff, err := sequencer.OpenFileFence(path)
	if err != nil {
		t.Fatal(err)
	}
	srv := newProxy(t, up, ff, Options{})
	if st, _, _ := send(t, srv.URL, "a", "rl1:x:9:jobs/a"); st != 200 {
		t.Fatal(st)
	}
	srv.Close()
	ff.Close()
	ff2, err := sequencer.OpenFileFence(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ff2.Close()
	srv2 := newProxy(t, up, ff2, Options{})
	if st, code, _ := send(t, srv2.URL, "b", "rl1:x:8:jobs/a"); st != 409 || code != "stale_sequencer" {
		t.Fatalf("after restart: %d %s", st, code)
	}
}

// The proxy refuses a holder of an earlier tenure of the name, whose kind
// or permits differed, across a restart too: a paused holder of slot 2 of
// a semaphore of 3, after the name was taken again as a semaphore of 1, or
// as a plain shared lock.
func TestProxyRefusesAHolderOfAnEarlierTenure(t *testing.T) {
	_, up := newBackend(t)
	path := filepath.Join(t.TempDir(), "fence.json")
	ff, err := sequencer.OpenFileFence(path)
	if err != nil {
		t.Fatal(err)
	}
	srv := newProxy(t, up, ff, Options{})
	for _, seq := range []string{"rl1:p2/3:54:pool", "rl1:p0/1:68:pool", "rl1:s:70:db"} {
		if st, _, _ := send(t, srv.URL, "a", seq); st != 200 {
			t.Fatalf("%s: %d", seq, st)
		}
	}
	if st, code, _ := send(t, srv.URL, "b", "rl1:p2/3:54:pool"); st != 409 || code != "stale_sequencer" {
		t.Fatalf("the paused holder of the semaphore of 3: %d %s", st, code)
	}
	srv.Close()
	ff.Close()
	ff2, err := sequencer.OpenFileFence(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ff2.Close()
	srv2 := newProxy(t, up, ff2, Options{})
	for _, seq := range []string{"rl1:p2/3:54:pool", "rl1:p1/2:69:db"} {
		if st, code, _ := send(t, srv2.URL, "b", seq); st != 409 || code != "stale_sequencer" {
			t.Fatalf("%s after restart: %d %s", seq, st, code)
		}
	}
	if st, _, _ := send(t, srv2.URL, "c", "rl1:p0/1:68:pool"); st != 200 {
		t.Fatalf("the current holder after restart: %d", st)
	}
}

// New refuses what cannot work.
func TestNewRefusesBadUpstreamOrFence(t *testing.T) {
	good, _ := url.Parse("http://127.0.0.1:9")
	for _, u := range []string{"ftp://x", "http://", "/relative"} {
		pu, _ := url.Parse(u)
		if _, err := New(pu, sequencer.NewFence(), Options{}); err == nil {
			t.Errorf("upstream %q accepted", u)
		}
	}
	if _, err := New(good, nil, Options{}); err == nil {
		t.Error("nil fence accepted")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

func contains(s []string, v string) bool { return index(s, v) >= 0 }

func index(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
