package sequencer

import (
	"errors"
	"fmt"
	"sync"
)

// ErrStale is returned (wrapped) by a fence's Check when the offered
// sequencer's grant has been superseded: for an exclusive sequencer, the fence
// has already admitted a higher token of that lock (of any mode or slot); for
// a shared one, it has already admitted a higher exclusive token of that lock;
// for a semaphore slot's, a higher token of that slot or a higher exclusive
// token of the lock; for any, a higher token of the lock granted while its
// kind or permits differed (a later tenure of the name).
var ErrStale = errors.New("stale sequencer")

// Checker validates a sequencer offered to a protected resource. Both *Fence
// and *FileFence implement it. Check returns nil to admit the request, an
// error wrapping ErrStale for a superseded sequencer, an error wrapping
// ErrMalformed for an invalid one, and any other error for a failure of the
// checker itself.
type Checker interface {
	Check(s Sequencer) error
}

// Fence is what a protected resource uses to validate fencing tokens. Tokens
// of a lock strictly increase across its grants, so a newer grant has a higher
// token, and the fence applies the lock's mode rule to them:
//
//   - a shared sequencer is current unless the fence has admitted a higher
//     exclusive token of the lock: readers holding a shared lock at the same
//     time are all admitted, in any order, until a writer takes over;
//   - an exclusive sequencer is current unless the fence has admitted a
//     higher token of the lock in either mode, or of any slot;
//   - a slot sequencer (one slot of a semaphore) is current unless the fence
//     has admitted a higher token of the same slot, or a higher exclusive
//     token of the lock: the holders of different slots are admitted side by
//     side, and a holder whose slot expired and was granted again is not.
//     Slot grants do not count as exclusive ones.
//
// Before those rules comes the tenure rule. A name's kind and permits (its
// Config: plain, or a semaphore of N) cannot change while the lock is
// stored; they change only after every grant of the name has ended and the
// name was freed, and every later grant has a higher token. So a sequencer
// whose Config differs from that of a higher token admitted is stale: it
// belongs to an earlier tenure. And a sequencer is stale below a token
// admitted with another Config than its own, even if a later tenure took
// its Config back.
//
// For that the fence keeps per lock name the highest exclusive token and
// the highest token of any mode (slots included) that it has admitted, one
// mark per slot of a semaphore, the Config of the highest token and the
// highest token admitted with another Config, and Check raises them as it
// admits sequencers. A token equal to a mark is admitted,
// since one holder sends the same sequencer with every request it makes
// during its grant. A reader whose grant has ended is admitted until a newer
// exclusive grant is seen: readers do not exclude one another, so only a
// writer's grant makes a reader stale.
//
// For strict fencing, a resource calls Check and performs the protected write
// under one critical section, so that no newer holder's write can land
// between the check and the write.
//
// A Fence keeps its marks in memory only; see FileFence for one that survives
// restarts. The zero value is not usable; call NewFence. A Fence is safe for
// concurrent use.
type Fence struct {
	mu    sync.RWMutex
	marks map[string]marks
}

// marks are a fence's high-water marks of one lock. Check raises them
// only through admit, and a state file is only loaded after a check that
// exclusive, other and every slot mark are at most any, so that always
// holds.
type marks struct {
	// any is the highest token of either mode or any slot admitted; 0 if
	// none.
	any Token
	// exclusive is the highest exclusive token admitted; 0 if none.
	exclusive Token
	// slots is the highest token admitted per semaphore slot (nil if
	// none). It is never written in place: admit copies it, so that marks
	// read under a read lock stay as read.
	slots map[uint64]Token
	// config is the Config (0 plain, else a semaphore's permits) of the
	// sequencer that set any; 0 while none was admitted.
	config uint64
	// other is the highest token admitted whose Config differs from
	// config, 0 if none; other <= any. Every sequencer of config below it
	// belongs to an earlier tenure of the name.
	other Token
}

// admit applies the fencing rule to s, a valid sequencer of the lock whose
// marks are m. It returns the marks after recording s and whether s raised
// one, or an error wrapping ErrStale if s is superseded.
func (m marks) admit(s Sequencer) (marks, bool, error) {
	c := s.Config()
	if c != m.config && s.Token < m.any {
		return m, false, staleTenureError(s, m.any, configName(m.config))
	}
	if c == m.config && s.Token < m.other {
		return m, false, staleTenureError(s, m.other, "not a "+configName(c))
	}
	next, raised, err := m.admitMode(s)
	if raised && s.Token > m.any && c != m.config {
		// s opens a later tenure: m.any, of another config than s's,
		// is now the highest token of another config.
		next.other, next.config = m.any, c
	}
	return next, raised, err
}

// admitMode applies the mode rules to s, which the tenure rule admitted.
func (m marks) admitMode(s Sequencer) (marks, bool, error) {
	switch {
	case s.Semaphore:
		if s.Token < m.exclusive {
			return m, false, staleSlotExclusiveError(s, m.exclusive)
		}
		if high := m.slots[s.Slot]; s.Token < high {
			return m, false, staleSlotError(s, high)
		} else if s.Token == high {
			return m, false, nil
		}
		slots := make(map[uint64]Token, len(m.slots)+1)
		for k, v := range m.slots {
			slots[k] = v
		}
		slots[s.Slot] = s.Token
		m.slots, m.any = slots, max(m.any, s.Token)
		return m, true, nil
	case s.Mode == Shared:
		if s.Token < m.exclusive {
			return m, false, staleSharedError(s, m.exclusive)
		}
		if s.Token <= m.any {
			return m, false, nil
		}
		m.any = s.Token
		return m, true, nil
	}
	if s.Token < m.any {
		return m, false, staleError(s, m.any)
	}
	if s.Token == m.exclusive && s.Token == m.any {
		return m, false, nil
	}
	// s.Token >= m.any >= m.exclusive: it becomes both marks. The slot
	// marks stay: every one is below it, and a slot sequencer below the
	// exclusive mark is stale anyway.
	m.any, m.exclusive = s.Token, s.Token
	return m, true, nil
}

// NewFence returns an empty Fence: it accepts the first valid sequencer of any
// lock.
func NewFence() *Fence {
	return &Fence{marks: make(map[string]marks)}
}

// Check admits s unless it is superseded (see Fence for the rule) and
// records it, raising the marks of s.Name. It returns an error wrapping
// ErrStale if s is superseded, and one wrapping ErrMalformed if s is not a
// valid sequencer (empty or invalid name, unknown mode, zero token).
func (f *Fence) Check(s Sequencer) error {
	if err := s.validate(); err != nil {
		return fmt.Errorf("fence check: %w", err)
	}
	f.mu.RLock()
	cur := f.marks[s.Name]
	f.mu.RUnlock()
	_, raised, err := cur.admit(s)
	if err != nil || !raised {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	cur = f.marks[s.Name] // may have moved since the read lock was dropped
	next, raised, err := cur.admit(s)
	if err != nil || !raised {
		return err
	}
	f.marks[s.Name] = next
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

// Highest returns the highest token, of either mode, accepted for the named
// lock, or 0 if the fence has accepted none.
func (f *Fence) Highest(name string) Token {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.marks[name].any
}

// HighestExclusive returns the highest exclusive token accepted for the named
// lock, or 0 if the fence has accepted none. Shared sequencers with a lower
// token are stale.
func (f *Fence) HighestExclusive(name string) Token {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.marks[name].exclusive
}

// HighestSlot returns the highest token accepted for slot of the named
// semaphore, or 0 if the fence has accepted none.
func (f *Fence) HighestSlot(name string, slot uint64) Token {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.marks[name].slots[slot]
}

// staleTenureError reports that s's token is lower than high, a token of
// s.Name admitted with another kind or permits than s's (highKind names
// them): the name was freed and taken again since s's grant.
func staleTenureError(s Sequencer, high Token, highKind string) error {
	return fmt.Errorf("%w: lock %q: token %d (%s) is lower than token %d (%s): the name's kind or permits changed since the grant", ErrStale, s.Name, s.Token, configName(s.Config()), high, highKind)
}

// configName names a Config: "plain lock" or "semaphore of N".
func configName(c uint64) string {
	if c == 0 {
		return "plain lock"
	}
	return fmt.Sprintf("semaphore of %d", c)
}

// staleSlotError reports that slot sequencer s's token is lower than high,
// the highest token of its slot seen.
func staleSlotError(s Sequencer, high Token) error {
	return fmt.Errorf("%w: lock %q: slot %d token %d is lower than the highest token of that slot seen, %d", ErrStale, s.Name, s.Slot, s.Token, high)
}

// staleSlotExclusiveError reports that slot sequencer s's token is lower
// than high, the highest exclusive token of the lock seen.
func staleSlotExclusiveError(s Sequencer, high Token) error {
	return fmt.Errorf("%w: lock %q: slot %d token %d is lower than the highest exclusive token seen, %d", ErrStale, s.Name, s.Slot, s.Token, high)
}

// staleError reports that s's token is lower than high, the highest token of
// any mode seen: the rejection of an exclusive sequencer.
func staleError(s Sequencer, high Token) error {
	return fmt.Errorf("%w: lock %q: token %d is lower than the highest seen, %d", ErrStale, s.Name, s.Token, high)
}

// staleSharedError reports that shared sequencer s's token is lower than
// high, the highest exclusive token seen.
func staleSharedError(s Sequencer, high Token) error {
	return fmt.Errorf("%w: lock %q: shared token %d is lower than the highest exclusive token seen, %d", ErrStale, s.Name, s.Token, high)
}

// Current reports whether f would admit s now, without recording it: false
// for a superseded or invalid sequencer. A fenced resource that lets
// admitted requests run concurrently uses it to tell which of those still
// in progress a newer grant has superseded meanwhile.
func (f *Fence) Current(s Sequencer) bool {
	if s.validate() != nil {
		return false
	}
	f.mu.RLock()
	cur := f.marks[s.Name]
	f.mu.RUnlock()
	_, _, err := cur.admit(s)
	return err == nil
}
