package fenceproxy

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"sync"
	"testing"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/sequencer"
)

// fakeCluster answers sequencer checks from a table of current grants.
type fakeCluster struct {
	mu      sync.Mutex
	current map[string]sequencer.Token // valid sequencer -> the lock's current token
	high    map[string]sequencer.Token // lock name -> current token, for any check of it
	down    bool
	calls   int
	hold    chan struct{} // if set, every answer waits for it
}

func (c *fakeCluster) CheckSequencer(ctx context.Context, seq string) (api.SequencerCheck, error) {
	c.mu.Lock()
	c.calls++
	hold, down := c.hold, c.down
	c.mu.Unlock()
	if hold != nil {
		<-hold
	}
	if down {
		return api.SequencerCheck{}, errors.New("cluster unreachable")
	}
	s, err := sequencer.Parse(seq)
	if err != nil {
		return api.SequencerCheck{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if tok, ok := c.current[seq]; ok {
		return api.SequencerCheck{Valid: true, CurrentToken: tok}, nil
	}
	return api.SequencerCheck{CurrentToken: c.high[s.Name]}, nil
}

func (c *fakeCluster) set(f func(c *fakeCluster)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(c)
}

func (c *fakeCluster) callCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// A forged sequencer (a well-formed one the cluster never issued, with
// the highest token there is) is refused unconfirmed_sequencer, never
// forwarded, and raises no mark: the real holder still passes, and keeps
// passing with no further question to the cluster.
func TestProxyRefusesASequencerTheClusterDoesNotConfirm(t *testing.T) {
	b, up := newBackend(t)
	cl := &fakeCluster{current: map[string]sequencer.Token{"rl1:x:7:stock/42": 7}}
	st := openStore(t, filepath.Join(t.TempDir(), "fence.json"), StoreOptions{})
	srv := newProxy(t, up, st, Options{Cluster: cl})
	if s, code, _ := send(t, srv.URL, "forged", "rl1:x:18446744073709551615:stock/42"); s != http.StatusConflict || code != CodeUnconfirmed {
		t.Fatalf("forged: %d %s, want 409 %s", s, code, CodeUnconfirmed)
	}
	if _, ok := st.Marks("stock/42"); ok {
		t.Fatal("the forged sequencer raised a mark")
	}
	for i := range 3 {
		if s, _, _ := send(t, srv.URL, "real", "rl1:x:7:stock/42"); s != http.StatusOK {
			t.Fatalf("the real holder, request %d: %d", i, s)
		}
		<-b.arrived
	}
	if n := cl.callCount(); n != 2 {
		t.Errorf("%d questions to the cluster, want 2 (the forged one, the holder's first request)", n)
	}
	if contains(b.log(), "start forged") {
		t.Fatalf("the forged request reached the backend: %v", b.log())
	}
}

// A sequencer of a lock the proxy does not guard is refused
// lock_not_guarded: not forwarded, not asked about, no marks kept.
func TestProxyRefusesASequencerOfALockItDoesNotGuard(t *testing.T) {
	b, up := newBackend(t)
	cl := &fakeCluster{current: map[string]sequencer.Token{"rl1:x:7:stock/42": 7, "rl1:x:8:stock/43": 8}}
	locks, err := NewLockSet([]string{"stock/42"}, []string{"jobs/"})
	if err != nil {
		t.Fatal(err)
	}
	st := openStore(t, filepath.Join(t.TempDir(), "fence.json"), StoreOptions{})
	srv := newProxy(t, up, st, Options{Cluster: cl, Locks: locks})
	for _, seq := range []string{"rl1:x:8:stock/43", "rl1:x:9:stock/4", "rl1:x:9:job"} {
		if s, code, _ := send(t, srv.URL, "other", seq); s != http.StatusForbidden || code != CodeLockNotGuarded {
			t.Errorf("%s: %d %s, want 403 %s", seq, s, code, CodeLockNotGuarded)
		}
	}
	if n, calls := st.Names(), cl.callCount(); n != 0 || calls != 0 {
		t.Fatalf("names kept %d, questions %d; want none", n, calls)
	}
	if s, _, _ := send(t, srv.URL, "real", "rl1:x:7:stock/42"); s != http.StatusOK {
		t.Fatalf("the guarded lock's holder: %d", s)
	}
	<-b.arrived
	if got := b.log(); len(got) != 2 {
		t.Fatalf("the backend saw %v, want only the guarded lock's request", got)
	}
}

// With the cluster unreachable, a sequencer that would raise a mark is
// admitted if its token is at most the highest the cluster confirmed for
// the lock (here 9, a reader the cluster named), and refused
// cluster_unavailable above it: the proxy fails closed.
func TestProxyFailsClosedAboveTheConfirmedTokenWhenTheClusterIsDown(t *testing.T) {
	_, up := newBackend(t)
	cl := &fakeCluster{current: map[string]sequencer.Token{"rl1:s:5:db": 9}}
	st := openStore(t, filepath.Join(t.TempDir(), "fence.json"), StoreOptions{})
	srv := newProxy(t, up, st, Options{Cluster: cl})
	if s, _, _ := send(t, srv.URL, "r5", "rl1:s:5:db"); s != http.StatusOK {
		t.Fatalf("reader 5: %d", s)
	}
	cl.set(func(c *fakeCluster) { c.down = true })
	if s, _, _ := send(t, srv.URL, "r9", "rl1:s:9:db"); s != http.StatusOK {
		t.Fatalf("reader 9, at the confirmed token, cluster down: %d", s)
	}
	if s, code, _ := send(t, srv.URL, "r10", "rl1:s:10:db"); s != http.StatusServiceUnavailable || code != CodeClusterUnavailable {
		t.Fatalf("reader 10, above it, cluster down: %d %s, want 503 %s", s, code, CodeClusterUnavailable)
	}
	if m, _ := st.Marks("db"); m.Highest != 9 {
		t.Fatalf("highest mark %d, want 9", m.Highest)
	}
	cl.set(func(c *fakeCluster) { c.down, c.current["rl1:s:10:db"] = false, 10 })
	if s, _, _ := send(t, srv.URL, "r10", "rl1:s:10:db"); s != http.StatusOK {
		t.Fatalf("reader 10, cluster back: %d", s)
	}
}

// Concurrent first requests of one sequencer share one question.
func TestProxyAsksTheClusterOncePerSequencer(t *testing.T) {
	b, up := newBackend(t)
	hold := make(chan struct{})
	cl := &fakeCluster{current: map[string]sequencer.Token{"rl1:x:7:stock/42": 7}, hold: hold}
	st := openStore(t, filepath.Join(t.TempDir(), "fence.json"), StoreOptions{})
	srv := newProxy(t, up, st, Options{Cluster: cl})
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s, _, _ := send(t, srv.URL, "h", "rl1:x:7:stock/42"); s != http.StatusOK {
				t.Errorf("holder: %d", s)
			}
		}()
	}
	waitFor(t, func() bool { return cl.callCount() >= 1 })
	close(hold)
	for range 5 {
		<-b.arrived
	}
	wg.Wait()
	if n := cl.callCount(); n != 1 {
		t.Fatalf("%d questions, want 1", n)
	}
}

// With routes, a request must carry a sequencer of its path's lock: a
// valid sequencer of another guarded lock is refused, and so is a path
// under no route or one the backend could read as another path (dot
// segments, encoded or doubled slashes).
func TestProxyRoutesEachPathToItsLock(t *testing.T) {
	b, up := newBackend(t)
	routes, err := NewRoutes(map[string]string{"/stock/42": "stock/42", "/stock/43": "stock/43"})
	if err != nil {
		t.Fatal(err)
	}
	srv := newProxy(t, up, sequencer.NewFence(), Options{Locks: routes})
	put := func(path, seq string) (int, string) {
		req, _ := http.NewRequest(http.MethodPut, srv.URL+path, nil)
		req.URL.Opaque = path // sent as written, not cleaned
		req.Header.Set(sequencer.Header, seq)
		req.Header.Set("X-Test-Id", path)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, e.Error.Code
	}
	for _, c := range []struct {
		path, seq string
		want      int
	}{
		{"/stock/42", "rl1:x:5:stock/42", http.StatusOK},
		{"/stock/42/items/1", "rl1:x:5:stock/42", http.StatusOK},
		{"/stock/43", "rl1:x:6:stock/43", http.StatusOK},
		{"/stock/42", "rl1:x:7:stock/43", http.StatusForbidden},
		{"/stock/420", "rl1:x:5:stock/42", http.StatusForbidden},
		{"/other", "rl1:x:5:stock/42", http.StatusForbidden},
		{"/stock/42/../43", "rl1:x:5:stock/42", http.StatusForbidden},
		{"/stock/42/..%2F43", "rl1:x:5:stock/42", http.StatusForbidden},
		{"/stock//42", "rl1:x:5:stock/42", http.StatusForbidden},
	} {
		st, code := put(c.path, c.seq)
		if st != c.want || (c.want == http.StatusForbidden && code != CodeLockNotGuarded) {
			t.Errorf("%s with %s: %d %s, want %d", c.path, c.seq, st, code, c.want)
		}
		if st == http.StatusOK {
			<-b.arrived
		}
	}
	if n := len(b.log()); n != 6 {
		t.Fatalf("the backend saw %v, want the three admitted requests", b.log())
	}
}
