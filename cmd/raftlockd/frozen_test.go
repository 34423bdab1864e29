package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/raftlock/raftlock/cmd/internal/proccluster"
	"github.com/raftlock/raftlock/session"
	"github.com/raftlock/raftlock/transport"
)

// TestFrozenNodeCostsNoSessionOrLock pins the gray-failure rules: a node
// frozen for 3 × (ttl + grace) — the leader, then a follower — while a
// majority stays up costs a client that was talking to it neither its
// session nor its lock, a Lock blocked through it returns its grant, and a
// Watch through it reports the change, all before the node thaws. Every
// client's first address is the frozen node.
func TestFrozenNodeCostsNoSessionOrLock(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs raftlockd processes")
	}
	const (
		ttl    = 2 * time.Second
		grace  = 5 * time.Second
		freeze = 3 * (ttl + grace)
	)
	c := proccluster.Start(t, proccluster.BuildDaemon(t), 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	for _, role := range []string{"leader", "follower"} {
		t.Run(role, func(t *testing.T) {
			li, err := c.Leader(ctx)
			if err != nil {
				t.Fatal(err)
			}
			x := li
			if role == "follower" {
				x = (li + 1) % 3
			}
			addrs := []string{c.Nodes[x].HTTPAddr}
			for i, n := range c.Nodes {
				if i != x {
					addrs = append(addrs, n.HTTPAddr)
				}
			}
			cl, err := transport.NewClient(addrs)
			if err != nil {
				t.Fatal(err)
			}
			var states []session.State
			events := make(chan session.Event, 64)
			s, err := session.Open(ctx, cl, session.TTL(ttl), session.GracePeriod(grace),
				session.OnEvent(func(e session.Event) { events <- e }))
			if err != nil {
				t.Fatal(err)
			}
			defer closeWithin(s, 5*time.Second)
			lock := "frozen/" + role
			l, err := s.Lock(ctx, lock)
			if err != nil {
				t.Fatal(err)
			}

			// B waits for the lock, and a watch follows it, both through
			// the node about to freeze.
			b, err := session.Open(ctx, cl, session.TTL(ttl), session.GracePeriod(grace))
			if err != nil {
				t.Fatal(err)
			}
			defer closeWithin(b, 5*time.Second)
			granted := make(chan *session.Lock, 1)
			go func() {
				if lb, err := b.Lock(ctx, lock); err == nil {
					granted <- lb
				}
			}()
			proccluster.Eventually(t, 10*time.Second, "B to queue", func() error {
				st, err := c.Client().Lock(ctx, lock)
				if err != nil || st.Waiters != 1 {
					return fmt.Errorf("%+v, %v", st, err)
				}
				return nil
			})
			wctx, wcancel := context.WithCancel(ctx)
			defer wcancel()
			watch, err := session.Watch(wctx, cl, lock)
			if err != nil {
				t.Fatal(err)
			}
			if st := <-watch; len(st.Holders) != 1 || st.Holders[0].Holder != l.Holder() {
				t.Fatalf("watch began with %+v, want A holding", st)
			}

			c.Freeze(x)
			thawed := false
			defer func() {
				if !thawed {
					c.Thaw(x)
				}
			}()
			end := time.After(freeze) // the fault's length, not a synchronisation
			half := time.After(freeze / 2)
			var lb *session.Lock
			var unlockedAt, grantedAt, watchedAt time.Time
			watched := false
			lost := l.Lost()
		frozen:
			for {
				select {
				case e := <-events:
					states = append(states, e.State)
					if e.State == session.Expired {
						t.Fatalf("session expired during the freeze of the %s it talked to: %v", role, e.Err)
					}
				case <-lost:
					t.Fatalf("lock lost during the freeze of the %s (session %v, events %v)", role, s.State(), states)
				case <-half:
					lost = nil // A gives it up now
					// Halfway through, A checks its lock is still held,
					// then hands it to B.
					chk, err := c.Client().Lock(ctx, lock)
					if err != nil || len(chk.Holders) != 1 || chk.Holders[0].Holder != l.Holder() {
						t.Fatalf("halfway through the freeze: %+v, %v; want A holding", chk, err)
					}
					uctx, ucancel := context.WithTimeout(ctx, 3*time.Second)
					err = l.Unlock(uctx)
					ucancel()
					if err != nil {
						t.Fatalf("unlock during the freeze: %v", err)
					}
					unlockedAt = time.Now()
				case lb = <-granted:
					grantedAt = time.Now()
				case st := <-watch:
					if len(st.Holders) == 1 && lb != nil && st.Holders[0].Holder == lb.Holder() && !watched {
						watched, watchedAt = true, time.Now()
					}
				case <-end:
					break frozen
				}
			}
			if lb == nil {
				t.Fatalf("the Lock blocked through the frozen %s was not granted within the freeze", role)
			}
			if !watched {
				t.Fatalf("the watch through the frozen %s did not report B's grant within the freeze", role)
			}
			c.Thaw(x)
			thawed = true

			if st := s.State(); st != session.Safe {
				t.Fatalf("session %v after a %v freeze of the %s, want safe (events %v)", st, freeze, role, states)
			}
			if st := b.State(); st != session.Safe {
				t.Fatalf("B's session %v after the freeze, want safe", st)
			}
			proccluster.Eventually(t, 10*time.Second, "the lock still held by B", func() error {
				st, err := c.Client().Lock(ctx, lock)
				if err != nil {
					return err
				}
				if len(st.Holders) != 1 || st.Holders[0].Holder != lb.Holder() || st.Holders[0].Token != lb.Token() {
					return fmt.Errorf("holders %+v, want %s token %d", st.Holders, lb.Holder(), lb.Token())
				}
				return nil
			})
			t.Logf("%s frozen %v: session events %v; after A's unlock, B's blocked Lock returned in %v and the watch reported it in %v",
				role, freeze, states, grantedAt.Sub(unlockedAt).Round(time.Millisecond), watchedAt.Sub(unlockedAt).Round(time.Millisecond))
		})
	}
}
