package sequencer

import (
	"errors"
	"fmt"
	"sync"
)

// ErrStale is returned (wrapped) by a fence's Check when the offered token is
// lower than the highest token the fence has already accepted for that lock:
// the offering client's grant has been superseded.
var ErrStale = errors.New("stale sequencer")

// Checker validates a sequencer offered to a protected resource. Both *Fence
// and *FileFence implement it. Check returns nil to admit the request, an
// error wrapping ErrStale for a superseded sequencer, an error wrapping
// ErrMalformed for an invalid one, and any other error for a failure of the
// checker itself.
type Checker interface {
	Check(s Sequencer) error
}

// Fence is what a protected resource uses to validate fencing tokens: it keeps
// the highest token seen per lock name and rejects any lower one. A token
// equal to the highest is accepted, since one holder sends the same sequencer
// with every request it makes during its grant.
//
// The check is per lock name and ignores the mode: with a shared lock, a
// reader whose grant is older than another reader's is rejected once the newer
// one has been seen. For strict fencing, a resource calls Check and performs
// the protected write under one critical section, so that no newer holder's
// write can land between the check and the write.
//
// A Fence keeps its marks in memory only; see FileFence for one that survives
// restarts. The zero value is not usable; call NewFence. A Fence is safe for
// concurrent use.
type Fence struct {
	mu      sync.RWMutex
	highest map[string]Token
}

// NewFence returns an empty Fence: it accepts the first valid sequencer of any
// lock.
func NewFence() *Fence {
	return &Fence{highest: make(map[string]Token)}
}

// Check admits s if its token is at least the highest token recorded for
// s.Name, and records it as the new highest. It returns an error wrapping
// ErrStale if the token is lower, and one wrapping ErrMalformed if s is not a
// valid sequencer (empty or invalid name, unknown mode, zero token).
func (f *Fence) Check(s Sequencer) error {
	if err := s.validate(); err != nil {
		return fmt.Errorf("fence check: %w", err)
	}
	f.mu.RLock()
	high := f.highest[s.Name]
	f.mu.RUnlock()
	if s.Token < high {
		return staleError(s, high)
	}
	if s.Token == high {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	high = f.highest[s.Name] // may have moved since the read lock was dropped
	if s.Token < high {
		return staleError(s, high)
	}
	f.highest[s.Name] = s.Token
	return nil
}

// CheckString parses text (the printable form of a sequencer) and checks it
// as Check does. Parse errors wrap ErrMalformed.
func (f *Fence) CheckString(text string) error {
	s, err := Parse(text)
	if err != nil {
		return fmt.Errorf("fence check: %w", err)
	}
	return f.Check(s)
}

// Highest returns the highest token accepted for the named lock, or 0 if the
// fence has accepted none.
func (f *Fence) Highest(name string) Token {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.highest[name]
}

// staleError reports that s's token is lower than high.
func staleError(s Sequencer, high Token) error {
	return fmt.Errorf("%w: lock %q: token %d is lower than the highest seen, %d", ErrStale, s.Name, s.Token, high)
}
