package apitest_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/api/apitest"
	"github.com/raftlock/raftlock/sequencer"
)

// clock is a test's clock: it moves when told.
type clock struct{ ns atomic.Int64 }

func (c *clock) Now() time.Time { return time.Unix(0, c.ns.Load()) }

func (c *clock) add(d time.Duration) { c.ns.Add(int64(d)) }

func newClocked(opts ...apitest.Option) (*apitest.Backend, *clock) {
	c := &clock{}
	c.ns.Store(time.Unix(1_000_000, 0).UnixNano())
	return apitest.New(append(opts, apitest.WithClock(c.Now))...), c
}

func open(t *testing.T, b *apitest.Backend, req api.OpenRequest) string {
	t.Helper()
	info, err := b.OpenSession(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return info.ID
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 5s: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func acq(name, sess, holder string, m sequencer.Mode) api.AcquireRequest {
	return api.AcquireRequest{Name: name, Session: sess, Holder: holder, Mode: m}
}

// The answers of tries and releases, one step after another on one fake.
func TestLocks(t *testing.T) {
	ctx := context.Background()
	b := apitest.New()
	s1, s2 := open(t, b, api.OpenRequest{}), open(t, b, api.OpenRequest{})
	if s1 != "s1" || s2 != "s2" {
		t.Fatalf("session ids %q %q, want s1 s2", s1, s2)
	}
	rel := func(name, sess, holder string) func() error {
		return func() error { return b.Release(ctx, api.ReleaseRequest{Name: name, Session: sess, Holder: holder}) }
	}
	get := func(req api.AcquireRequest) func() error {
		return func() error { _, err := b.Acquire(ctx, req); return err }
	}
	big := acq("v", s1, "a", 0)
	big.Value = strings.Repeat("v", api.MaxValueBytes+1)
	long := acq("v", s1, "a", 0)
	long.Wait = api.MaxWait + 1
	for _, st := range []struct {
		what string
		do   func() error
		want api.Code
	}{
		{"take x", get(acq("x", s1, "a", 0)), ""},
		{"retry x", get(acq("x", s1, "a", sequencer.Exclusive)), ""},
		{"x is busy", get(acq("x", s2, "b", 0)), api.CodeLockBusy},
		{"x by its holder in the other mode", get(acq("x", s1, "a", sequencer.Shared)), api.CodeInvalidArgument},
		{"x released by another", rel("x", s2, "b"), api.CodeNotHolder},
		{"a free lock released", rel("y", s2, "b"), ""},
		{"release by an unknown session", rel("x", "s9", "a"), api.CodeSessionNotFound},
		{"acquire by an unknown session", get(acq("y", "s9", "a", 0)), api.CodeSessionNotFound},
		{"no name", get(acq("", s1, "a", 0)), api.CodeInvalidArgument},
		{"no holder", get(acq("y", s1, "", 0)), api.CodeInvalidArgument},
		{"value too large", get(big), api.CodeTooLarge},
		{"wait too long", get(long), api.CodeInvalidArgument},
		{"r shared", get(acq("r", s1, "a", sequencer.Shared)), ""},
		{"r shared again", get(acq("r", s2, "b", sequencer.Shared)), ""},
		{"r exclusive", get(acq("r", s2, "c", sequencer.Exclusive)), api.CodeLockBusy},
		{"x released", rel("x", s1, "a"), ""},
		{"x released again", rel("x", s1, "a"), ""},
		{"x free", get(acq("x", s2, "b", 0)), ""},
	} {
		if err := st.do(); api.CodeOf(err) != st.want {
			t.Fatalf("%s: %v, want code %q", st.what, err, st.want)
		}
	}
	info, err := b.SessionInfo(ctx, s2)
	if err != nil || strings.Join(info.Locks, ",") != "r,x" {
		t.Fatalf("session info: %+v %v", info, err)
	}
	ls, err := b.Locks(ctx, "")
	if err != nil || len(ls) != 2 || ls[0].Name != "r" || len(ls[0].Holders) != 2 || ls[0].Mode != sequencer.Shared {
		t.Fatalf("locks: %+v %v", ls, err)
	}
}

// Tokens are the index of the granting change and only grow; a retry gets
// the same grant; CheckSequencer knows the current one.
func TestTokensAndSequencers(t *testing.T) {
	ctx := context.Background()
	b := apitest.New()
	s := open(t, b, api.OpenRequest{})
	g1, err := b.Acquire(ctx, acq("x", s, "a", 0))
	if err != nil || g1.Token != 2 || g1.Term != 1 || g1.Sequencer.String() != "rl1:x:2:x" {
		t.Fatalf("first grant: %+v %v", g1, err)
	}
	if again, err := b.Acquire(ctx, acq("x", s, "a", 0)); err != nil || again != g1 {
		t.Fatalf("retry: %+v %v, want %+v", again, err, g1)
	}
	if err := b.Release(ctx, api.ReleaseRequest{Name: "x", Session: s, Holder: "a"}); err != nil {
		t.Fatal(err)
	}
	b.SetTerm(4)
	g2, err := b.Acquire(ctx, acq("x", s, "b", 0))
	if err != nil || g2.Token != 4 || g2.Term != 4 || b.Index() != 4 {
		t.Fatalf("second grant: %+v %v at index %d", g2, err, b.Index())
	}
	if n := b.Grants(); n != 2 {
		t.Fatalf("%d grants counted, want 2 (a retry makes none)", n)
	}
	for _, tc := range []struct {
		seq   string
		valid bool
		code  api.Code
	}{
		{g2.Sequencer.String(), true, ""},
		{g1.Sequencer.String(), false, ""},
		{"rl1:s:4:x", false, ""},
		{"rl1:x:4:free", false, ""},
		{"garbage", false, api.CodeInvalidArgument},
	} {
		c, err := b.CheckSequencer(ctx, tc.seq)
		if api.CodeOf(err) != tc.code || c.Valid != tc.valid {
			t.Errorf("check %s: %+v %v, want valid %v code %q", tc.seq, c, err, tc.valid, tc.code)
		}
	}
}

// How a wait ends: granted in turn, run out, cancelled by its holder, its
// session closed, or its caller gone (the place is kept).
func TestWaits(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(b *apitest.Backend, c *clock, cancel func(), holder, waiter string) error
		want error
		kept bool
	}{
		{"granted", func(b *apitest.Backend, _ *clock, _ func(), holder, _ string) error {
			return b.Release(context.Background(), api.ReleaseRequest{Name: "x", Session: holder, Holder: "a"})
		}, nil, false},
		{"timed out", func(b *apitest.Backend, c *clock, _ func(), _, _ string) error {
			c.add(time.Minute)
			b.Sweep()
			return nil
		}, api.ErrWaitTimeout, false},
		{"cancelled", func(b *apitest.Backend, _ *clock, _ func(), _, waiter string) error {
			return b.Release(context.Background(), api.ReleaseRequest{Name: "x", Session: waiter, Holder: "w"})
		}, api.ErrWaitCancelled, false},
		{"session closed", func(b *apitest.Backend, _ *clock, _ func(), _, waiter string) error {
			return b.CloseSession(context.Background(), waiter)
		}, api.ErrSessionNotFound, false},
		{"caller gone", func(_ *apitest.Backend, _ *clock, cancel func(), _, _ string) error {
			cancel()
			return nil
		}, context.Canceled, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, c := newClocked(apitest.WithoutExpiry())
			holder, waiter := open(t, b, api.OpenRequest{}), open(t, b, api.OpenRequest{})
			g1, err := b.Acquire(context.Background(), acq("x", holder, "a", 0))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type answer struct {
				g   api.Grant
				err error
			}
			done := make(chan answer, 1)
			go func() {
				req := acq("x", waiter, "w", 0)
				req.Wait = time.Minute
				g, err := b.Acquire(ctx, req)
				done <- answer{g, err}
			}()
			eventually(t, "the waiter waiting", func() bool { return b.Waiting("Acquire") == 1 && b.Waiting("*") == 1 })
			if n := b.Peek("x").Waiters; n != 1 {
				t.Fatalf("%d queued, want 1", n)
			}
			if err := tc.end(b, c, cancel, holder, waiter); err != nil {
				t.Fatal(err)
			}
			a := <-done
			if !errors.Is(a.err, tc.want) || (tc.want == nil && a.g.Token <= g1.Token) {
				t.Fatalf("wait: %+v %v, want %v", a.g, a.err, tc.want)
			}
			if kept := b.Peek("x").Waiters == 1; kept != tc.kept {
				t.Fatalf("place kept: %v, want %v", kept, tc.kept)
			}
			if n := b.Waiting("Acquire"); n != 0 {
				t.Fatalf("%d acquires still waiting once answered", n)
			}
			grants := 1 // the holder's
			if tc.want == nil {
				grants++ // and the waiter's
			}
			if n := b.Grants(); n != grants {
				t.Fatalf("%d grants counted, want %d", n, grants)
			}
			if n := b.Answered("Acquire", context.Canceled); (n == 1) != tc.kept {
				t.Fatalf("%d acquires answered Canceled", n)
			}
		})
	}
}

// The queue is FIFO and grants a run of shared waiters in one change; a
// queued holder's try finds the lock busy.
func TestQueueOrder(t *testing.T) {
	ctx := context.Background()
	b := apitest.New()
	s := open(t, b, api.OpenRequest{})
	if _, err := b.Acquire(ctx, acq("q", s, "x", 0)); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		holder string
		g      api.Grant
		err    error
	}
	done := make(chan answer, 3)
	for i, w := range []struct {
		holder string
		mode   sequencer.Mode
	}{{"r1", sequencer.Shared}, {"r2", sequencer.Shared}, {"w", sequencer.Exclusive}} {
		go func() {
			req := acq("q", s, w.holder, w.mode)
			req.Wait = time.Minute
			g, err := b.Acquire(ctx, req)
			done <- answer{w.holder, g, err}
		}()
		eventually(t, "queued "+w.holder, func() bool { return b.Peek("q").Waiters == i+1 })
	}
	st := b.Peek("q")
	if len(st.Queue) != 3 || st.Queue[0] != (api.QueuedHolder{Holder: "r1", Mode: sequencer.Shared}) || st.Queue[2].Holder != "w" {
		t.Fatalf("queue %+v", st.Queue)
	}
	if _, err := b.Acquire(ctx, acq("q", s, "r1", sequencer.Shared)); !errors.Is(err, api.ErrLockBusy) {
		t.Fatalf("try by a queued holder: %v", err)
	}
	if err := b.Release(ctx, api.ReleaseRequest{Name: "q", Session: s, Holder: "x"}); err != nil {
		t.Fatal(err)
	}
	a1, a2 := <-done, <-done
	if a1.err != nil || a2.err != nil || a1.g.Token != a2.g.Token || a1.holder == "w" || a2.holder == "w" {
		t.Fatalf("shared run: %+v %+v", a1, a2)
	}
	if st := b.Peek("q"); len(st.Holders) != 2 || st.Waiters != 1 || b.Grants() != 3 {
		t.Fatalf("after the shared run: %+v, %d grants", st, b.Grants())
	}
}

// An expired session's locks stay in its lock-delay, then go to the queue.
func TestExpiryAndLockDelay(t *testing.T) {
	ctx := context.Background()
	b, c := newClocked()
	s1 := open(t, b, api.OpenRequest{TTL: 10 * time.Second, LockDelay: 5 * time.Second})
	s2 := open(t, b, api.OpenRequest{TTL: time.Minute})
	if _, err := b.Acquire(ctx, acq("x", s1, "a", 0)); err != nil {
		t.Fatal(err)
	}
	c.add(9 * time.Second)
	if ttl, err := b.KeepAlive(ctx, s1); err != nil || ttl.TTL != 10*time.Second {
		t.Fatalf("keepalive: %v %v", ttl, err)
	}
	done := make(chan error, 1)
	go func() {
		req := acq("x", s2, "b", 0)
		req.Wait = time.Minute
		_, err := b.Acquire(ctx, req)
		done <- err
	}()
	eventually(t, "queued", func() bool { return b.Peek("x").Waiters == 1 })
	c.add(10 * time.Second)
	if _, err := b.KeepAlive(ctx, s1); !errors.Is(err, api.ErrSessionNotFound) {
		t.Fatalf("keepalive of an expired session: %v", err)
	}
	st := b.Peek("x")
	if len(st.Holders) != 0 || st.Waiters != 1 || !st.DelayUntil.Equal(c.Now().Add(5*time.Second)) {
		t.Fatalf("delayed lock: %+v", st)
	}
	if _, err := b.Acquire(ctx, acq("x", s2, "c", 0)); !errors.Is(err, api.ErrLockBusy) {
		t.Fatalf("try on a delayed lock: %v", err)
	}
	c.add(5 * time.Second)
	b.Sweep()
	if err := <-done; err != nil {
		t.Fatalf("waiter after the delay: %v", err)
	}
}

// WatchLock answers at once for index 0, on a change past the index, or
// when its wait has passed.
func TestWatchLock(t *testing.T) {
	ctx := context.Background()
	b, c := newClocked(apitest.WithoutExpiry())
	s := open(t, b, api.OpenRequest{})
	st, err := b.WatchLock(ctx, "w", 0, 0)
	if err != nil || st.Index != 1 {
		t.Fatalf("index 0: %+v %v", st, err)
	}
	if _, err := b.WatchLock(ctx, "w", 1, api.MaxWatchWait+1); !errors.Is(err, api.ErrInvalidArgument) {
		t.Fatalf("wait too long: %v", err)
	}
	got := make(chan api.LockState, 2)
	watch := func(index uint64) {
		st, err := b.WatchLock(ctx, "w", index, time.Minute)
		if err != nil {
			t.Error(err)
		}
		got <- st
	}
	go watch(st.Index)
	eventually(t, "watching", func() bool { return len(b.Log("WatchLock")) == 3 })
	eventually(t, "the watch waiting", func() bool { return b.Waiting("WatchLock") == 1 })
	if _, err := b.Acquire(ctx, acq("w", s, "a", 0)); err != nil {
		t.Fatal(err)
	}
	if st := <-got; len(st.Holders) != 1 || st.Index != 2 {
		t.Fatalf("after a grant: %+v", st)
	}
	// The watch's wait passes on the clock: it is moved (again, should the
	// watch have begun after the last move) until the watch answers.
	go watch(2)
	var last api.LockState
	eventually(t, "the watch's wait passed", func() bool {
		c.add(time.Minute)
		b.Sweep()
		select {
		case last = <-got:
			return true
		case <-time.After(time.Millisecond):
			return false
		}
	})
	if last.Index != 2 || len(last.Holders) != 1 {
		t.Fatalf("after the wait: %+v", last)
	}
}

// Faults answer calls, with or without applying them; the hook sees and
// blocks calls; the log counts them.
func TestFaultsAndHook(t *testing.T) {
	ctx := context.Background()
	b := apitest.New()
	s := open(t, b, api.OpenRequest{})
	lost := errors.New("lost")
	b.Fail("*", api.ErrNoLeader)
	b.Fail("Acquire", api.ErrUnknownOutcome)
	b.FailApplied("Acquire", lost)
	before := b.Dump()
	for _, tc := range []struct {
		what    string
		want    error
		changed bool
	}{
		{"own fault first", api.ErrUnknownOutcome, false},
		{"applied fault", lost, true},
		{"then those of *", api.ErrNoLeader, false},
		{"then none", nil, false},
	} {
		_, err := b.Acquire(ctx, acq("x", s, "a", 0))
		after := b.Dump()
		if !errors.Is(err, tc.want) || (after != before) != tc.changed {
			t.Fatalf("%s: %v, state changed %v; want %v, %v", tc.what, err, after != before, tc.want, tc.changed)
		}
		before = after
	}
	if n := b.Calls("Acquire"); n != 4 || b.Calls("*") != 5 {
		t.Fatalf("calls: %d acquires, %d in all", n, b.Calls("*"))
	}
	gate := make(chan struct{})
	b.SetHook(func(ctx context.Context, c apitest.Call) error {
		switch c.Method {
		case "KeepAlive":
			<-gate
		case "SessionInfo":
			return api.ErrNoLeader
		}
		return nil
	})
	done := make(chan error, 1)
	go func() { _, err := b.KeepAlive(ctx, s); done <- err }()
	eventually(t, "keepalive at the gate", func() bool { return len(b.Log("KeepAlive")) == 1 })
	select {
	case err := <-done:
		t.Fatalf("keepalive passed the gate: %v", err)
	case <-time.After(10 * time.Millisecond):
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := b.SessionInfo(ctx, s); !errors.Is(err, api.ErrNoLeader) || b.Answered("*", api.ErrNoLeader) != 2 {
		t.Fatalf("hook's answer: %v; log %+v", err, b.Log("*"))
	}
	if l := b.Log("KeepAlive"); len(l) != 1 || l[0].Arg != s || !l[0].Done || l[0].Err != nil {
		t.Fatalf("log: %+v", l)
	}
}

// The fake's rules are the state machine's: a release repeated after its
// first attempt took effect is done (the first freed the lock, which then
// went to someone else), as a cluster answers it, not not_holder; a try
// that finds the lock busy and a retried wait change nothing but the
// wait's deadline, so the index stays.
func TestRulesAreTheStateMachines(t *testing.T) {
	ctx := context.Background()
	b := apitest.New()
	s1, s2 := open(t, b, api.OpenRequest{}), open(t, b, api.OpenRequest{})
	if _, err := b.Acquire(ctx, acq("x", s1, "a", 0)); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(ctx, api.ReleaseRequest{Name: "x", Session: s1, Holder: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(ctx, acq("x", s2, "b", 0)); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(ctx, api.ReleaseRequest{Name: "x", Session: s1, Holder: "a"}); err != nil {
		t.Fatalf("repeated release after the lock moved on: %v, want done", err)
	}
	if err := b.Release(ctx, api.ReleaseRequest{Name: "x", Session: s1, Holder: "other"}); api.CodeOf(err) != api.CodeNotHolder {
		t.Fatalf("release by a holder that never held it: %v, want not_holder", err)
	}
	waitCtx, cancel := context.WithCancel(ctx)
	cancel() // the place is kept; the call does not wait
	wait := acq("x", s1, "c", 0)
	wait.Wait = time.Minute
	if _, err := b.Acquire(waitCtx, wait); !errors.Is(err, context.Canceled) {
		t.Fatalf("queued acquire with a done ctx: %v", err)
	}
	before := b.Dump()
	if _, err := b.Acquire(ctx, acq("x", s1, "c", 0)); api.CodeOf(err) != api.CodeLockBusy {
		t.Fatalf("try by a queued holder: %v, want lock_busy", err)
	}
	if _, err := b.Acquire(waitCtx, wait); !errors.Is(err, context.Canceled) {
		t.Fatalf("retried wait with a done ctx: %v", err)
	}
	if after := b.Dump(); after != before {
		t.Fatalf("a busy try and a retried wait changed the state:\n%s\n%s", before, after)
	}
	if st := b.Peek("x"); st.Waiters != 1 || len(st.Queue) != 1 || st.Queue[0].Holder != "c" {
		t.Fatalf("queue: %+v", st)
	}
}
