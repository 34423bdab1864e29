// Package sequencer defines raftlock's fencing token: the Raft log index of the
// entry that granted a lock, carried with the lock's name and mode as a
// Sequencer, and what a protected resource uses to validate tokens.
package sequencer

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Mode is a lock mode: exclusive (one holder) or shared (many readers).
// It is the one mode type of raftlock: the state machine stores it, the
// wire names it, a sequencer carries it. Its values are part of the Raft
// log's format and never change.
type Mode uint8

const (
	// Exclusive admits one holder at a time.
	Exclusive Mode = 1
	// Shared admits any number of holders, none of them exclusive.
	Shared Mode = 2
)

// Valid reports whether m is Exclusive or Shared.
func (m Mode) Valid() bool { return m == Exclusive || m == Shared }

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
// granted in and the grant's token; for a slot of a semaphore (a lock taken
// with permits), the slot and the semaphore's permits too. Its printable form
// is stable:
//
//	rl1:<x|s>:<token>:<name>              a grant of a plain lock
//	rl1:p<slot>/<permits>:<token>:<name>  a grant of slot <slot> of a semaphore of <permits>
//
// Slot and permits are decimal without leading zeros, slot < permits <=
// MaxSlots. The name comes last so that it may contain colons.
type Sequencer struct {
	Name  string
	Mode  Mode
	Token Token
	// Semaphore is set on a grant of one slot of a semaphore, which Slot
	// names (0 to Permits-1) and whose permits Permits gives (1 to
	// MaxSlots); its Mode is Exclusive. A plain lock's sequencer has
	// Semaphore false and Slot and Permits 0.
	Semaphore bool
	Slot      uint64
	Permits   uint64
}

// MaxSlots bounds a semaphore's slots (the cluster's api.MaxPermits): a slot
// sequencer names a slot below it, so that a fence keeps at most MaxSlots
// marks per lock.
const MaxSlots = 256

const prefix = "rl1"

// MaxNameBytes is the longest lock name, in bytes, that a sequencer may carry.
// It matches the lock-name limit of the cluster.
const MaxNameBytes = 512

// ErrMalformed is returned (wrapped) by Parse for text that is not a sequencer.
var ErrMalformed = errors.New("malformed sequencer")

// String returns the sequencer's stable printable form. A Mode other than
// Shared prints as exclusive ("x"); String does not validate the sequencer.
func (s Sequencer) String() string {
	m := "x"
	switch {
	case s.Semaphore:
		m = "p" + strconv.FormatUint(s.Slot, 10) + "/" + strconv.FormatUint(s.Permits, 10)
	case s.Mode == Shared:
		m = "s"
	}
	return prefix + ":" + m + ":" + strconv.FormatUint(uint64(s.Token), 10) + ":" + s.Name
}

// Parse parses the printable form produced by String. It accepts exactly the
// canonical form: prefix "rl1", mode "x" or "s" or a slot "p<slot>/<permits>"
// (both decimal, no sign or leading zeros, slot < permits <= MaxSlots), a
// positive decimal token without sign or leading zeros, and a valid lock
// name (see MaxNameBytes: 1 to 512 bytes of UTF-8 without control
// characters), so that a successful Parse round-trips through String byte
// for byte. The "p<slot>" form of unreleased builds, which lacks the
// permits, is refused. Errors wrap ErrMalformed.
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
		slot, permits, err := parseSlot(parts[1])
		if err != nil {
			return Sequencer{}, fmt.Errorf("%w: %q: %v", ErrMalformed, text, err)
		}
		s.Mode, s.Semaphore, s.Slot, s.Permits = Exclusive, true, slot, permits
	}
	tok, err := strconv.ParseUint(parts[2], 10, 64)
	if err != nil || tok == 0 || parts[2] != strconv.FormatUint(tok, 10) {
		return Sequencer{}, fmt.Errorf("%w: %q: token must be a positive decimal integer", ErrMalformed, text)
	}
	s.Token = Token(tok)
	if err := CheckName(parts[3]); err != nil {
		return Sequencer{}, fmt.Errorf("%w: %q: %v", ErrMalformed, text, err)
	}
	s.Name = parts[3]
	return s, nil
}

// parseSlot parses the mode field of a slot sequencer, "p<slot>/<permits>":
// exactly the canonical decimals of a slot below permits, and permits of at
// most MaxSlots.
func parseSlot(field string) (slot, permits uint64, err error) {
	digits, ok := strings.CutPrefix(field, "p")
	if !ok {
		return 0, 0, errors.New("mode must be x, s or p<slot>/<permits>")
	}
	slotText, permitsText, ok := strings.Cut(digits, "/")
	if !ok {
		if _, ok := canonical(digits); ok {
			return 0, 0, errors.New("a slot sequencer must name its semaphore's permits (p<slot>/<permits>); the p<slot> form of unreleased builds is no longer accepted: acquire the semaphore again")
		}
		return 0, 0, errors.New("mode must be x, s or p<slot>/<permits>")
	}
	slot, ok1 := canonical(slotText)
	permits, ok2 := canonical(permitsText)
	if !ok1 || !ok2 || permits == 0 || permits > MaxSlots || slot >= permits {
		return 0, 0, fmt.Errorf("slot mode must be p<slot>/<permits>, decimal, with slot < permits <= %d", MaxSlots)
	}
	return slot, permits, nil
}

// canonical parses the canonical decimal form of an unsigned integer: digits
// only, no sign or leading zeros.
func canonical(digits string) (uint64, bool) {
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || digits != strconv.FormatUint(n, 10) {
		return 0, false
	}
	return n, true
}

// CheckText is raftlock's one rule for names and ids (lock names, holder
// ids, session ids, prefixes): valid UTF-8, no control characters, between
// min and max bytes. The error names what.
func CheckText(what, s string, min, max int) error {
	if len(s) < min {
		if min == 1 {
			return fmt.Errorf("%s must not be empty", what)
		}
		return fmt.Errorf("%s must be at least %d bytes", what, min)
	}
	if len(s) > max {
		return fmt.Errorf("%s is %d bytes; the limit is %d", what, len(s), max)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s is not valid UTF-8", what)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("%s contains control character %U", what, r)
		}
	}
	return nil
}

// CheckName checks a lock name: 1 to MaxNameBytes bytes (CheckText).
func CheckName(name string) error {
	return CheckText("lock name", name, 1, MaxNameBytes)
}

// Config is the part of a sequencer that a lock keeps for as long as it is
// stored: 0 for a plain lock's (exclusive or shared), the permits for a
// semaphore slot's. Every holder and waiter of a stored lock agrees on it,
// so two grants whose Config differs belong to different tenures of the
// name: the one with the lower token ended before the other began.
func (s Sequencer) Config() uint64 {
	if s.Semaphore {
		return s.Permits
	}
	return 0
}

// validate reports whether s could have come from Parse: a valid name, mode
// Exclusive or Shared and a non-zero token. Errors wrap ErrMalformed.
func (s Sequencer) validate() error {
	if err := CheckName(s.Name); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if !s.Mode.Valid() {
		return fmt.Errorf("%w: lock %q: invalid mode %v", ErrMalformed, s.Name, s.Mode)
	}
	if s.Semaphore && (s.Mode != Exclusive || s.Permits == 0 || s.Permits > MaxSlots || s.Slot >= s.Permits) {
		return fmt.Errorf("%w: lock %q: a slot sequencer is exclusive, of a slot below its permits, at most %d", ErrMalformed, s.Name, MaxSlots)
	}
	if !s.Semaphore && (s.Slot != 0 || s.Permits != 0) {
		return fmt.Errorf("%w: lock %q: a slot or permits on a plain lock's sequencer", ErrMalformed, s.Name)
	}
	if s.Token == 0 {
		return fmt.Errorf("%w: lock %q: token must be positive", ErrMalformed, s.Name)
	}
	return nil
}
