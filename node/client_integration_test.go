package node

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"

	"github.com/raftlock/raftlock/session"
)

// openSession opens a client session through b, failing the test on an
// error, and closes it when the test ends.
func openSession(t *testing.T, ctx context.Context, b api.Backend, opts ...session.Option) *session.Session {
	t.Helper()
	s, err := session.Open(ctx, b, opts...)
	if err != nil {
		t.Fatalf("open session: %v", err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// The client Session over HTTP: contention hands the lock over promptly,
// every grant's token is larger, and the holder survives a leader failover.
func TestClientSessionsOverHTTP(t *testing.T) {
	c := newHTTPCluster(t)
	c.leader()
	client := c.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s1 := openSession(t, ctx, client, session.TTL(2*time.Second), session.Name("one"))
	s2 := openSession(t, ctx, client, session.TTL(2*time.Second), session.Name("two"))

	l1, err := s1.Lock(ctx, "jobs/compactor")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.TryLock(ctx, "jobs/compactor"); !errors.Is(err, api.ErrLockBusy) {
		t.Fatalf("TryLock on a held lock: %v, want lock_busy", err)
	}
	got := make(chan *session.Lock, 1)
	go func() {
		l, err := s2.Lock(ctx, "jobs/compactor")
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	eventually(t, 10*time.Second, "s2 queued", func() error {
		st, err := client.LockState(ctx, "jobs/compactor")
		if err != nil || st.Waiters != 1 {
			return fmt.Errorf("waiters %d %v", st.Waiters, err)
		}
		return nil
	})
	released := time.Now()
	if err := l1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	<-l1.Lost()
	l2 := <-got
	t.Logf("handoff: unlock to grant of the waiter %v", time.Since(released))
	if l2 == nil || l2.Token() <= l1.Token() {
		t.Fatalf("second grant %v, want token > %d", l2, l1.Token())
	}

	// Kill the leader (and its HTTP server): the session and lock survive.
	_, li := c.leader()
	c.stop(li)
	c.leader()
	deadline := time.Now().Add(2*time.Second + DefaultFailoverGrace + time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-l2.Lost():
			t.Fatalf("lock lost across failover (session state %v)", s2.State())
		case <-time.After(100 * time.Millisecond): // observing over time: no event to await
		}
	}
	st, err := client.LockState(ctx, "jobs/compactor")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Holders) != 1 || st.Holders[0].Token != l2.Token() || st.Holders[0].SessionHandle != s2.Handle() {
		t.Fatalf("after failover: %+v, want held by %s with token %d", st, s2.ID(), l2.Token())
	}
	if !s2.Safe() {
		t.Fatalf("session state %v after failover, want safe", s2.State())
	}
}
