package node

import (
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/raftlock/raftlock/sequencer"
	"github.com/raftlock/raftlock/session"
)

func invalid(format string, args ...any) error {
	return session.Errorf(session.CodeInvalidArgument, format, args...)
}

// checkText validates an identifier-like string: UTF-8, no control
// characters, between min and max bytes.
func checkText(what, s string, min, max int) error {
	if len(s) < min {
		if min == 1 {
			return invalid("%s must not be empty", what)
		}
		return invalid("%s must be at least %d bytes", what, min)
	}
	if len(s) > max {
		return invalid("%s is %d bytes; the limit is %d", what, len(s), max)
	}
	if !utf8.ValidString(s) {
		return invalid("%s is not valid UTF-8", what)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return invalid("%s contains control character %U", what, r)
		}
	}
	return nil
}

// ValidateLockName checks a lock name: path-like UTF-8, 1–512 bytes, no
// control characters.
func ValidateLockName(name string) error {
	return checkText("lock name", name, 1, session.MaxNameBytes)
}

func checkDuration(what string, d, min, max time.Duration) error {
	if d < min || d > max {
		return invalid("%s %v out of range [%v, %v]", what, d, min, max)
	}
	return nil
}

func checkMode(m sequencer.Mode) error {
	if m != sequencer.Exclusive && m != sequencer.Shared {
		return invalid("mode must be exclusive or shared")
	}
	return nil
}

func checkLockRef(name, sess, holder string) error {
	if err := ValidateLockName(name); err != nil {
		return err
	}
	if err := checkText("session", sess, 1, 64); err != nil {
		return err
	}
	return checkText("holder", holder, 1, session.MaxHolderBytes)
}

func checkValue(v string) error {
	if len(v) > session.MaxValueBytes {
		return session.Errorf(session.CodeTooLarge, "value is %d bytes; the limit is %d", len(v), session.MaxValueBytes)
	}
	return nil
}
