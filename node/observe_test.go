package node

import (
	"context"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"

	"github.com/raftlock/raftlock/sequencer"
	"github.com/raftlock/raftlock/session"
)

// heldWatch is a api.Backend whose first blocking lock read (index
// above 0) goes to the cluster as usual, but whose answer is held until
// release is closed: the observer riding on it is stuck in that query, as
// behind a frozen node, while the test changes the lock.
type heldWatch struct {
	api.Backend
	once    sync.Once
	sent    chan struct{} // closed when the held query has been sent
	release chan struct{}
}

func newHeldWatch(b api.Backend) *heldWatch {
	return &heldWatch{Backend: b, sent: make(chan struct{}), release: make(chan struct{})}
}

// WatchLock holds the answer of the first blocking query until release.
func (h *heldWatch) WatchLock(ctx context.Context, name string, index uint64, wait time.Duration) (api.LockState, error) {
	held := false
	if index > 0 {
		h.once.Do(func() { held = true })
	}
	if !held {
		return h.Backend.WatchLock(ctx, name, index, wait)
	}
	close(h.sent)
	st, err := h.Backend.WatchLock(ctx, name, index, wait)
	select {
	case <-h.release:
		return st, err
	case <-ctx.Done():
		return api.LockState{}, ctx.Err()
	}
}

// recvLeader receives the next leader Observe reports.
func recvLeader(t *testing.T, ch <-chan session.Leader, what string) session.Leader {
	t.Helper()
	select {
	case ld, ok := <-ch:
		if !ok {
			t.Fatalf("%s: Observe's channel closed", what)
		}
		return ld
	case <-time.After(20 * time.Second): // a bound on a failing test, not a synchronisation
		t.Fatalf("%s: not reported within 20s", what)
	}
	return session.Leader{}
}

// Observe reports every leader in grant order, none skipped and none
// twice, even when three leaders are elected and gone while its blocking
// query is stuck: the answer it finally gets carries the lock's grant
// history, and every grant after the last one reported is reported, in
// token order.
func TestObserveReportsLeadersElectedWhileItsQueryIsBlocked(t *testing.T) {
	c := newHTTPCluster(t)
	c.leader()
	client := c.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const election = "election/observed"
	held := newHeldWatch(client)
	obs, err := session.Observe(ctx, held, election)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-held.sent: // Observe read the (leaderless) election and now blocks
	case <-ctx.Done():
		t.Fatal("Observe never sent its blocking query")
	}

	type elected struct {
		name, value, id string
		token           uint64
	}
	var want []elected
	var last *session.Leadership
	for _, name := range []string{"a", "b", "c"} {
		s := openSession(t, ctx, client, session.TTL(5*time.Second), session.Name("sess-"+name))
		if last != nil {
			if err := last.Resign(ctx); err != nil {
				t.Fatalf("resign before %s: %v", name, err)
			}
		}
		lead, err := s.Campaign(ctx, election, "addr-"+name)
		if err != nil {
			t.Fatalf("campaign %s: %v", name, err)
		}
		want = append(want, elected{name: "sess-" + name, value: "addr-" + name, id: s.ID(), token: uint64(lead.Token())})
		last = lead
	}
	close(held.release)

	for i, w := range want {
		ld := recvLeader(t, obs, "leader "+w.value)
		if ld.Value != w.value || uint64(ld.Token()) != w.token || ld.Election != election || ld.SessionName != w.name || ld.Gap {
			t.Fatalf("leader %d reported: %+v, want %s with token %d, session %s, no gap (all elected: %+v)",
				i+1, ld, w.value, w.token, w.name, want)
		}
		// The last one still leads at the answer that reports it: its
		// session is known then.
		if i == len(want)-1 && ld.SessionHandle != api.SessionHandle(w.id) {
			t.Fatalf("current leader reported with session handle %q, want that of %q", ld.SessionHandle, w.id)
		}
	}

	// Nothing is reported twice: the next report is the next leader.
	if err := last.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	s := openSession(t, ctx, client, session.TTL(5*time.Second), session.Name("sess-d"))
	d, err := s.Campaign(ctx, election, "addr-d")
	if err != nil {
		t.Fatal(err)
	}
	if ld := recvLeader(t, obs, "leader addr-d"); ld.Value != "addr-d" || ld.Token() != d.Token() || ld.Gap {
		t.Fatalf("after the three: %+v, want addr-d with token %d", ld, d.Token())
	}
}

// A lock's state carries its grant history, to any reader, over HTTP:
// token, mode, holder id, value and session name, never the session id; a
// free lock keeps its history, and its index is the entry that freed it.
func TestLockStateCarriesTheGrantHistory(t *testing.T) {
	c := newHTTPCluster(t)
	c.leader()
	client := c.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := openSession(t, ctx, client, session.TTL(5*time.Second), session.Name("alice"))
	l, err := s.Lock(ctx, "jobs/x", session.Value("addr-1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := s.RLock(ctx, "jobs/x")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := client.LockState(ctx, "jobs/x")
	if err != nil {
		t.Fatal(err)
	}
	want := []api.PastGrant{
		{Token: l.Token(), Mode: sequencer.Exclusive, Holder: st.Grants[0].Holder, Value: "addr-1", SessionName: "alice"},
		{Token: r.Token(), Mode: sequencer.Shared, Holder: st.Grants[1].Holder, SessionName: "alice"},
	}
	if len(st.Holders) != 0 || st.Mode != 0 || !reflect.DeepEqual(st.Grants, want) || st.GrantsSince != 1 || st.Index <= uint64(r.Token()) {
		t.Fatalf("free lock %+v, want no holders, history %+v since 1, index after %d", st, want, r.Token())
	}

	resp, err := http.Get("http://" + c.httpAddrs[0] + "/v1/lock?name=jobs/x")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/lock: %d %s %v", resp.StatusCode, body, err)
	}
	if !strings.Contains(string(body), `"session_name":"alice"`) || strings.Contains(string(body), s.ID()) {
		t.Fatalf("GET /v1/lock %s: want the session's name and never its id", body)
	}

	// A lock never granted has no history, complete since the start.
	if st, err := client.LockState(ctx, "jobs/never"); err != nil || len(st.Grants) != 0 || st.GrantsSince != 1 {
		t.Fatalf("lock never granted: %+v, %v", st, err)
	}
}
