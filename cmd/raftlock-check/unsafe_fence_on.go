//go:build raftlock_faults

package main

import (
	"fmt"
	"sync"

	"github.com/raftlock/raftlock/sequencer"
)

// noTenureFence is sequencer.Fence without its tenure rule: the mode rules
// alone, per name (a shared sequencer is stale below a higher exclusive
// token; an exclusive one below any higher token; a slot's below a higher
// token of its slot or a higher exclusive token). A sequencer of an
// earlier tenure, of another kind or permits, is admitted if no mark of
// its own mode is above it: a slot of a semaphore of 2 after a shared
// tenure, or slot 2 of a semaphore of 3 after a semaphore of 2. It is the
// fence before issue 39, for the checker's "can it fail" test of the
// tenures check (--unsafe-resource-fence no-tenure); sequencer/ keeps no
// such mode. It is safe for concurrent use.
type noTenureFence struct {
	mu    sync.Mutex
	marks map[string]*noTenureMarks
}

type noTenureMarks struct {
	any, exclusive sequencer.Token
	slots          map[uint64]sequencer.Token
}

func newNoTenureFence() *noTenureFence {
	return &noTenureFence{marks: map[string]*noTenureMarks{}}
}

// CheckString admits text's sequencer unless a mode rule makes it stale,
// and raises the marks.
func (f *noTenureFence) CheckString(text string) error {
	s, err := sequencer.Parse(text)
	if err != nil {
		return fmt.Errorf("fence check: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.marks[s.Name]
	if m == nil {
		m = &noTenureMarks{slots: map[uint64]sequencer.Token{}}
		f.marks[s.Name] = m
	}
	stale := func(high sequencer.Token) error {
		return fmt.Errorf("%w: lock %q: token %d is lower than %d (no tenure rule)", sequencer.ErrStale, s.Name, s.Token, high)
	}
	switch {
	case s.Semaphore:
		if s.Token < m.exclusive {
			return stale(m.exclusive)
		}
		if high := m.slots[s.Slot]; s.Token < high {
			return stale(high)
		}
		m.slots[s.Slot] = s.Token
	case s.Mode == sequencer.Shared:
		if s.Token < m.exclusive {
			return stale(m.exclusive)
		}
	default:
		if s.Token < m.any {
			return stale(m.any)
		}
		m.exclusive = s.Token
	}
	m.any = max(m.any, s.Token)
	return nil
}
