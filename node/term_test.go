package node

import (
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/raftlock/raftlock/api"
)

func newBareTerm() *leaderTerm { return newLeaderTerm(&Node{cfg: Config{Now: time.Now}}) }

// A term that has ended arms no timer: an event applied after the end, or
// the retry of a proposal that failed as leadership ended, leaves nothing
// running.
func TestEndedTermArmsNoTimer(t *testing.T) {
	term := newBareTerm()
	term.end()
	term.scheduleTimer(holdKey{1}, time.Hour)
	if due, armed := term.due(holdKey{1}); armed {
		t.Fatalf("an ended term armed a timer due %v", due)
	}
}

// Ending a term stops every timer it armed and closes its done channel;
// ending it again changes nothing.
func TestEndingTermStopsItsTimersAndClosesDone(t *testing.T) {
	term := newBareTerm()
	keys := []leaderTimer{holdKey{1}, delayKey{"a", 2, 0}, waitTimerKey{waitKey{"a", "s", "h"}, 3}}
	for _, k := range keys {
		term.scheduleTimer(k, time.Hour)
		if _, armed := term.due(k); !armed {
			t.Fatalf("%s: not armed by a live term", k.what())
		}
	}
	term.end()
	term.end()
	select {
	case <-term.done():
	default:
		t.Fatal("done is open after the term ended")
	}
	for _, k := range keys {
		if _, armed := term.due(k); armed {
			t.Errorf("%s: still armed after the term ended", k.what())
		}
	}
	if len(term.timers) != 0 {
		t.Fatalf("%d timers left after the term ended", len(term.timers))
	}
}

// Only the current term makes the node serve: a term's loop that finishes
// its catching up (or a restore that ends) after the term ended leaves
// the node not serving.
func TestEndedTermNeverMakesTheNodeServe(t *testing.T) {
	n := &Node{cfg: Config{Now: time.Now}, log: hclog.NewNullLogger()}
	term := newLeaderTerm(n)
	n.term.Store(term)
	if !term.serve() || !n.IsLeader() {
		t.Fatal("the current term does not make the node serve")
	}
	n.endLeadership()
	if n.IsLeader() {
		t.Fatal("the node serves after its term ended")
	}
	if term.serve() || n.IsLeader() {
		t.Fatal("an ended term made the node serve")
	}
}

// A node that loses leadership drops its term: the term ends, so that an
// acquire waiting on it is answered unknown_outcome, and the node no
// longer holds it; the new leader holds one of its own, whose lease
// table tracks every session.
func TestLeadershipChangeDropsTheTerm(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	ctx := ctxT(t)
	old, _ := c.leader()
	holder := mustOpen(t, c, api.OpenRequest{TTL: time.Minute})
	waiter := mustOpen(t, c, api.OpenRequest{TTL: time.Minute})
	const L = "term/lock"
	if _, err := old.Acquire(ctx, api.AcquireRequest{Name: L, Session: holder.ID, Holder: "h1"}); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		_, err := old.Acquire(ctx, api.AcquireRequest{Name: L, Session: waiter.ID, Holder: "q1", Wait: time.Minute})
		waited <- err
	}()
	c.awaitQueue(t, L, "q1")
	term := old.leadership()
	if term == nil {
		t.Fatal("the leader holds no term")
	}
	if _, err := old.transferLeadership(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; api.CodeOf(err) != api.CodeUnknownOutcome {
		t.Fatalf("the waiting acquire answered %v; want unknown_outcome", err)
	}
	select {
	case <-term.done():
	default:
		t.Fatal("the old term did not end")
	}
	if old.leadership() == term {
		t.Fatal("a deposed leader still holds its term")
	}
	now, _ := c.leader()
	for i, s := range []api.Info{holder, waiter} {
		if _, ok := now.leadership().leases.Deadline(s.ID); !ok {
			t.Errorf("session %d: not in the new leader's lease table", i+1)
		}
	}
}
