package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/raftlock/raftlock/cmd/internal/proccluster"
	"github.com/raftlock/raftlock/session"
	"github.com/raftlock/raftlock/transport/client"
)

// TestAbandonedPlaceIsReleasedAfterAQuorumLossLongerThanTheTTL pins the
// rule that a queue place its waiter gave up on is given back however long
// the cluster cannot answer (issue 26, item 5): a waiter (ttl 20 s) gives
// up while both followers of a 3-node cluster are frozen and the leader
// has stepped down; they thaw 25 s later, longer than one TTL. The holder
// then unlocks, and the lock must go to the next waiter, not to the
// abandoned place (held by nobody for as long as its session lives).
// Every session survives: the new leader restarts their leases, and their
// client-side grace is longer than the outage.
func TestAbandonedPlaceIsReleasedAfterAQuorumLossLongerThanTheTTL(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs raftlockd processes")
	}
	const (
		ttl    = 20 * time.Second
		outage = ttl + 5*time.Second
		lock   = "abandoned/place"
	)
	c := proccluster.Start(t, proccluster.BuildDaemon(t), 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	li, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	open := func(name string) *session.Session {
		s, err := session.Open(ctx, c.Client(), session.TTL(ttl), session.GracePeriod(time.Minute), session.Name(name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closeWithin(s, 5*time.Second) })
		return s
	}
	a, b, next := open("holder"), open("gives-up"), open("next")
	held, err := a.Lock(ctx, lock)
	if err != nil {
		t.Fatal(err)
	}
	reads := c.Client()
	waiters := func(n int) func() error {
		return func() error {
			st, err := reads.LockState(ctx, lock)
			if err != nil {
				return err
			}
			if st.Waiters != n {
				return fmt.Errorf("%d waiters, want %d", st.Waiters, n)
			}
			return nil
		}
	}
	bctx, bcancel := context.WithCancel(ctx)
	defer bcancel()
	berr := make(chan error, 1)
	go func() {
		_, err := b.Lock(bctx, lock)
		berr <- err
	}()
	proccluster.Eventually(t, 10*time.Second, "the waiter that gives up to queue", waiters(1))
	type result struct {
		l   *session.Lock
		err error
	}
	granted := make(chan result, 1)
	go func() {
		l, err := next.Lock(ctx, lock)
		granted <- result{l, err}
	}()
	proccluster.Eventually(t, 10*time.Second, "the next waiter to queue", waiters(2))

	// Quorum lost: both followers freeze. The leader, alone, steps down
	// once its lease runs out; only then does the waiter give up, so that
	// no release attempt reaches any log (a lone leader would keep the
	// entry and commit it once its peers are back). After the outage a
	// new election restarts every lease with the failover grace (the
	// sessions survive an outage longer than their TTL only so).
	var frozen []int
	for i := range c.Nodes {
		if i != li {
			c.Freeze(i)
			frozen = append(frozen, i)
		}
	}
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			for _, i := range frozen {
				c.Thaw(i)
			}
		}
	}
	defer thaw()
	alone, err := client.NewClient([]string{c.Nodes[li].HTTPAddr}, client.WithRequestTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	proccluster.Eventually(t, 10*time.Second, "the lone leader to step down", func() error {
		h, err := alone.Health(ctx)
		if err != nil {
			return err
		}
		if h.IsLeader {
			return fmt.Errorf("%s still leads (term %d)", c.Nodes[li].ID, h.Term)
		}
		return nil
	})
	bcancel()
	if err := <-berr; err != context.Canceled {
		t.Fatalf("the abandoned Lock returned %v, want context.Canceled", err)
	}
	time.Sleep(outage) // the fault's length, not a synchronisation
	thaw()
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-granted:
		if r.err != nil {
			t.Fatalf("the next waiter: %v", r.err)
		}
		st, err := reads.LockState(ctx, lock)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Holders) != 1 || st.Holders[0].Holder != r.l.Holder() {
			t.Fatalf("holders %+v, want the next waiter's %s", st.Holders, r.l.Holder())
		}
	case <-time.After(time.Minute):
		st, _ := reads.LockState(ctx, lock)
		t.Fatalf("the next waiter was not granted the lock within a minute of the holder's unlock: holders %+v, %d waiters (the abandoned place was never given back)",
			st.Holders, st.Waiters)
	}
	for _, s := range []*session.Session{a, b, next} {
		proccluster.Eventually(t, 10*time.Second, "session "+s.Name()+" to be safe after the outage", func() error {
			if st := s.State(); st != session.Safe {
				return fmt.Errorf("%v", st)
			}
			return nil
		})
	}
}
