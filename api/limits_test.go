package api

import (
	"fmt"
	"testing"

	"github.com/raftlock/raftlock/sequencer"
)

// The one limit rule: a usage is refused (resource_exhausted, naming the
// limit) when it passes a set limit; zero limits and nil Limits bound
// nothing.
func TestLimitsExceededRefusesOnlyPastASetLimit(t *testing.T) {
	l := &Limits{Sessions: 2, Locks: 3, WaitersPerLock: 4, LocksPerSession: 5}
	for _, tc := range []struct {
		u    Usage
		want string
	}{
		{Usage{}, ""},
		{Usage{Sessions: 2, Locks: 3, Waiters: 4, SessionLocks: 5}, ""},
		{Usage{Sessions: 3}, "the cluster's limit of 2 open sessions is reached"},
		{Usage{Locks: 4}, "the cluster's limit of 3 locks held, waited for or delayed is reached"},
		{Usage{Waiters: 5}, "the cluster's limit of 4 waiters on this lock is reached"},
		{Usage{SessionLocks: 6}, "the cluster's limit of 5 locks this session holds or waits for is reached"},
	} {
		err := l.Exceeded(tc.u)
		got := ""
		if err != nil {
			got = err.Message
			if err.Code != CodeResourceExhausted {
				t.Errorf("%+v: code %s", tc.u, err.Code)
			}
		}
		if got != tc.want {
			t.Errorf("Exceeded(%+v) = %q, want %q", tc.u, got, tc.want)
		}
	}
	var none *Limits
	if err := none.Exceeded(Usage{Sessions: 1 << 40}); err != nil {
		t.Errorf("nil limits refused: %v", err)
	}
	if err := (&Limits{}).Exceeded(Usage{Sessions: 1 << 40}); err != nil {
		t.Errorf("zero limits refused: %v", err)
	}
}

func TestLimitsResolveFillsDefaultsAndRefusesNegatives(t *testing.T) {
	l := Limits{Locks: 7}
	if err := l.Resolve(); err != nil {
		t.Fatal(err)
	}
	want := DefaultLimits()
	want.Locks = 7
	if l != want {
		t.Fatalf("resolved %+v, want %+v", l, want)
	}
	l = Limits{WaitersPerLock: -1}
	if err := l.Resolve(); CodeOf(err) != CodeInvalidArgument || err.Error() != "invalid_argument: --max-waiters-per-lock -1 out of range [1, ∞)" {
		t.Fatalf("negative limit: %v", err)
	}
}

func TestLocksQueryResolveBoundsThePage(t *testing.T) {
	q := LocksQuery{}
	if err := q.Resolve(); err != nil || q.Limit != DefaultLocksPage {
		t.Fatalf("default page: %+v, %v", q, err)
	}
	for _, bad := range []LocksQuery{{Limit: -1}, {Limit: MaxLocksPage + 1}, {After: "a\x00"}, {Prefix: "\xff"}} {
		if err := bad.Resolve(); CodeOf(err) != CodeInvalidArgument {
			t.Errorf("%+v: %v, want invalid_argument", bad, err)
		}
	}
}

// PageLocks cuts pages that list every lock exactly once, in order.
func TestPageLocksListsEveryLockOnce(t *testing.T) {
	var all []LockState
	for i := range 7 {
		all = append(all, LockState{Name: fmt.Sprint("l", i)})
	}
	var got []string
	q := LocksQuery{Limit: 3}
	for {
		p := PageLocks(all, q)
		for _, l := range p.Locks {
			got = append(got, l.Name)
		}
		if p.Next == "" {
			break
		}
		q.After = p.Next
	}
	if fmt.Sprint(got) != "[l0 l1 l2 l3 l4 l5 l6]" {
		t.Fatalf("pages listed %v", got)
	}
	if p := PageLocks(all[:6], LocksQuery{Limit: 3, After: "l2"}); len(p.Locks) != 3 || p.Next != "" {
		t.Fatalf("last full page: %+v", p)
	}
}

// The state machine's slot bitset and the sequencer's slot bound follow
// MaxPermits.
func TestMaxPermitsIsAMultipleOf64AndTheSequencersSlots(t *testing.T) {
	if MaxPermits%64 != 0 || MaxPermits != sequencer.MaxSlots {
		t.Fatalf("MaxPermits %d: want a multiple of 64 equal to sequencer.MaxSlots %d", MaxPermits, sequencer.MaxSlots)
	}
}
