//go:build raftlock_faults

package main

import (
	"errors"
	"testing"

	"github.com/raftlock/raftlock/sequencer"
)

// TestNoTenureFenceAdmitsAnEarlierTenure pins what --unsafe-resource-fence
// no-tenure breaks: after a later tenure of the name (shared, or a
// semaphore of other permits) wrote, a stale sequencer of an earlier
// tenure that no mark of its own mode supersedes is admitted by the
// broken fence and refused by sequencer.Fence (the tenure rule); a
// sequencer the mode rules make stale is refused by both.
func TestNoTenureFenceAdmitsAnEarlierTenure(t *testing.T) {
	slot := func(tok sequencer.Token, s, permits uint64) string {
		return sequencer.Sequencer{Name: "n", Token: tok, Mode: sequencer.Exclusive, Semaphore: true, Slot: s, Permits: permits}.String()
	}
	shared := func(tok sequencer.Token) string {
		return sequencer.Sequencer{Name: "n", Token: tok, Mode: sequencer.Shared}.String()
	}
	exclusive := func(tok sequencer.Token) string {
		return sequencer.Sequencer{Name: "n", Token: tok, Mode: sequencer.Exclusive}.String()
	}
	for _, tc := range []struct {
		name        string
		before      []string
		late        string
		brokenTakes bool
	}{
		{"a slot after a shared tenure", []string{slot(3, 0, 2), shared(7)}, slot(3, 0, 2), true},
		{"a shared grant after a semaphore tenure", []string{shared(3), slot(7, 0, 2)}, shared(3), true},
		{"a slot after a semaphore of other permits", []string{slot(3, 1, 2), slot(7, 0, 3)}, slot(3, 1, 2), true},
		{"a slot after an exclusive tenure", []string{slot(3, 0, 2), exclusive(7)}, slot(3, 0, 2), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			broken, real := newNoTenureFence(), sequencer.NewFence()
			for _, s := range tc.before {
				if err := broken.CheckString(s); err != nil {
					t.Fatalf("broken fence refused %s: %v", s, err)
				}
				if err := real.CheckString(s); err != nil {
					t.Fatalf("sequencer.Fence refused %s: %v", s, err)
				}
			}
			if err := real.CheckString(tc.late); !errors.Is(err, sequencer.ErrStale) {
				t.Errorf("sequencer.Fence: %v, want the late %s stale", err, tc.late)
			}
			err := broken.CheckString(tc.late)
			if tc.brokenTakes && err != nil {
				t.Errorf("broken fence: %v, want the late %s admitted", err, tc.late)
			}
			if !tc.brokenTakes && !errors.Is(err, sequencer.ErrStale) {
				t.Errorf("broken fence: %v, want the late %s stale (a mode rule)", err, tc.late)
			}
		})
	}
}
