package main

import (
	"fmt"
	"sync"

	"github.com/raftlock/raftlock/sequencer"
)

// tenurelessFence is the Go worker's fence under -broken ignore-tenure:
// sequencer.Fence's mode and slot rules without its tenure rule, as a
// fence from before a name's kind and permits counted. A shared sequencer
// is stale below the highest exclusive token; an exclusive one below the
// highest token of any mode or slot; a slot's below the highest exclusive
// token or the highest token of its own slot. So an old semaphore slot's
// sequencer, checked after a plain or a semaphore of other permits took
// the name over, is admitted, which the tenure rule refuses.
type tenurelessFence struct {
	mu    sync.Mutex
	marks map[string]*tenurelessMarks
}

type tenurelessMarks struct {
	any, exclusive sequencer.Token
	slots          map[uint64]sequencer.Token
}

func newTenurelessFence() *tenurelessFence {
	return &tenurelessFence{marks: map[string]*tenurelessMarks{}}
}

// Check admits s unless a mode or slot rule makes it stale.
func (f *tenurelessFence) Check(s sequencer.Sequencer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.marks[s.Name]
	if m == nil {
		m = &tenurelessMarks{slots: map[uint64]sequencer.Token{}}
		f.marks[s.Name] = m
	}
	switch {
	case s.Semaphore:
		if s.Token < m.exclusive || s.Token < m.slots[s.Slot] {
			return fmt.Errorf("fence check: %s: %w", s, sequencer.ErrStale)
		}
		m.slots[s.Slot] = s.Token
	case s.Mode == sequencer.Shared:
		if s.Token < m.exclusive {
			return fmt.Errorf("fence check: %s: %w", s, sequencer.ErrStale)
		}
	default:
		if s.Token < m.any {
			return fmt.Errorf("fence check: %s: %w", s, sequencer.ErrStale)
		}
		m.exclusive = s.Token
	}
	m.any = max(m.any, s.Token)
	return nil
}

// checkString parses text and checks it with f; a parse error wraps
// sequencer.ErrMalformed.
func checkString(f sequencer.Checker, text string) error {
	s, err := sequencer.Parse(text)
	if err != nil {
		return fmt.Errorf("fence check: %w", err)
	}
	return f.Check(s)
}
