package node

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
)

// fillBig takes n locks under prefix in one session, each held with a
// value of api.MaxValueBytes (its holder and its history carry it: about
// 9 KB each as an answer counts it), and returns the session.
func fillBig(t *testing.T, c *testCluster, prefix string, n int) api.Info {
	t.Helper()
	ctx := ctxT(t)
	s := mustOpen(t, c, api.OpenRequest{Name: "filler", TTL: time.Minute})
	value := strings.Repeat("v", api.MaxValueBytes)
	for i := range n {
		name := fmt.Sprintf("%s%04d", prefix, i)
		if err := c.do(func(n *Node) error {
			_, err := n.Acquire(ctx, api.AcquireRequest{Name: name, Session: s.ID, Holder: "h", Value: value})
			return err
		}); err != nil {
			t.Fatalf("acquire %s: %v", name, err)
		}
	}
	return s
}

// getLocks sends GET /v1/locks?query to the cluster's first node and
// decodes the answer, failing on any status but 200; it returns the
// answer and its size in bytes.
func getLocks(t *testing.T, c *testCluster, query url.Values) (api.LocksReply, int) {
	t.Helper()
	status, code, body := aclDo(ctxT(t), c.httpAddrs[0], "GET", "/v1/locks?"+query.Encode(), "", nil)
	if status != 200 {
		t.Fatalf("GET /v1/locks?%s: %d %s (%.200s)", query.Encode(), status, code, body)
	}
	var r api.LocksReply
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("GET /v1/locks?%s: %v", query.Encode(), err)
	}
	return r, len(body)
}

// A listing page stops adding locks once they fill api.MaxAnswerBytes,
// whatever its limit, and names the next page: 300 locks of 4 KiB values
// (about 2.7 MB) come in several pages, none over the bound, and reading
// them through next lists every lock once, in order.
func TestListingPagesStopAtTheirByteBoundAndListEveryLockOnce(t *testing.T) {
	c := newTestCluster(t, 1, nil, withHTTP)
	c.leader()
	const n = 300
	fillBig(t, c, "big/", n)
	q := url.Values{"prefix": {"big/"}, "limit": {fmt.Sprint(api.MaxLocksPage)}}
	var names []string
	pages := 0
	for {
		r, size := getLocks(t, c, q)
		pages++
		if size > api.MaxAnswerBytes {
			t.Fatalf("page %d is %d bytes (%d locks), over api.MaxAnswerBytes %d", pages, size, len(r.Locks), api.MaxAnswerBytes)
		}
		if len(r.Locks) == 0 {
			t.Fatalf("page %d is empty, next %q", pages, r.Next)
		}
		for _, l := range r.Locks {
			names = append(names, l.Name)
		}
		if r.Next == "" {
			break
		}
		if r.Next != names[len(names)-1] {
			t.Fatalf("page %d: next %q, want its last lock %q", pages, r.Next, names[len(names)-1])
		}
		q.Set("after", r.Next)
	}
	if pages < 3 || len(names) != n {
		t.Fatalf("%d locks in %d pages, want %d in at least 3", len(names), pages, n)
	}
	for i, name := range names {
		if want := fmt.Sprintf("big/%04d", i); name != want {
			t.Fatalf("lock %d of the listing is %s, want %s", i, name, want)
		}
	}
	ls, err := c.client(t).Locks(ctxT(t), "big/")
	if err != nil || len(ls) != n {
		t.Fatalf("the Go client's listing: %d locks (%v), want %d", len(ls), err, n)
	}
}

// A prefix watch's reset over api.MaxAnswerBytes comes in pages (Next),
// read at the reset's index: the locks changed meanwhile are left out of
// the later pages and answered once by the watch from that index, so the
// watcher sees every lock and every change once (prefixView), and ends
// with the cluster's state. The Go client reads a paged reset whole.
func TestPrefixWatchResetPagesAndTheWatcherSeesEveryLockOnce(t *testing.T) {
	c := newTestCluster(t, 1, nil, withHTTP)
	n, _ := c.leader()
	ctx := ctxT(t)
	const count = 300
	s := fillBig(t, c, "big/", count)
	first, size := getLocks(t, c, url.Values{"prefix": {"big/"}, "index": {"0"}})
	if !first.Reset || first.Next == "" || len(first.Locks) >= count || size > api.MaxAnswerBytes {
		t.Fatalf("reset of %d locks: %d locks in %d bytes, reset %v, next %q; want a first page under %d bytes naming the next",
			count, len(first.Locks), size, first.Reset, first.Next, api.MaxAnswerBytes)
	}

	v := newPrefixView(t, "big/")
	ch, err := n.WatchLocks(ctx, "big/", 0, time.Second)
	if err != nil || !ch.Reset || ch.Next == "" {
		t.Fatalf("the reset's first page: reset %v next %q (%v)", ch.Reset, ch.Next, err)
	}
	if err := v.apply(ch); err != nil {
		t.Fatal(err)
	}
	at := ch.Index
	// Changes after the reset's index, in the pages still to read: a lock
	// released, one taken anew.
	last := fmt.Sprintf("big/%04d", count-1)
	if err := n.Release(ctx, api.ReleaseRequest{Name: last, Session: s.ID, Holder: "h"}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Acquire(ctx, api.AcquireRequest{Name: "big/zz", Session: s.ID, Holder: "h"}); err != nil {
		t.Fatal(err)
	}
	for next := ch.Next; next != ""; {
		page, err := n.ResetPage(ctx, "big/", at, next)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range page.Locks {
			if l.Name == last || l.Name == "big/zz" {
				t.Fatalf("reset page after %s answered %s, changed above the reset's index %d", next, l.Name, at)
			}
			v.locks[l.Name] = l
		}
		next = page.Next
	}
	if len(v.locks) != count-1 {
		t.Fatalf("the reset's pages hold %d locks, want %d (all but the one changed since)", len(v.locks), count-1)
	}
	for v.index < n.fsm.AppliedIndex() {
		ch, err := n.WatchLocks(ctx, "big/", v.index, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.apply(ch); err != nil {
			t.Fatal(err)
		}
	}
	want, err := n.Locks(ctx, "big/")
	if err != nil {
		t.Fatal(err)
	}
	if len(v.locks) != len(want) || len(want) != count {
		t.Fatalf("the watcher knows %d locks, the cluster holds %d, want %d", len(v.locks), len(want), count)
	}
	for _, l := range want {
		if got, ok := v.locks[l.Name]; !ok || got.Index != l.Index {
			t.Fatalf("the watcher's %s is at %d (known %v), the cluster's at %d", l.Name, got.Index, ok, l.Index)
		}
	}

	whole, err := c.client(t).WatchLocks(ctx, "big/", 0, time.Second)
	if err != nil || !whole.Reset || whole.Next != "" || len(whole.Locks) != count {
		t.Fatalf("the Go client's reset: %d locks, reset %v, next %q (%v); want all %d, whole", len(whole.Locks), whole.Reset, whole.Next, err, count)
	}
}

// The answers a node builds and sends at once hold bytes of its budget
// and of their token's: past either, an answer waits for room and is
// refused with resource_exhausted naming the bound if none is made in
// time; a release lets a waiting one through.
func TestAnswersPastTheBytesInFlightWaitThenAreRefused(t *testing.T) {
	ctx := ctxT(t)
	b := &answerBudget{wait: 50 * time.Millisecond}
	const w = api.MaxAnswerBytes
	r1, err := b.take(ctx, "a", w, 3*w, 2*w)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.take(ctx, "a", w, 3*w, 2*w); err != nil {
		t.Fatal(err)
	}
	if _, err := b.take(ctx, "a", w, 3*w, 2*w); api.CodeOf(err) != api.CodeResourceExhausted || !strings.Contains(err.Error(), "per-token") {
		t.Fatalf("a token's third answer over its bound: %v, want resource_exhausted naming the per-token bound", err)
	}
	if _, err := b.take(ctx, "b", w, 3*w, 2*w); err != nil {
		t.Fatal(err)
	}
	if _, err := b.take(ctx, "c", w, 3*w, 2*w); api.CodeOf(err) != api.CodeResourceExhausted || !strings.Contains(err.Error(), "--max-answer-bytes-in-flight)") {
		t.Fatalf("an answer over the node's bound: %v, want resource_exhausted naming it", err)
	}
	b.wait = time.Minute
	var wg sync.WaitGroup
	wg.Add(1)
	var waited error
	go func() {
		defer wg.Done()
		var r func()
		r, waited = b.take(ctx, "c", w, 3*w, 2*w)
		if waited == nil {
			r()
		}
	}()
	r1()
	wg.Wait()
	if waited != nil {
		t.Fatalf("an answer waiting for room, once another released: %v", waited)
	}
	if got := b.inUse(); got != 2*w {
		t.Fatalf("%d bytes held, want %d", got, 2*w)
	}
}
