package main

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/raftlock/raftlock/cmd/internal/proccluster"
	"github.com/raftlock/raftlock/session"
	"github.com/raftlock/raftlock/transport/client"
)

// grayFault is a gray failure of one node: while it lasts the node's
// process is still there, with its state and its connections, but its
// clients get nothing back from it.
type grayFault struct {
	// name names the fault in messages ("freeze", "black-hole") and in
	// the test's lock names.
	name string
	// start begins the fault on node i of the cluster; end ends it.
	start, end func(i int)
	// hc is the HTTP client of the test's clients (nil: the default).
	hc *http.Client
}

// TestFrozenNodeCostsNoSessionOrLock pins the gray-failure rules for a
// SIGSTOPped node (a GC or VM pause, a stalled disk): a node frozen for
// 3 × (ttl + grace) — the leader, then a follower — while a majority stays
// up costs a client that was talking to it neither its session nor its
// lock, a Lock blocked through it returns its grant, and a Watch through
// it reports the change, all before the node thaws. Every client's first
// address is the frozen node.
func TestFrozenNodeCostsNoSessionOrLock(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs raftlockd processes")
	}
	c := proccluster.Start(t, proccluster.BuildDaemon(t), 3)
	grayNodeCostsNoSessionOrLock(t, c, grayFault{name: "freeze", start: c.Freeze, end: c.Thaw}, "leader", "follower")
}

// grayNodeCostsNoSessionOrLock runs the gray-failure scenario on c once
// per role ("leader", "follower"): a client whose first address is the
// node in that role holds a lock, a second client of the same transport
// waits for it and a watch follows it; then fault f lasts 3 × (ttl +
// grace). Halfway through, the first client unlocks. Through the fault the
// first session must never expire nor its lock be lost; within it the
// waiting Lock must return the grant and the watch report it; after it
// both sessions must be safe and the second client hold the lock.
func grayNodeCostsNoSessionOrLock(t *testing.T, c *proccluster.Cluster, f grayFault, roles ...string) {
	const (
		ttl   = 2 * time.Second
		grace = 5 * time.Second
		span  = 3 * (ttl + grace)
	)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	for _, role := range roles {
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
			cl, err := client.NewClient(addrs, client.WithHTTPClient(f.hc))
			if err != nil {
				t.Fatal(err)
			}
			// The test's own reads go to the healthy nodes only: they
			// observe the system under test and must not wait on the
			// fault themselves.
			observer, err := client.NewClient(addrs[1:])
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
			lock := f.name + "/" + role
			l, err := s.Lock(ctx, lock)
			if err != nil {
				t.Fatal(err)
			}

			// B waits for the lock, and a watch follows it, both through
			// the node about to fail.
			b, err := session.Open(ctx, cl, session.TTL(ttl), session.GracePeriod(grace))
			if err != nil {
				t.Fatal(err)
			}
			defer closeWithin(b, 5*time.Second)
			granted := make(chan *session.Lock, 1)
			lockErr := make(chan error, 1)
			go func() {
				lb, err := b.Lock(ctx, lock)
				if err != nil {
					lockErr <- err
					return
				}
				granted <- lb
			}()
			proccluster.Eventually(t, 10*time.Second, "B to queue", func() error {
				st, err := c.Client().LockState(ctx, lock)
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

			f.start(x)
			startedAt := time.Now()
			ended := false
			defer func() {
				if !ended {
					f.end(x)
				}
			}()
			end := time.After(span) // the fault's length, not a synchronisation
			half := time.After(span / 2)
			var lb *session.Lock
			var unlockedAt, grantedAt, watchedAt time.Time
			watched := false
			lost := l.Lost()
		failed:
			for {
				select {
				case e := <-events:
					states = append(states, e.State)
					if e.State == session.Expired {
						t.Fatalf("session expired during the %s of the %s it talked to: %v", f.name, role, e.Err)
					}
				case <-lost:
					t.Fatalf("lock lost during the %s of the %s (session %v, events %v)", f.name, role, s.State(), states)
				case <-half:
					lost = nil // A gives it up now
					// Halfway through, A checks its lock is still held,
					// then hands it to B.
					chk, err := observer.LockState(ctx, lock)
					if err != nil || len(chk.Holders) != 1 || chk.Holders[0].Holder != l.Holder() {
						t.Fatalf("halfway through the %s: %+v, %v; want A holding", f.name, chk, err)
					}
					uctx, ucancel := context.WithTimeout(ctx, 3*time.Second)
					err = l.Unlock(uctx)
					ucancel()
					if err != nil {
						t.Fatalf("unlock during the %s: %v", f.name, err)
					}
					unlockedAt = time.Now()
				case lb = <-granted:
					grantedAt = time.Now()
				case err := <-lockErr:
					t.Fatalf("the Lock blocked through the %s's %s failed: %v", f.name, role, err)
				case st := <-watch:
					// B's session, not its Lock's holder id: the watch
					// may see the grant before B's Lock returns it.
					if len(st.Holders) == 1 && st.Holders[0].SessionHandle == b.Handle() && !watched {
						watched, watchedAt = true, time.Now()
					}
				case <-end:
					break failed
				}
			}
			if lb == nil {
				st, err := observer.LockState(ctx, lock)
				t.Fatalf("the Lock blocked through the %s's %s was not granted within it (A unlocked at +%v; the lock now: %+v, %v)",
					f.name, role, unlockedAt.Sub(startedAt).Round(time.Millisecond), st, err)
			}
			if !watched {
				t.Fatalf("the watch through the %s's %s did not report B's grant within it", f.name, role)
			}
			f.end(x)
			ended = true

			if st := s.State(); st != session.Safe {
				t.Fatalf("session %v after a %v %s of the %s, want safe (events %v)", st, span, f.name, role, states)
			}
			if st := b.State(); st != session.Safe {
				t.Fatalf("B's session %v after the %s, want safe", st, f.name)
			}
			proccluster.Eventually(t, 10*time.Second, "the lock still held by B", func() error {
				st, err := c.Client().LockState(ctx, lock)
				if err != nil {
					return err
				}
				if len(st.Holders) != 1 || st.Holders[0].Holder != lb.Holder() || st.Holders[0].Token != lb.Token() {
					return fmt.Errorf("holders %+v, want %s token %d", st.Holders, lb.Holder(), lb.Token())
				}
				return nil
			})
			t.Logf("%s of the %s for %v: session events %v; after A's unlock, B's blocked Lock returned in %v and the watch reported it in %v",
				f.name, role, span, states, grantedAt.Sub(unlockedAt).Round(time.Millisecond), watchedAt.Sub(unlockedAt).Round(time.Millisecond))
		})
	}
}
