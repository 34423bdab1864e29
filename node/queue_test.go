package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/session"

	"github.com/raftlock/raftlock/sequencer"
)

// The queue contract: a waiter's place belongs to (lock, session, holder)
// in the replicated state until it is granted, its wait runs out, its
// session ends or it is released; any retry finds the same place, and a
// request that stops waiting does not give it up.

// rawAnswer is one HTTP answer: its status and error code ("" on success)
// and, on success, the token.
type rawAnswer struct {
	status int
	code   string
	token  uint64
	err    error // the request failed before an answer
}

// rawPost sends one request to addr, with no retry, and decodes the answer.
func rawPost(ctx context.Context, addr, path string, body any) rawAnswer {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, bytes.NewReader(b))
	if err != nil {
		return rawAnswer{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		return rawAnswer{err: err}
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out struct {
		Token uint64 `json:"token"`
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(data, &out)
	return rawAnswer{status: resp.StatusCode, code: out.Error.Code, token: out.Token}
}

type acquireBody struct {
	Name    string `json:"name"`
	Session string `json:"session"`
	Holder  string `json:"holder"`
	Mode    string `json:"mode,omitempty"`
	Wait    string `json:"wait,omitempty"`
}

// goPost runs rawPost in the background; its answer arrives on the channel.
func goPost(ctx context.Context, addr, path string, body any) <-chan rawAnswer {
	ch := make(chan rawAnswer, 1)
	go func() { ch <- rawPost(ctx, addr, path, body) }()
	return ch
}

// queueOf returns the holders queued on lock, in order, as the leader's
// state machine has them.
func (c *testCluster) queueOf(t *testing.T, lock string) []fsm.Waiter {
	t.Helper()
	n, _ := c.leader()
	l, _ := n.fsm.Lock(lock)
	return l.Waiters
}

// awaitQueue waits until lock's queue holds exactly the given holders, in
// order.
func (c *testCluster) awaitQueue(t *testing.T, lock string, holders ...string) {
	t.Helper()
	eventually(t, 20*time.Second, fmt.Sprintf("queue of %s to be %v", lock, holders), func() error {
		q := c.queueOf(t, lock)
		var got []string
		for _, w := range q {
			got = append(got, w.Holder)
		}
		if fmt.Sprint(got) != fmt.Sprint(holders) {
			return fmt.Errorf("queue %v", got)
		}
		return nil
	})
}

// heldLockCluster is a 3-node cluster with its HTTP API, the leader's
// address and two open sessions (a minute's TTL each).
func heldLockCluster(t *testing.T) (*testCluster, context.Context, string, api.Info, api.Info) {
	t.Helper()
	hc := newHTTPCluster(t)
	_, li := hc.leader()
	return hc, ctxT(t), hc.httpAddrs[li], mustOpen(t, hc, api.OpenRequest{TTL: time.Minute}),
		mustOpen(t, hc, api.OpenRequest{TTL: time.Minute})
}

func pending(t *testing.T, what string, ch <-chan rawAnswer) {
	t.Helper()
	select {
	case a := <-ch:
		t.Fatalf("%s answered %+v while it should still wait", what, a)
	default:
	}
}

func answer(t *testing.T, what string, ch <-chan rawAnswer) rawAnswer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no answer within 30s", what)
	}
	return rawAnswer{}
}

func TestRetryByQueuedHolderKeepsItsPlaceAndEveryRequestLearnsTheOutcome(t *testing.T) {
	hc, ctx, addr, s1, s2 := heldLockCluster(t)
	const L = "q/retry"
	if a := rawPost(ctx, addr, "/v1/acquire", acquireBody{Name: L, Session: s1.ID, Holder: "h1"}); a.status != 200 {
		t.Fatalf("first acquire: %+v", a)
	}
	first := goPost(ctx, addr, "/v1/acquire", acquireBody{Name: L, Session: s2.ID, Holder: "q1", Wait: "20s"})
	hc.awaitQueue(t, L, "q1")

	// A try by the queued holder: lock_busy, and the wait goes on.
	if a := rawPost(ctx, addr, "/v1/acquire", acquireBody{Name: L, Session: s2.ID, Holder: "q1"}); a.status != http.StatusConflict || a.code != "lock_busy" {
		t.Fatalf("try by the queued holder answered %+v, want 409 lock_busy", a)
	}
	pending(t, "the first wait after a try by its holder", first)
	// A much longer wait by the same holder: the same place, its wait set
	// again (more than half of it would be left of the first one).
	second := goPost(ctx, addr, "/v1/acquire", acquireBody{Name: L, Session: s2.ID, Holder: "q1", Wait: "60s"})
	eventually(t, 20*time.Second, "the retried wait to apply", func() error {
		q := hc.queueOf(t, L)
		if len(q) != 1 || q[0].Holder != "q1" || q[0].WaitFor != int64(60*time.Second) {
			return fmt.Errorf("queue %+v", q)
		}
		return nil
	})
	pending(t, "the first wait after a retry", first)
	pending(t, "the retried wait", second)
	// An acquire in the other mode is refused and keeps the place.
	if a := rawPost(ctx, addr, "/v1/acquire", acquireBody{Name: L, Session: s2.ID, Holder: "q1", Mode: "shared", Wait: "5s"}); a.status != http.StatusBadRequest || a.code != "invalid_argument" {
		t.Fatalf("the queued holder asking for the other mode answered %+v, want 400 invalid_argument", a)
	}
	hc.awaitQueue(t, L, "q1")

	// Its own release ends the wait: every waiting request says so.
	if a := rawPost(ctx, addr, "/v1/release", map[string]string{"name": L, "session": s2.ID, "holder": "q1"}); a.status != 200 {
		t.Fatalf("release by the queued holder: %+v", a)
	}
	for what, ch := range map[string]<-chan rawAnswer{"first wait": first, "retried wait": second} {
		if a := answer(t, what, ch); a.status != http.StatusConflict || a.code != "wait_cancelled" {
			t.Fatalf("%s answered %+v after its holder released it, want 409 wait_cancelled", what, a)
		}
	}
	hc.awaitQueue(t, L)
}

func TestAcquireInAnotherModeThanHeldIsRefused(t *testing.T) {
	hc := newHTTPCluster(t)
	ctx := ctxT(t)
	_, li := hc.leader()
	addr := hc.httpAddrs[li]
	s := mustOpen(t, hc, api.OpenRequest{TTL: time.Minute})
	other := mustOpen(t, hc, api.OpenRequest{TTL: time.Minute})
	const L = "t/m"
	if a := rawPost(ctx, addr, "/v1/acquire", acquireBody{Name: L, Session: s.ID, Holder: "h1", Mode: "shared"}); a.status != 200 {
		t.Fatalf("shared acquire: %+v", a)
	}
	if a := rawPost(ctx, addr, "/v1/acquire", acquireBody{Name: L, Session: s.ID, Holder: "h1", Mode: "exclusive"}); a.status != http.StatusBadRequest || a.code != "invalid_argument" {
		t.Fatalf("the shared holder asking for exclusive answered %+v, want 400 invalid_argument", a)
	}
	n, _ := hc.leader()
	if l, _ := n.fsm.Lock(L); l.Mode != sequencer.Shared || len(l.Holders) != 1 {
		t.Fatalf("lock after the refused request: %+v", l)
	}
	if a := rawPost(ctx, addr, "/v1/acquire", acquireBody{Name: L, Session: other.ID, Holder: "r2", Mode: "shared"}); a.status != 200 {
		t.Fatalf("another reader: %+v", a)
	}
}

func TestWaitOutlivesItsLeaderAndEndsAtItsDeadline(t *testing.T) {
	hc := newHTTPCluster(t)
	ctx := ctxT(t)
	_, li := hc.leader()
	s1 := mustOpen(t, hc, api.OpenRequest{TTL: time.Minute})
	s2 := mustOpen(t, hc, api.OpenRequest{TTL: time.Minute})
	const L = "e1/lock"
	if a := rawPost(ctx, hc.httpAddrs[li], "/v1/acquire", acquireBody{Name: L, Session: s1.ID, Holder: "h1"}); a.status != 200 {
		t.Fatalf("first acquire: %+v", a)
	}
	wait := goPost(ctx, hc.httpAddrs[li], "/v1/acquire", acquireBody{Name: L, Session: s2.ID, Holder: "h2", Wait: "4s"})
	hc.awaitQueue(t, L, "h2")

	// Leadership moves while the request waits: the waiter is in the log,
	// so the request cannot say "nothing happened".
	to := (li + 1) % 3
	transferLeadership(t, hc, to)
	if a := answer(t, "the wait on the old leader", wait); a.status != http.StatusServiceUnavailable || a.code != "unknown_outcome" {
		t.Fatalf("a waiting acquire whose leader stepped down answered %+v, want 503 unknown_outcome", a)
	}
	// Nobody retries: the new leader keeps the place, then ends the wait
	// on its own clock.
	hc.awaitQueue(t, L, "h2")
	hc.awaitQueue(t, L)
	// The holder's release leaves the lock free: no ghost grant.
	if a := rawPost(ctx, hc.httpAddrs[to], "/v1/release", map[string]string{"name": L, "session": s1.ID, "holder": "h1"}); a.status != 200 {
		t.Fatalf("release: %+v", a)
	}
	n, _ := hc.leader()
	if l, ok := n.fsm.Lock(L); ok {
		t.Fatalf("lock after its holder released it, past the waiter's deadline: %+v", l)
	}
}

func TestWaiterKeepsItsPlaceWhenItsForwarderDies(t *testing.T) {
	hc := newHTTPCluster(t)
	ctx := ctxT(t)
	_, li := hc.leader()
	f := (li + 1) % 3
	sx := mustOpen(t, hc, api.OpenRequest{TTL: time.Minute})
	sa := mustOpen(t, hc, api.OpenRequest{TTL: time.Minute})
	sb := mustOpen(t, hc, api.OpenRequest{TTL: time.Minute})
	const L = "fw/lock"
	if a := rawPost(ctx, hc.httpAddrs[li], "/v1/acquire", acquireBody{Name: L, Session: sx.ID, Holder: "x"}); a.status != 200 {
		t.Fatalf("first acquire: %+v", a)
	}
	viaFollower := goPost(ctx, hc.httpAddrs[f], "/v1/acquire", acquireBody{Name: L, Session: sa.ID, Holder: "a", Wait: "30s"})
	hc.awaitQueue(t, L, "a")
	b := goPost(ctx, hc.httpAddrs[li], "/v1/acquire", acquireBody{Name: L, Session: sb.ID, Holder: "b", Wait: "30s"})
	hc.awaitQueue(t, L, "a", "b")
	// Readers see the queue in order (holder ids and modes, no session ids).
	st, err := hc.client(t).LockState(ctx, L)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(st.Queue) != "[{a exclusive} {b exclusive}]" {
		t.Fatalf("queue as read: %v", st.Queue)
	}

	// The follower that forwards A's request dies.
	hc.stop(f)
	if a := answer(t, "the request through the dead follower", viaFollower); a.err == nil && a.status == 200 {
		t.Fatalf("the request through a dead follower was granted: %+v", a)
	}
	hc.awaitQueue(t, L, "a", "b")
	// A asks again through the leader: the same place.
	retry := goPost(ctx, hc.httpAddrs[li], "/v1/acquire", acquireBody{Name: L, Session: sa.ID, Holder: "a", Wait: "30s"})
	if a := rawPost(ctx, hc.httpAddrs[li], "/v1/release", map[string]string{"name": L, "session": sx.ID, "holder": "x"}); a.status != 200 {
		t.Fatalf("release: %+v", a)
	}
	ga := answer(t, "A's retry", retry)
	if ga.status != 200 {
		t.Fatalf("A's retry answered %+v, want the grant (A was first in the queue)", ga)
	}
	pending(t, "B's wait while A holds the lock", b)
	if a := rawPost(ctx, hc.httpAddrs[li], "/v1/release", map[string]string{"name": L, "session": sa.ID, "holder": "a"}); a.status != 200 {
		t.Fatalf("release by A: %+v", a)
	}
	if gb := answer(t, "B's wait", b); gb.status != 200 || gb.token <= ga.token {
		t.Fatalf("B answered %+v after A (token %d) released, want a later grant", gb, ga.token)
	}
}

// Lock and Campaign keep FIFO order however long they wait: there are no
// 30 s slices that re-queue a waiter at the back, and waiting writes
// nothing to the lock.
func TestLongWaitsKeepFIFOOrder(t *testing.T) {
	hc := newHTTPCluster(t)
	for _, tc := range []struct {
		name string
		wait func(ctx context.Context, s *session.Session, lock string) error
	}{
		{"Lock", func(ctx context.Context, s *session.Session, lock string) error {
			_, err := s.Lock(ctx, lock)
			return err
		}},
		{"Campaign", func(ctx context.Context, s *session.Session, lock string) error {
			_, err := s.Campaign(ctx, lock, s.Name())
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			t.Cleanup(cancel)
			cl := hc.client(t)
			lock := "fifo/" + tc.name
			x := openSession(t, ctx, cl, session.Name("x"))
			held, err := x.Lock(ctx, lock)
			if err != nil {
				t.Fatal(err)
			}
			order := make(chan string, 2)
			for _, name := range []string{"A", "B"} {
				s := openSession(t, ctx, cl, session.Name(name))
				go func() {
					if err := tc.wait(ctx, s, lock); err == nil {
						order <- name
					}
				}()
				eventually(t, 20*time.Second, name+" to queue", func() error {
					st, err := cl.LockState(ctx, lock)
					if err != nil {
						return err
					}
					if want := map[string]int{"A": 1, "B": 2}[name]; st.Waiters != want {
						return fmt.Errorf("%d waiters", st.Waiters)
					}
					return nil
				})
			}
			before, err := cl.LockState(ctx, lock)
			if err != nil {
				t.Fatal(err)
			}
			// Past the 30 s after which the old client re-queued.
			<-time.After(31 * time.Second)
			after, err := cl.LockState(ctx, lock)
			if err != nil {
				t.Fatal(err)
			}
			if after.Index != before.Index || after.Waiters != 2 {
				t.Fatalf("waiting changed the lock: index %d -> %d, waiters %d", before.Index, after.Index, after.Waiters)
			}
			if err := held.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if first := <-order; first != "A" {
				t.Fatalf("%s was granted first; A queued first", first)
			}
		})
	}
}

// A holder re-asking with a wait of which more than half is still left of
// its current one (a client renewing after its request slice) keeps its
// place without a Raft write: the wait's index stays.
func TestRenewalOfAWaitWritesNothing(t *testing.T) {
	hc, ctx, addr, s1, s2 := heldLockCluster(t)
	// Every member's record first: one arriving later would be an entry
	// the count below takes for the renewal's.
	hc.awaitRecords(t, fsm.Version, fsm.Version, fsm.Version)
	const L = "q/renew"
	if a := rawPost(ctx, addr, "/v1/acquire", acquireBody{Name: L, Session: s1.ID, Holder: "h1"}); a.status != 200 {
		t.Fatalf("first acquire: %+v", a)
	}
	first := goPost(ctx, addr, "/v1/acquire", acquireBody{Name: L, Session: s2.ID, Holder: "q1", Wait: "60s"})
	hc.awaitQueue(t, L, "q1")
	n, _ := hc.leader()
	applied := n.fsm.AppliedIndex()
	renewed := goPost(ctx, addr, "/v1/acquire", acquireBody{Name: L, Session: s2.ID, Holder: "q1", Wait: "60s"})
	eventually(t, 20*time.Second, "the renewal to wait beside the first request", func() error {
		t := n.leadership()
		if t == nil {
			return fmt.Errorf("no longer leads")
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		if w := len(t.waits[waitKey{L, s2.ID, "q1"}]); w != 2 {
			return fmt.Errorf("%d requests wait", w)
		}
		return nil
	})
	// The release grants q1 in one entry; both requests learn it.
	if a := rawPost(ctx, addr, "/v1/release", map[string]string{"name": L, "session": s1.ID, "holder": "h1"}); a.status != 200 {
		t.Fatalf("release: %+v", a)
	}
	for what, ch := range map[string]<-chan rawAnswer{"first": first, "renewal": renewed} {
		if a := answer(t, what, ch); a.status != 200 {
			t.Fatalf("%s answered %+v, want the grant", what, a)
		}
	}
	if got := n.fsm.AppliedIndex(); got != applied+1 {
		t.Fatalf("applied index %d -> %d: the renewal wrote to the log (want only the release)", applied, got)
	}
}
