package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"

	"github.com/raftlock/raftlock/cmd/internal/proccluster"
	"github.com/raftlock/raftlock/session"
	"github.com/raftlock/raftlock/transport/client"
)

// TestPartitionedClientLosesLockBeforeRegrant pins the client's promise
// end to end: a lock holder whose traffic to the cluster is black-holed
// (it keeps running, as a partitioned process does) sees Lost() close
// before the cluster grants the lock to a waiting client, with the default
// lock-delay and with none, at several TTLs.
func TestPartitionedClientLosesLockBeforeRegrant(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs raftlockd processes")
	}
	c := proccluster.Start(t, proccluster.BuildDaemon(t), 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel) // the parallel subtests run after this function returns
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ttl   time.Duration
		delay time.Duration // 0: the default; api.NoLockDelay: none
	}{
		{time.Second, 0},
		{3 * time.Second, 0},
		{time.Second, api.NoLockDelay},
		{3 * time.Second, api.NoLockDelay},
	} {
		name := fmt.Sprintf("ttl=%v/lock-delay=default", tc.ttl)
		if tc.delay == api.NoLockDelay {
			name = fmt.Sprintf("ttl=%v/lock-delay=none", tc.ttl)
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			lock := "jeop/" + name
			holes := proccluster.BlackholeAll(t, c.Addrs())
			cut, err := client.NewClient(holes.Addrs())
			if err != nil {
				t.Fatal(err)
			}
			a, err := session.Open(ctx, cut, session.TTL(tc.ttl), session.LockDelay(tc.delay), session.Name("partitioned"))
			if err != nil {
				t.Fatal(err)
			}
			defer closeWithin(a, 5*time.Second)
			defer holes.Heal() // before the Close above, whatever happens
			l, err := a.Lock(ctx, lock)
			if err != nil {
				t.Fatal(err)
			}
			lostAt := make(chan time.Time, 1)
			go func() {
				<-l.Lost()
				lostAt <- time.Now()
			}()

			b, err := session.Open(ctx, c.Client(), session.TTL(10*time.Second), session.Name("waiter"))
			if err != nil {
				t.Fatal(err)
			}
			defer closeWithin(b, 5*time.Second)
			granted := make(chan time.Time, 1)
			errc := make(chan error, 1)
			go func() {
				if _, err := b.Lock(ctx, lock); err != nil {
					errc <- err
					return
				}
				granted <- time.Now()
			}()
			proccluster.Eventually(t, 10*time.Second, "the waiter to queue", func() error {
				st, err := c.Client().LockState(ctx, lock)
				if err != nil {
					return err
				}
				if st.Waiters != 1 {
					return fmt.Errorf("%d waiters", st.Waiters)
				}
				return nil
			})

			start := time.Now()
			holes.Cut()
			var grantT time.Time
			select {
			case grantT = <-granted:
			case err := <-errc:
				t.Fatalf("waiter: %v", err)
			case <-ctx.Done():
				t.Fatal("the waiter was never granted the lock")
			}
			select {
			case lost := <-lostAt:
				if !lost.Before(grantT) {
					t.Fatalf("Lost() closed %v after the partition, %v after another client was granted the lock (at %v)",
						lost.Sub(start), lost.Sub(grantT), grantT.Sub(start))
				}
				t.Logf("partition at 0; Lost() at %v; re-granted at %v; state %v", lost.Sub(start).Round(time.Millisecond),
					grantT.Sub(start).Round(time.Millisecond), a.State())
			default:
				t.Fatalf("another client was granted the lock %v after the partition while Lost() was still open (session %v)",
					grantT.Sub(start), a.State())
			}
		})
	}
}

// closeWithin closes s, giving up after d.
func closeWithin(s *session.Session, d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_ = s.Close(ctx)
}
