package sequencer

import (
	"fmt"
	"maps"
)

// Marks are a fence's high-water marks of one lock name, as Fence keeps
// them, for a fence that stores them its own way (fenceproxy's log). The
// zero value is a name no sequencer was admitted for.
type Marks struct {
	// Highest is the highest token of either mode or any slot admitted.
	Highest Token `json:"highest"`
	// HighestExclusive is the highest exclusive token admitted; at most
	// Highest.
	HighestExclusive Token `json:"highest_exclusive,omitempty"`
	// Slots is the highest token admitted per semaphore slot, each at
	// most Highest. Admit never writes it in place.
	Slots map[uint64]Token `json:"slots,omitempty"`
	// Config is the Config of the sequencer that set Highest (0: a plain
	// lock's).
	Config uint64 `json:"config,omitempty"`
	// Other is the highest token admitted whose Config differs from
	// Config; at most Highest.
	Other Token `json:"other,omitempty"`
}

// Admit applies the fence's rule (see Fence) to s: it returns the marks
// after recording s and whether s raised one, or an error wrapping
// ErrStale if s is superseded, or ErrMalformed if s is not valid. m is not
// changed.
func (m Marks) Admit(s Sequencer) (Marks, bool, error) {
	if err := s.validate(); err != nil {
		return m, false, fmt.Errorf("fence check: %w", err)
	}
	next, raised, err := m.internal().admit(s)
	if err != nil || !raised {
		return m, false, err
	}
	return exported(next), true, nil
}

// Validate reports whether m could be a fence's marks: every mark at most
// Highest, no zero slot token, slots below MaxSlots, a Config of 0 to
// MaxSlots. Errors wrap ErrCorrupt.
func (m Marks) Validate() error {
	switch {
	case m.Highest == 0:
		return fmt.Errorf("%w: zero highest token", ErrCorrupt)
	case m.HighestExclusive > m.Highest:
		return fmt.Errorf("%w: exclusive token %d above the highest token %d", ErrCorrupt, m.HighestExclusive, m.Highest)
	case m.Other > m.Highest:
		return fmt.Errorf("%w: other token %d above the highest token %d", ErrCorrupt, m.Other, m.Highest)
	case m.Config > MaxSlots:
		return fmt.Errorf("%w: config %d, want permits 0 to %d", ErrCorrupt, m.Config, MaxSlots)
	}
	for slot, tok := range m.Slots {
		switch {
		case slot >= MaxSlots:
			return fmt.Errorf("%w: slot %d, the limit is %d", ErrCorrupt, slot, MaxSlots-1)
		case tok == 0 || tok > m.Highest:
			return fmt.Errorf("%w: slot %d token %d, want 1 to the highest token %d", ErrCorrupt, slot, tok, m.Highest)
		}
	}
	return nil
}

func (m Marks) internal() marks {
	return marks{any: m.Highest, exclusive: m.HighestExclusive, slots: m.Slots, config: m.Config, other: m.Other}
}

func exported(m marks) Marks {
	return Marks{Highest: m.any, HighestExclusive: m.exclusive, Slots: m.slots, Config: m.config, Other: m.other}
}

// DecodeState reads the marks of a FileFence state file (any layout
// version OpenFileFence reads). Errors wrap ErrCorrupt.
func DecodeState(data []byte) (map[string]Marks, error) {
	m, err := decodeState(data)
	if err != nil {
		return nil, err
	}
	out := make(map[string]Marks, len(m))
	for name, mk := range m {
		out[name] = exported(mk)
	}
	return out, nil
}

// EncodeState returns a FileFence state file holding m (the layout
// FileFence writes), after validating every entry. Errors of validation
// wrap ErrCorrupt.
func EncodeState(m map[string]Marks) ([]byte, error) {
	in := make(map[string]marks, len(m))
	for name, mk := range m {
		if err := CheckName(name); err != nil {
			return nil, fmt.Errorf("%w: lock %q: %v", ErrCorrupt, name, err)
		}
		if err := mk.Validate(); err != nil {
			return nil, fmt.Errorf("lock %q: %w", name, err)
		}
		mk.Slots = maps.Clone(mk.Slots)
		in[name] = mk.internal()
	}
	return encodeState(in)
}
