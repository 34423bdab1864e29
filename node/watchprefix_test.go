package node

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/api/apitest"
	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/sequencer"
)

// A prefix watch refuses bad input with a stable code before it waits: a
// prefix that is not valid text, an index that is not a number, a wait
// out of range, paging parameters; and once the node serves its cap of
// prefix watches, one more is refused (resource_exhausted, 429, saying
// which limit) while the others go on waiting.
func TestPrefixWatchRefusesBadInputAndWatchesPastItsCap(t *testing.T) {
	c := newTestCluster(t, 1, func(cfg *Config) { cfg.MaxPrefixWatchers = 2 }, withHTTP)
	ctx := ctxT(t)
	n, _ := c.leader()
	addr := c.httpAddrs[0]
	for _, tc := range []struct{ query, code string }{
		{"prefix=%ff&index=0", "invalid_argument"},
		{"prefix=a%00b&index=0", "invalid_argument"},
		{"prefix=" + strings.Repeat("x", sequencer.MaxNameBytes+1) + "&index=0", "invalid_argument"},
		{"prefix=a/&index=abc", "invalid_argument"},
		{"prefix=a/&index=-1", "invalid_argument"},
		{"prefix=a/&index=1&wait=11m", "invalid_argument"},
		{"prefix=a/&index=1&wait=-1s", "invalid_argument"},
		{"prefix=a/&index=1&wait=soon", "invalid_argument"},
		{"prefix=a/&index=1&limit=5", "invalid_argument"},
		{"prefix=a/&index=1&after=a/1&wait=1s", "invalid_argument"},
		{"prefix=a/&index=0&after=a/1", "invalid_argument"},
		{"prefix=a/&index=1&bogus=1", "invalid_argument"},
	} {
		if status, code, body := aclDo(ctx, addr, "GET", "/v1/locks?"+tc.query, "", nil); code != tc.code || status != 400 {
			t.Errorf("GET /v1/locks?%.60s: %d %s (%s), want 400 %s", tc.query, status, code, body, tc.code)
		}
	}
	if got := n.prefixWatches.count(""); got != 0 {
		t.Fatalf("%d prefix watches counted after refusals, want 0", got)
	}

	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 2)
	for i := 0; i < 2; i++ {
		go func() {
			_, err := n.WatchLocks(wctx, "a/", 1<<40, time.Minute)
			done <- err
		}()
	}
	eventually(t, 10*time.Second, "two watches waiting", func() error {
		if got := n.prefixWatches.count(""); got != 2 {
			return fmt.Errorf("%d watches", got)
		}
		return nil
	})
	status, code, body := aclDo(ctx, addr, "GET", "/v1/locks?prefix=b/&index=0", "", nil)
	if status != 429 || code != "resource_exhausted" || !bytes.Contains(body, []byte("limit of 2 prefix watches")) {
		t.Fatalf("a third watch: %d %s %s; want 429 resource_exhausted naming the limit", status, code, body)
	}
	cancel()
	for i := 0; i < 2; i++ {
		if err := <-done; err != context.Canceled {
			t.Fatalf("a waiting watch ended with %v, want its context's end", err)
		}
	}
	if got := n.prefixWatches.count(""); got != 0 {
		t.Fatalf("%d prefix watches counted after they ended, want 0", got)
	}
	if status, _, body := aclDo(ctx, addr, "GET", "/v1/locks?prefix=b/&index=0", "", nil); status != 200 || !bytes.Contains(body, []byte(`"reset":true`)) {
		t.Fatalf("a watch once the others ended: %d %s; want 200 and a reset listing", status, body)
	}
}

// With ACLs on a prefix watch needs read on its whole prefix (a watch on
// "" needs read on ""), and one token holds at most its cap of watches
// on a node, whatever other tokens do.
func TestPrefixWatchNeedsReadOnItsPrefixAndCountsPerToken(t *testing.T) {
	logs := &apitest.LogBuffer{}
	c := newTestCluster(t, 1, func(cfg *Config) {
		cfg.ACL = true
		cfg.MaxPrefixWatchersPerToken = 1
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: cfg.ID, Level: hclog.Trace, Output: logs})
	}, withHTTP)
	ctx := ctxT(t)
	n, _ := c.leader()
	addr := c.httpAddrs[0]
	_, admin := c.bootstrapACL(t, ctx)
	jobs, err := admin.CreateToken(ctx, api.TokenRequest{Name: "jobs", Rules: []string{"read:jobs/"}})
	if err != nil {
		t.Fatal(err)
	}
	other, err := admin.CreateToken(ctx, api.TokenRequest{Name: "other", Rules: []string{"read:"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		secret, prefix string
		status         int
		code           string
	}{
		{"", "jobs/", 401, "unauthenticated"},
		{jobs.Secret, "", 403, "permission_denied"},
		{jobs.Secret, "job", 403, "permission_denied"},
		{jobs.Secret, "other/", 403, "permission_denied"},
		{jobs.Secret, "jobs/", 200, ""},
		{jobs.Secret, "jobs/a", 200, ""},
		{other.Secret, "", 200, ""},
	} {
		path := "/v1/locks?index=0&prefix=" + url.QueryEscape(tc.prefix)
		if status, code, body := aclDo(ctx, addr, "GET", path, tc.secret, nil); status != tc.status || code != tc.code {
			t.Errorf("watch %q (token given: %v): %d %s (%s), want %d %s", tc.prefix, tc.secret != "", status, code, body, tc.status, tc.code)
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		aclDo(wctx, addr, "GET", "/v1/locks?prefix=jobs/&index=1099511627776&wait=1m", jobs.Secret, nil)
	}()
	eventually(t, 10*time.Second, "jobs's watch waiting", func() error {
		if got := n.prefixWatches.count(jobs.ID); got != 1 {
			return fmt.Errorf("%d watches", got)
		}
		return nil
	})
	status, code, body := aclDo(ctx, addr, "GET", "/v1/locks?prefix=jobs/&index=0", jobs.Secret, nil)
	if status != 429 || code != "resource_exhausted" || !bytes.Contains(body, []byte(jobs.ID)) {
		t.Fatalf("jobs's second watch: %d %s %s; want 429 resource_exhausted naming the token", status, code, body)
	}
	if status, _, body := aclDo(ctx, addr, "GET", "/v1/locks?prefix=jobs/&index=0", other.Secret, nil); status != 200 {
		t.Fatalf("another token's watch: %d %s, want 200", status, body)
	}
	cancel()
	<-done
	for _, s := range []string{jobs.Secret, other.Secret} {
		if strings.Contains(logs.String(), s) {
			t.Fatal("a token's secret reached the log")
		}
	}
}

// count is how many prefix watches w counts for token ("": in all).
func (w *watchCount) count(token string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if token == "" {
		return w.total
	}
	return w.byToken[token]
}

// prefixView is a prefix watcher's knowledge, built from its batches and
// checked against the rule of prefix watches as it goes: the index never
// goes back, no change is answered twice (every lock answered without a
// reset changed after the watcher's index, at most at the answer's), and
// every grant is seen (each grant's token, from the lock's history, lies
// in exactly one answer's range).
type prefixView struct {
	t      *testing.T
	prefix string
	index  uint64
	locks  map[string]api.LockState
	grants map[sequencer.Token]int // times each grant token was seen
	resets int
}

func newPrefixView(t *testing.T, prefix string) *prefixView {
	return &prefixView{t: t, prefix: prefix, locks: map[string]api.LockState{}, grants: map[sequencer.Token]int{}}
}

func (v *prefixView) apply(ch api.LocksChange) error {
	if ch.Index < v.index {
		return fmt.Errorf("answer index %d went back from %d", ch.Index, v.index)
	}
	if ch.Reset {
		v.resets++
		v.locks = map[string]api.LockState{}
	}
	for _, l := range ch.Locks {
		if !strings.HasPrefix(l.Name, v.prefix) {
			return fmt.Errorf("answered %s, outside %q", l.Name, v.prefix)
		}
		if !ch.Reset && (l.Index <= v.index || l.Index > ch.Index) {
			return fmt.Errorf("%s changed at %d answered in (%d, %d]: seen twice or from the future", l.Name, l.Index, v.index, ch.Index)
		}
		for _, g := range l.Grants {
			if uint64(g.Token) > v.index && uint64(g.Token) <= ch.Index {
				v.grants[g.Token]++
			}
		}
		if len(l.Holders) == 0 && l.Waiters == 0 && l.DelayUntil.IsZero() {
			delete(v.locks, l.Name)
		} else {
			v.locks[l.Name] = l
		}
	}
	v.index = ch.Index
	return nil
}

// A prefix watcher sees every change under its prefix once, in order,
// across a leader failover: the grants and releases of a known sequence
// under w/ (with changes under x/ mixed in, never answered) are each seen
// exactly once, by token, the answer's index never goes back, and the
// watcher's view ends equal to the cluster's state.
func TestPrefixWatchSeesEveryChangeOnceAcrossALeaderFailover(t *testing.T) {
	c := newHTTPCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s := mustOpen(t, c, api.OpenRequest{Name: "writer", TTL: 30 * time.Second})
	defer c.keepAlive(s.ID, time.Second)()

	v := newPrefixView(t, "w/")
	type report struct {
		index  uint64
		tokens int
		err    error
	}
	reports := make(chan report, 1024)
	wctx, stopWatch := context.WithCancel(ctx)
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for ch, err := range c.client(t).WatchPrefix(wctx, "w/", 0) {
			if err == nil {
				err = v.apply(ch)
			}
			reports <- report{v.index, len(v.grants), err}
			if err != nil {
				return
			}
		}
	}()
	defer func() { stopWatch(); <-watchDone }()
	first := <-reports
	if first.err != nil {
		t.Fatal(first.err)
	}

	var want []sequencer.Token
	release := func(name string) {
		t.Helper()
		if err := c.do(func(n *Node) error {
			return n.Release(ctx, api.ReleaseRequest{Name: name, Session: s.ID, Holder: "h"})
		}); err != nil {
			t.Fatalf("release %s: %v", name, err)
		}
	}
	for round := 0; round < 6; round++ {
		if round == 3 {
			_, li := c.leader()
			c.stop(li)
		}
		for i := 0; i < 4; i++ {
			for _, p := range []string{"w/", "x/"} {
				name := fmt.Sprintf("%s%d", p, i)
				g := mustAcquire(t, c, api.AcquireRequest{Name: name, Session: s.ID, Holder: "h", Mode: sequencer.Exclusive})
				if p == "w/" {
					want = append(want, g.Token)
				}
				if (round+i)%2 == 0 {
					release(name)
				}
			}
		}
		for i := 0; i < 4; i++ {
			release(fmt.Sprintf("w/%d", i))
		}
	}
	last := mustAcquire(t, c, api.AcquireRequest{Name: "w/last", Session: s.ID, Holder: "h", Mode: sequencer.Exclusive})
	want = append(want, last.Token)
	for r := first; r.index < uint64(last.Token); {
		select {
		case r = <-reports:
			if r.err != nil {
				t.Fatal(r.err)
			}
		case <-ctx.Done():
			t.Fatalf("the watcher did not reach the last grant's index %d: at %d", last.Token, r.index)
		}
	}
	stopWatch()
	<-watchDone
	for _, tok := range want {
		if v.grants[tok] != 1 {
			t.Errorf("grant %d seen %d times, want once", tok, v.grants[tok])
		}
	}
	if len(v.grants) != len(want) {
		t.Errorf("%d grants seen, want the %d made under w/", len(v.grants), len(want))
	}
	if v.resets != 1 {
		t.Errorf("%d resets, want the first answer's alone", v.resets)
	}
	if len(v.locks) != 1 || v.locks["w/last"].Holders[0].Token != last.Token {
		t.Errorf("the watcher's view %+v, want w/last held alone", v.locks)
	}
}

// A restore replaces the state: a watcher waiting from before it is
// answered a reset (the restored state under its prefix, which replaces
// its own) at an index at or above the restore's floor, never below its
// own; from there it goes on watching without another reset.
func TestPrefixWatchAnswersARestoreAsAResetAboveTheFloor(t *testing.T) {
	c := newHTTPCluster(t)
	ctx := ctxT(t)
	cl := c.client(t)
	s := mustOpen(t, c, api.OpenRequest{Name: "old", TTL: 30 * time.Second})
	defer c.keepAlive(s.ID, time.Second)()
	mustAcquire(t, c, api.AcquireRequest{Name: "r/backup", Session: s.ID, Holder: "h", Mode: sequencer.Exclusive})
	var backup bytes.Buffer
	if _, err := cl.Snapshot(ctx, &backup); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	g := mustAcquire(t, c, api.AcquireRequest{Name: "r/after", Session: s.ID, Holder: "h", Mode: sequencer.Exclusive})
	v := newPrefixView(t, "r/")
	ch, err := cl.WatchLocks(ctx, "r/", 0, 0)
	if err == nil {
		err = v.apply(ch)
	}
	if err != nil || len(v.locks) != 2 || v.index < uint64(g.Token) {
		t.Fatalf("listing: %+v at %d (%v); want r/backup and r/after", v.locks, v.index, err)
	}
	answered := make(chan api.LocksChange, 1)
	errs := make(chan error, 1)
	go func() {
		ch, err := cl.WatchLocks(ctx, "r/", v.index, time.Minute)
		if err != nil {
			errs <- err
			return
		}
		answered <- ch
	}()
	info, err := cl.Restore(ctx, backup.Bytes(), 0)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	select {
	case ch = <-answered:
	case err := <-errs:
		t.Fatalf("the waiting watch: %v", err)
	case <-ctx.Done():
		t.Fatal("the waiting watch was not answered after the restore")
	}
	before := v.index
	if err := v.apply(ch); err != nil {
		t.Fatal(err)
	}
	if !ch.Reset || ch.Index < info.Floor || ch.Index < before {
		t.Fatalf("answer after the restore: reset %v at %d; want a reset at ≥ the floor %d and ≥ %d", ch.Reset, ch.Index, info.Floor, before)
	}
	ls, err := cl.Locks(ctx, "r/")
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != len(v.locks) {
		t.Fatalf("the watcher knows %d locks after the reset, the cluster holds %d: %+v", len(v.locks), len(ls), ls)
	}
	for _, l := range ls {
		if _, ok := v.locks[l.Name]; !ok {
			t.Fatalf("the watcher does not know %s after the reset", l.Name)
		}
	}
	s2 := mustOpen(t, c, api.OpenRequest{Name: "new", TTL: 30 * time.Second})
	defer c.keepAlive(s2.ID, time.Second)()
	g2 := mustAcquire(t, c, api.AcquireRequest{Name: "r/new", Session: s2.ID, Holder: "h", Mode: sequencer.Exclusive})
	for v.index < uint64(g2.Token) {
		ch, err := cl.WatchLocks(ctx, "r/", v.index, 0)
		if err == nil {
			err = v.apply(ch)
		}
		if err != nil || ch.Reset {
			t.Fatalf("watching after the restore: reset %v, %v", ch.Reset, err)
		}
	}
	if _, ok := v.locks["r/new"]; !ok {
		t.Fatalf("the watcher missed r/new: %+v", v.locks)
	}
}

// The ring of recent changes lets a woken prefix watch skip the state
// machine only when it knows: a change under the prefix after the index
// says so, one elsewhere does not, and an index the ring no longer
// reaches back to (changes dropped at capacity, a snapshot restored) is
// "cannot tell" (read the state machine).
func TestChangeRingSaysWhetherAPrefixChangedOrThatItCannotTell(t *testing.T) {
	var r changeRing
	changed := func(name string, index uint64) {
		r.note(fsm.Event{Kind: fsm.EventLockChanged, Lock: name, Index: index})
	}
	changed("a/1", 3)
	changed("b/1", 5)
	for _, tc := range []struct {
		prefix string
		index  uint64
		want   bool
	}{{"a/", 2, true}, {"a/", 3, false}, {"b/", 4, true}, {"b/", 5, false}, {"c/", 0, false}, {"", 4, true}} {
		if got := r.changedSince(tc.prefix, tc.index); got != tc.want {
			t.Errorf("changedSince(%q, %d) = %v, want %v", tc.prefix, tc.index, got, tc.want)
		}
	}
	for i := uint64(0); i < changeRingSize; i++ {
		changed("c/x", 10+i)
	}
	if !r.changedSince("a/", 4) || r.changedSince("a/", 5) {
		t.Error("after the ring dropped the changes at 3 and 5: want cannot-tell below 5 only")
	}
	r.note(fsm.Event{Kind: fsm.EventRestored, Index: 50_000})
	if !r.changedSince("z/", 49_999) || r.changedSince("z/", 50_000) {
		t.Error("after a restore at 50000: want cannot-tell below it only")
	}
}

// BenchmarkChangeRingChangedSince: what a prefix watch woken by a change
// elsewhere costs with the ring full, the watch one change behind.
func BenchmarkChangeRingChangedSince(b *testing.B) {
	var r changeRing
	for i := uint64(1); i <= changeRingSize; i++ {
		r.note(fsm.Event{Kind: fsm.EventLockChanged, Lock: fmt.Sprintf("held/%05d", i), Index: i})
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r.changedSince("watched/", changeRingSize-1) {
			b.Fatal("changed")
		}
	}
}

// A watcher whose index is ahead of the leader's applied index (it was
// answered by a leader further along, and a new one has not applied that
// far yet) waits: it is answered nothing older, and never an index below
// its own.
func TestPrefixWatchAheadOfTheLeaderNeverAnswersBelowItsIndex(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	n, _ := c.leader()
	ctx := ctxT(t)
	ahead := n.fsm.AppliedIndex() + 1000
	ch, err := n.WatchLocks(ctx, "", ahead, 50*time.Millisecond)
	if err != nil || ch.Reset || len(ch.Locks) != 0 || ch.Index != ahead {
		t.Fatalf("watch ahead of the leader: %+v, %v; want no change at index %d", ch, err, ahead)
	}
}
