package node

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"

	"github.com/raftlock/raftlock/api/apitest"
	"github.com/raftlock/raftlock/sequencer"
	"github.com/raftlock/raftlock/session"
)

// countingBackend counts the Acquire calls made through it.
type countingBackend struct {
	api.Backend
	acquires atomic.Int64
}

func (b *countingBackend) Acquire(ctx context.Context, req api.AcquireRequest) (api.Grant, error) {
	b.acquires.Add(1)
	return b.Backend.Acquire(ctx, req)
}

// Every replica's embedded Backend serves sessions, locks and watches: on
// the leader in-process, on followers by forwarding to the leader.
func TestEmbeddedBackendOnEveryReplica(t *testing.T) {
	c := newHTTPCluster(t)
	_, li := c.leader()
	ctx := ctxT(t)
	var tokens []sequencer.Token
	for i, n := range c.nodes {
		s, err := session.Open(ctx, n.Backend(), session.TTL(5*time.Second))
		if err != nil {
			t.Fatalf("open via n%d (leader: %v): %v", i+1, i == li, err)
		}
		name := fmt.Sprintf("embedded/%d", i)
		l, err := s.TryLock(ctx, name, session.Value(fmt.Sprintf("n%d", i+1)))
		if err != nil {
			t.Fatalf("lock via n%d: %v", i+1, err)
		}
		st, err := n.Backend().LockState(ctx, name)
		if err != nil || len(st.Holders) != 1 || st.Holders[0].Token != l.Token() {
			t.Fatalf("lock state via n%d: %+v, %v", i+1, st, err)
		}
		chk, err := n.Backend().CheckSequencer(ctx, l.Sequencer().String())
		if err != nil || !chk.Valid {
			t.Fatalf("sequencer check via n%d: %+v, %v", i+1, chk, err)
		}
		tokens = append(tokens, l.Token())
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("unlock via n%d: %v", i+1, err)
		}
		if err := s.Close(ctx); err != nil {
			t.Fatalf("close via n%d: %v", i+1, err)
		}
	}
	if !sort.SliceIsSorted(tokens, func(i, j int) bool { return tokens[i] < tokens[j] }) {
		t.Fatalf("tokens %v not increasing", tokens)
	}
	// The node itself (not its Backend) answers only on the leader.
	follower := c.nodes[(li+1)%3]
	if _, err := follower.LockState(ctx, "embedded/0"); !errors.Is(err, api.ErrNoLeader) {
		t.Fatalf("follower's own Lock: %v, want no_leader", err)
	}
}

// Issue 3, test 1: two sessions contend for one lock through the Go client
// (one over HTTP, one embedded on a follower). Holders never overlap, every
// grant has a larger token, and a waiter is woken by the grant itself: one
// Acquire request per Lock call, no polling.
func TestContendedLockNeverOverlaps(t *testing.T) {
	c := newHTTPCluster(t)
	_, li := c.leader()
	ctx := ctxT(t)
	client := c.client(t)
	backends := []*countingBackend{{Backend: client}, {Backend: c.nodes[(li+1)%3].Backend()}}
	const rounds = 25
	var (
		inside   atomic.Int32
		mu       sync.Mutex
		tokens   []sequencer.Token
		handoffs []time.Duration
		unlocked atomic.Int64 // UnixNano of the last Unlock's start
		wg       sync.WaitGroup
	)
	for w, b := range backends {
		s := openSession(t, ctx, b, session.TTL(5*time.Second))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				l, err := s.Lock(ctx, "contended")
				if err != nil {
					t.Errorf("worker %d round %d: %v", w, r, err)
					return
				}
				granted := time.Now()
				if n := inside.Add(1); n != 1 {
					t.Errorf("worker %d: %d holders at once", w, n)
				}
				mu.Lock()
				tokens = append(tokens, l.Token())
				if u := unlocked.Load(); u != 0 {
					handoffs = append(handoffs, granted.Sub(time.Unix(0, u)))
				}
				mu.Unlock()
				time.Sleep(2 * time.Millisecond) // hold the lock for a moment: work, not synchronisation
				inside.Add(-1)
				unlocked.Store(time.Now().UnixNano())
				if err := l.Unlock(ctx); err != nil {
					t.Errorf("worker %d unlock: %v", w, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(tokens) != 2*rounds {
		t.Fatalf("%d grants, want %d", len(tokens), 2*rounds)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("token %d after %d: grants out of order %v", tokens[i], tokens[i-1], tokens)
		}
	}
	for w, b := range backends {
		if n := b.acquires.Load(); n != rounds {
			t.Errorf("worker %d sent %d Acquire requests for %d locks: the wait polls", w, n, rounds)
		}
	}
	sort.Slice(handoffs, func(i, j int) bool { return handoffs[i] < handoffs[j] })
	t.Logf("handoff (unlock to the next grant, %d samples): p50 %v, max %v", len(handoffs), handoffs[len(handoffs)/2], handoffs[len(handoffs)-1])
}

// Issue 3, test 5: the leader fails while a Lock call is blocked in the
// queue. The caller still gets the lock, exactly once, when the holder
// unlocks.
func TestBlockedLockSurvivesFailover(t *testing.T) {
	for _, via := range []string{"http", "embedded"} {
		t.Run(via, func(t *testing.T) {
			c := newHTTPCluster(t)
			_, li := c.leader()
			ctx := ctxT(t)
			client := c.client(t)
			var waiterBackend api.Backend = client
			if via == "embedded" {
				// A replica that survives: the one after the leader.
				waiterBackend = c.nodes[(li+1)%3].Backend()
			}
			holder := openSession(t, ctx, client, session.TTL(3*time.Second))
			waiter := openSession(t, ctx, waiterBackend, session.TTL(3*time.Second))
			l1, err := holder.Lock(ctx, "jobs/failover")
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan *session.Lock, 2)
			go func() {
				l, err := waiter.Lock(ctx, "jobs/failover")
				if err != nil {
					t.Error(err)
				}
				got <- l
			}()
			eventually(t, 10*time.Second, "waiter queued", func() error {
				st, err := client.LockState(ctx, "jobs/failover")
				if err != nil || st.Waiters != 1 {
					return fmt.Errorf("waiters %d, %v", st.Waiters, err)
				}
				return nil
			})
			c.stop(li)
			c.leader()
			// The queue survived: still one waiter, and it is not granted.
			eventually(t, 10*time.Second, "queue after failover", func() error {
				st, err := client.LockState(ctx, "jobs/failover")
				if err != nil || st.Waiters != 1 || len(st.Holders) != 1 || st.Holders[0].Token != l1.Token() {
					return fmt.Errorf("state %+v, %v", st, err)
				}
				return nil
			})
			select {
			case l := <-got:
				t.Fatalf("waiter granted %v while the lock is held", l)
			default:
			}
			if err := l1.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			l2 := <-got
			if l2 == nil || l2.Token() <= l1.Token() {
				t.Fatalf("waiter got %v, want a token above %d", l2, l1.Token())
			}
			st, err := client.LockState(ctx, "jobs/failover")
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Holders) != 1 || st.Holders[0].SessionHandle != waiter.Handle() || st.Holders[0].Holder != l2.Holder() || st.Waiters != 0 {
				t.Fatalf("after handoff %+v, want exactly one grant to the waiter's holder %s", st, l2.Holder())
			}
			info, err := client.SessionInfo(ctx, waiter.ID())
			if err != nil || len(info.Locks) != 1 {
				t.Fatalf("waiter session %+v, %v: want exactly one lock", info, err)
			}
			if err := l2.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if st, err := client.LockState(ctx, "jobs/failover"); err != nil || len(st.Holders) != 0 {
				t.Fatalf("after the waiter's unlock: %+v, %v; want free (no second grant)", st, err)
			}
		})
	}
}

// A blocking read returns as soon as the lock changes past the given
// index, returns the unchanged state when its wait runs out, and
// session.Watch follows the lock across a leader failover.
func TestWatchLock(t *testing.T) {
	c := newHTTPCluster(t)
	c.leader()
	ctx := ctxT(t)
	client := c.client(t)
	s := openSession(t, ctx, client, session.TTL(3*time.Second))
	free, err := client.LockState(ctx, "watched")
	if err != nil {
		t.Fatal(err)
	}
	if free.Index == 0 {
		t.Fatalf("free lock answered with index 0: %+v", free)
	}
	// Nothing changes: the wait runs out and the same state comes back.
	st, err := client.WatchLock(ctx, "watched", free.Index, 200*time.Millisecond)
	if err != nil || len(st.Holders) != 0 || st.Index != free.Index {
		t.Fatalf("timed-out watch: %+v, %v; want the free state at index %d", st, err, free.Index)
	}
	// A change wakes a blocked watch. A free lock reports the leader's
	// applied index, so an unrelated entry (an election's, another
	// session's) may wake the watch with the lock still free: watch again
	// from the new index until the state changes, as session.Watch does.
	woke := make(chan api.LockState, 1)
	go func() {
		idx := free.Index
		for {
			st, err := client.WatchLock(ctx, "watched", idx, time.Minute)
			if err != nil {
				t.Error(err)
			}
			if err != nil || len(st.Holders) > 0 {
				woke <- st
				return
			}
			idx = st.Index
		}
	}()
	l, err := s.TryLock(ctx, "watched", session.Value("v"))
	if err != nil {
		t.Fatal(err)
	}
	st = <-woke
	if len(st.Holders) != 1 || st.Holders[0].Token != l.Token() || st.Index <= free.Index {
		t.Fatalf("woken watch: %+v, want held with token %d at index > %d", st, l.Token(), free.Index)
	}

	// Watch streams the current state, then changes, across a failover.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := session.Watch(wctx, client, "watched")
	if err != nil {
		t.Fatal(err)
	}
	if st := <-ch; len(st.Holders) != 1 || st.Holders[0].Token != l.Token() {
		t.Fatalf("first watched state %+v", st)
	}
	_, li := c.leader()
	c.stop(li)
	c.leader()
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if st := <-ch; len(st.Holders) != 0 {
		t.Fatalf("watched state after unlock across failover: %+v, want free", st)
	}
}

// Cancelling the ctx of a blocked Lock dequeues the waiter on the cluster,
// through the Go client over HTTP and through a follower's embedded
// Backend alike: the queue empties, and the next release leaves the lock
// free instead of granting it to the caller that gave up.
func TestCancelledLockLeavesQueue(t *testing.T) {
	c := newHTTPCluster(t)
	leader, li := c.leader()
	ctx := ctxT(t)
	client := c.client(t)
	backends := map[string]api.Backend{"http": client, "embedded follower": c.nodes[(li+1)%3].Backend()}
	for what, b := range backends {
		name := "cancel/" + what
		holder := openSession(t, ctx, b, session.TTL(5*time.Second))
		waiter := openSession(t, ctx, b, session.TTL(5*time.Second))
		l, err := holder.Lock(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() {
			_, err := waiter.Lock(wctx, name)
			errc <- err
		}()
		waiters := func(want int) func() error {
			return func() error {
				st, err := leader.LockState(ctx, name)
				if err != nil || st.Waiters != want {
					return fmt.Errorf("%s: waiters %d, %v; want %d", what, st.Waiters, err, want)
				}
				return nil
			}
		}
		eventually(t, 5*time.Second, "queued", waiters(1))
		cancel()
		select {
		case err := <-errc:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("%s: cancelled Lock = %v, want context.Canceled", what, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: Lock did not return after cancel", what)
		}
		eventually(t, 5*time.Second, "dequeued", waiters(0))
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		st, err := leader.LockState(ctx, name)
		if err != nil || len(st.Holders) != 0 || st.Waiters != 0 {
			t.Fatalf("%s: after release %+v, %v; want free (the cancelled waiter gets nothing)", what, st, err)
		}
		info, err := leader.SessionInfo(ctx, waiter.ID())
		if err != nil || len(info.Locks) != 0 {
			t.Fatalf("%s: waiter's session %+v, %v; want no locks", what, info, err)
		}
	}
}

// TestEmbeddedBackendNeedsNoHTTPServer pins that embedding is node.New and
// Backend: on a cluster where no node serves HTTP at all, a follower's
// Backend reaches the leader through the leader's peer port.
func TestEmbeddedBackendNeedsNoHTTPServer(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	_, li := c.leader()
	follower := c.snapshotNodes()[(li+1)%3]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b := follower.Backend()
	info, err := b.OpenSession(ctx, api.OpenRequest{Name: "no-http", TTL: 10 * time.Second})
	if err != nil {
		t.Fatalf("open through a follower's Backend with no HTTP server anywhere: %v", err)
	}
	g, err := b.Acquire(ctx, api.AcquireRequest{Name: "no-http/lock", Session: info.ID, Holder: "h"})
	if err != nil || g.Token == 0 {
		t.Fatalf("acquire through a follower's Backend: %+v, %v", g, err)
	}
	st, err := b.LockState(ctx, "no-http/lock")
	if err != nil || len(st.Holders) != 1 || st.Holders[0].Holder != "h" {
		t.Fatalf("read through a follower's Backend: %+v, %v", st, err)
	}
}

// The embedded backend's one retry policy is its remote client's: a call
// the local leader answers no_leader (not serving yet, or no longer
// leading) or unknown_outcome (leadership lost before the commit) goes on
// through the remote client, and any other answer of the local leader is
// the answer.
func TestEmbeddedHandsCallsTheLocalLeaderCannotFinishToTheRemoteClient(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		code       api.Code
		wantRemote bool
	}{
		{api.CodeNoLeader, true},
		{api.CodeUnknownOutcome, true},
		{api.CodeLockBusy, false},
		{api.CodeSessionNotFound, false},
	} {
		local, remote := apitest.New(), apitest.New()
		local.Fail("Acquire", api.Errorf(tc.code, "injected"))
		rs, err := remote.OpenSession(ctx, api.OpenRequest{})
		if err != nil {
			t.Fatal(err)
		}
		req := api.AcquireRequest{Name: "a", Session: rs.ID, Holder: "h"}
		_, err = route(local, remote, func(b api.Backend) (api.Grant, error) { return b.Acquire(ctx, req) })
		if gotRemote := remote.Calls("Acquire") == 1; gotRemote != tc.wantRemote {
			t.Errorf("%s: remote called %v, want %v (err %v)", tc.code, gotRemote, tc.wantRemote, err)
		}
		if tc.wantRemote && err != nil {
			t.Errorf("%s: %v, want the remote's grant", tc.code, err)
		}
		if !tc.wantRemote && api.CodeOf(err) != tc.code {
			t.Errorf("%s: got %v, want the local answer", tc.code, err)
		}
	}
	// A node that does not lead sends every call to the remote client.
	remote := apitest.New()
	if _, err := route(nil, remote, func(b api.Backend) (api.Info, error) { return b.OpenSession(ctx, api.OpenRequest{}) }); err != nil {
		t.Fatal(err)
	}
	if remote.Calls("OpenSession") != 1 {
		t.Fatal("a non-leader's call did not go to the remote client")
	}
}
