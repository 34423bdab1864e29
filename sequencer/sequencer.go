// Package sequencer defines raftlock's fencing token: the Raft log index of the
// entry that granted a lock, carried with the lock's name and mode as a
// Sequencer, and what a protected resource uses to validate tokens.
package sequencer

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Mode is a lock mode: exclusive (one holder) or shared (many readers).
type Mode uint8

const (
	// Exclusive admits one holder at a time.
	Exclusive Mode = 1
	// Shared admits any number of holders, none of them exclusive.
	Shared Mode = 2
)

// String returns "exclusive" or "shared".
func (m Mode) String() string {
	switch m {
	case Exclusive:
		return "exclusive"
	case Shared:
		return "shared"
	default:
		return fmt.Sprintf("mode(%d)", uint8(m))
	}
}

// ParseMode parses "exclusive" or "shared"; the empty string means exclusive.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "", "exclusive":
		return Exclusive, nil
	case "shared":
		return Shared, nil
	default:
		return 0, fmt.Errorf("unknown lock mode %q (want exclusive or shared)", s)
	}
}

// Token is a fencing token: the Raft log index of the entry that granted a
// lock. Tokens of one lock strictly increase across grants.
type Token uint64

// Sequencer identifies one grant of one lock: the lock's name, the mode it was
// granted in and the grant's token. Its printable form is stable:
//
//	rl1:<x|s>:<token>:<name>
//
// The name comes last so that it may contain colons.
type Sequencer struct {
	Name  string
	Mode  Mode
	Token Token
}

const prefix = "rl1"

// ErrMalformed is returned (wrapped) by Parse for text that is not a sequencer.
var ErrMalformed = errors.New("malformed sequencer")

// String returns the sequencer's stable printable form.
func (s Sequencer) String() string {
	m := "x"
	if s.Mode == Shared {
		m = "s"
	}
	return prefix + ":" + m + ":" + strconv.FormatUint(uint64(s.Token), 10) + ":" + s.Name
}

// Parse parses the printable form produced by String.
func Parse(text string) (Sequencer, error) {
	parts := strings.SplitN(text, ":", 4)
	if len(parts) != 4 || parts[0] != prefix {
		return Sequencer{}, fmt.Errorf("%w: %q: want rl1:<x|s>:<token>:<name>", ErrMalformed, text)
	}
	var s Sequencer
	switch parts[1] {
	case "x":
		s.Mode = Exclusive
	case "s":
		s.Mode = Shared
	default:
		return Sequencer{}, fmt.Errorf("%w: %q: mode must be x or s", ErrMalformed, text)
	}
	tok, err := strconv.ParseUint(parts[2], 10, 64)
	if err != nil || tok == 0 || parts[2] != strconv.FormatUint(tok, 10) {
		return Sequencer{}, fmt.Errorf("%w: %q: token must be a positive decimal integer", ErrMalformed, text)
	}
	s.Token = Token(tok)
	if parts[3] == "" {
		return Sequencer{}, fmt.Errorf("%w: %q: empty lock name", ErrMalformed, text)
	}
	s.Name = parts[3]
	return s, nil
}
