package node

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/sequencer"
)

// lock_busy says why, from the state the entry found: the holders by
// session name and holder id, the mode, the lock-delay's end (RFC 3339,
// rounded up to the second) and the queue.
func TestLockBusyMessageSaysWhy(t *testing.T) {
	until := time.Date(2026, 11, 24, 10, 0, 4, 200_000_000, time.UTC).UnixNano()
	h := func(session, holder string) fsm.BusyHolder {
		return fsm.BusyHolder{SessionName: session, Holder: holder}
	}
	for _, tc := range []struct {
		holder string
		busy   *fsm.Busy
		want   string
	}{
		{"h2", &fsm.Busy{Mode: sequencer.Exclusive, Holders: []fsm.BusyHolder{h("demo", "h1")}},
			`lock "jobs/a" is held by session "demo" (holder h1)`},
		{"h2", &fsm.Busy{DelayUntil: until},
			`lock "jobs/a" is free but in lock-delay until 2026-11-24T10:00:05Z`},
		{"h2", &fsm.Busy{DelayUntil: time.Date(2026, 11, 24, 10, 0, 5, 0, time.UTC).UnixNano()},
			`lock "jobs/a" is free but in lock-delay until 2026-11-24T10:00:05Z`},
		{"h2", &fsm.Busy{Mode: sequencer.Shared, Holders: []fsm.BusyHolder{h("r1", "a"), h("", "b")}, DelayUntil: until, Waiters: 1},
			`lock "jobs/a" is held in shared mode by session "r1" (holder a), an unnamed session (holder b) and in lock-delay until 2026-11-24T10:00:05Z, with 1 waiter queued`},
		{"h9", &fsm.Busy{Mode: sequencer.Shared, Holders: []fsm.BusyHolder{h("r1", "a"), h("r2", "b"), h("r3", "c"), h("r4", "d"), h("r5", "e")}, Waiters: 2},
			`lock "jobs/a" is held in shared mode by session "r1" (holder a), session "r2" (holder b), session "r3" (holder c) and 2 more, with 2 waiters queued`},
		{"q1", &fsm.Busy{Mode: sequencer.Exclusive, Holders: []fsm.BusyHolder{h("demo", "h1")}, Waiters: 3, Place: 2},
			`lock "jobs/a" is held by session "demo" (holder h1); holder q1 waits in its queue (place 2 of 3)`},
		{"h2", nil, `lock "jobs/a" is held or in its lock-delay`},
	} {
		err := lockBusy("jobs/a", tc.holder, tc.busy)
		var e *api.Error
		if !errors.As(err, &e) || e.Code != api.CodeLockBusy || e.Message != tc.want {
			t.Errorf("lockBusy(%+v) = %v\nwant lock_busy: %s", tc.busy, err, tc.want)
		}
	}
}

// A try on a held lock answers lock_busy naming the holder's session by
// its name and the holder id, never the session id (a secret).
func TestLockBusyNamesTheHolder(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	demo := mustOpen(t, c, api.OpenRequest{Name: "demo"})
	other := mustOpen(t, c, api.OpenRequest{Name: "other"})
	mustAcquire(t, c, api.AcquireRequest{Name: "jobs/a", Session: demo.ID, Holder: "h1"})
	err := c.do(func(n *Node) error {
		_, err := n.Acquire(ctxT(t), api.AcquireRequest{Name: "jobs/a", Session: other.ID, Holder: "h2"})
		return err
	})
	const want = `lock "jobs/a" is held by session "demo" (holder h1)`
	var e *api.Error
	if !errors.As(err, &e) || e.Code != api.CodeLockBusy || e.Message != want {
		t.Fatalf("try on a held lock: %v; want lock_busy: %s", err, want)
	}
	if strings.Contains(e.Message, demo.ID) || strings.Contains(e.Message, other.ID) {
		t.Fatalf("lock_busy names a session id: %s", e.Message)
	}
}

// The no_leader answer of each kind of node that does not serve.
func TestNoLeaderSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		leader  string
		leading bool
		want    string
	}{
		{"n1", true, "node n1 leads (term 7) but is not serving yet; retry"},
		{"", true, "node n1 leads (term 7) but is not serving yet; retry"},
		{"n2", false, "node n1 is not the leader (leader: n2)"},
		{"", false, "node n1: no leader known"},
	} {
		err := noLeaderError("n1", tc.leader, tc.leading, 7)
		var e *api.Error
		if !errors.As(err, &e) || e.Code != api.CodeNoLeader || e.Message != tc.want {
			t.Errorf("noLeaderError(leader %q, leading %v) = %v; want no_leader: %s", tc.leader, tc.leading, err, tc.want)
		}
	}
}

// A leader elected but not serving yet (held back here: before its Barrier
// and lease reset it is not ready) answers no_leader saying so, while
// /v1/cluster and /v1/health name it the leader with serving false; once
// it serves, both say serving true.
func TestElectedLeaderNotServingYet(t *testing.T) {
	c := newTestCluster(t, 1, nil, withHTTP)
	n, _ := c.leader()
	addr := c.httpAddrs[0]
	n.ready.Store(false) // as between the election and the end of lead's catching up
	term := n.raft.CurrentTerm()

	_, err := n.OpenSession(ctxT(t), api.OpenRequest{})
	want := "node n1 leads (term " + itoa(term) + ") but is not serving yet; retry"
	var e *api.Error
	if !errors.As(err, &e) || e.Code != api.CodeNoLeader || e.Message != want {
		t.Fatalf("open on a leader not serving yet: %v; want no_leader: %s", err, want)
	}
	var health api.HealthInfo
	getJSON(t, addr, "/v1/health", &health)
	if !health.IsLeader || health.Serving || health.Leader != "n1" {
		t.Fatalf("health of a leader not serving yet: %+v; want is_leader, not serving", health)
	}
	var cluster api.ClusterInfo
	getJSON(t, addr, "/v1/cluster", &cluster)
	if cluster.Leader != "n1" || cluster.Serving || cluster.Term != term {
		t.Fatalf("cluster of a leader not serving yet: %+v; want leader n1, not serving", cluster)
	}

	n.ready.Store(true)
	getJSON(t, addr, "/v1/health", &health)
	getJSON(t, addr, "/v1/cluster", &cluster)
	if !health.Serving || !cluster.Serving {
		t.Fatalf("a serving leader: health %+v, cluster %+v; want serving", health, cluster)
	}
}

func itoa(u uint64) string { b, _ := json.Marshal(u); return string(b) }

// getJSON GETs path from the HTTP API at addr and decodes the 200 answer.
func getJSON(t *testing.T, addr, path string, v any) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: HTTP %d", path, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// The last replica, its two peers gone (no quorum), shuts down at once,
// with a call of its embedded Backend still retrying (it needs a quorum it
// will never get).
func TestLastReplicaShutsDownWithoutQuorum(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	_, li := c.leader()
	last := (li + 1) % 3
	n := c.snapshotNodes()[last]
	info, err := n.Backend().OpenSession(ctxT(t), api.OpenRequest{Name: "last"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if i != last {
			c.stop(i)
		}
	}
	callCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	closed := make(chan error, 1)
	go func() { closed <- n.Backend().CloseSession(callCtx, info.ID) }()

	const bound = 5 * time.Second
	ctx, cancelStop := context.WithTimeout(context.Background(), bound)
	defer cancelStop()
	if err := n.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown of the last replica, alone: %v; want done within %v", err, bound)
	}
	select {
	case err := <-closed:
		t.Fatalf("the close of a session without a quorum answered %v; want it still retrying", err)
	default:
	}
	cancel()
	if err := <-closed; !errors.Is(err, context.Canceled) {
		t.Fatalf("close without a quorum, its ctx cancelled: %v; want context.Canceled", err)
	}
}

// Shutdown returns by the time its ctx ends, whatever stopping takes; the
// stop goes on, and a later Shutdown waits for its end.
func TestShutdownReturnsByItsCtx(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	n, _ := c.leader()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := n.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("shutdown with an ended ctx: %v; want nil or context.Canceled", err)
	}
	if err := n.Shutdown(ctxT(t)); err != nil {
		t.Fatalf("second shutdown: %v; want the stop's end, nil", err)
	}
	if _, err := n.OpenSession(ctxT(t), api.OpenRequest{}); api.CodeOf(err) != api.CodeNoLeader {
		t.Fatalf("open on a stopped node: %v; want no_leader", err)
	}
}

// Through the embedded Backend, on the leader (in-process) and on a
// follower (over the peer port) alike, a lock name that is not valid UTF-8
// is refused, never granted as another name.
func TestEmbeddedRefusesInvalidUTF8(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	_, li := c.leader()
	for i, n := range c.snapshotNodes() {
		b := n.Backend()
		s, err := b.OpenSession(ctxT(t), api.OpenRequest{Name: "s"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.Acquire(ctxT(t), api.AcquireRequest{Name: "inv\xff", Session: s.ID, Holder: "h"})
		if api.CodeOf(err) != api.CodeInvalidArgument || !strings.Contains(err.Error(), "not valid UTF-8") {
			t.Errorf("acquire of an invalid UTF-8 name through n%d (leader n%d): %v; want invalid_argument", i+1, li+1, err)
		}
	}
	ls, err := c.snapshotNodes()[li].Locks(ctxT(t), "")
	if err != nil || len(ls) != 0 {
		t.Fatalf("locks after refused acquires: %+v, %v; want none", ls, err)
	}
}
