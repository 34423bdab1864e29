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

// TestFrozenNodeCostsNoSessionOrLock pins the first gray-failure rule: a
// node frozen for 3 × (ttl + grace) — the leader, then a follower — while
// a majority stays up costs a client that was talking to it neither its
// session nor its lock. The client's first address is the frozen node.
func TestFrozenNodeCostsNoSessionOrLock(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs raftlockd processes")
	}
	const (
		ttl    = 2 * time.Second
		grace  = 3 * time.Second
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

			c.Freeze(x)
			thawed := false
			defer func() {
				if !thawed {
					c.Thaw(x)
				}
			}()
			end := time.After(freeze) // the fault's length, not a synchronisation
		frozen:
			for {
				select {
				case e := <-events:
					states = append(states, e.State)
					if e.State == session.Expired {
						t.Fatalf("session expired during the freeze of the %s it talked to: %v", role, e.Err)
					}
				case <-l.Lost():
					t.Fatalf("lock lost during the freeze of the %s (session %v, events %v)", role, s.State(), states)
				case <-end:
					break frozen
				}
			}
			c.Thaw(x)
			thawed = true

			if st := s.State(); st != session.Safe {
				t.Fatalf("session %v after a %v freeze of the %s, want safe (events %v)", st, freeze, role, states)
			}
			proccluster.Eventually(t, 10*time.Second, "the lock still held by the client", func() error {
				st, err := c.Client().Lock(ctx, lock)
				if err != nil {
					return err
				}
				if len(st.Holders) != 1 || st.Holders[0].Holder != l.Holder() || st.Holders[0].Token != l.Token() {
					return fmt.Errorf("holders %+v, want %s token %d", st.Holders, l.Holder(), l.Token())
				}
				return nil
			})
			t.Logf("%s frozen %v: session events %v", role, freeze, states)
		})
	}
}
