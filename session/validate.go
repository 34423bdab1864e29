package session

import (
	"unicode"
	"unicode/utf8"
)

// MaxSessionIDBytes bounds a session id on input (ids are 32 hex digits).
const MaxSessionIDBytes = 64

// CheckText validates an identifier-like string: valid UTF-8, no control
// characters, between min and max bytes. The error is an invalid_argument
// *Error naming what.
func CheckText(what, s string, min, max int) error {
	if len(s) < min {
		if min == 1 {
			return Errorf(CodeInvalidArgument, "%s must not be empty", what)
		}
		return Errorf(CodeInvalidArgument, "%s must be at least %d bytes", what, min)
	}
	if len(s) > max {
		return Errorf(CodeInvalidArgument, "%s is %d bytes; the limit is %d", what, len(s), max)
	}
	if !utf8.ValidString(s) {
		return Errorf(CodeInvalidArgument, "%s is not valid UTF-8", what)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return Errorf(CodeInvalidArgument, "%s contains control character %U", what, r)
		}
	}
	return nil
}

// ValidateLockName checks a lock name: path-like UTF-8, 1–512 bytes, no
// control characters.
func ValidateLockName(name string) error {
	return CheckText("lock name", name, 1, MaxNameBytes)
}

// CheckValue checks the size of a lock's value: too_large above
// MaxValueBytes.
func CheckValue(v string) error {
	if len(v) > MaxValueBytes {
		return Errorf(CodeTooLarge, "value is %d bytes; the limit is %d", len(v), MaxValueBytes)
	}
	return nil
}

// CheckLockRef validates the (lock, session, holder) triple of an acquire
// or release.
func CheckLockRef(name, sess, holder string) error {
	if err := ValidateLockName(name); err != nil {
		return err
	}
	if err := CheckText("session", sess, 1, MaxSessionIDBytes); err != nil {
		return err
	}
	return CheckText("holder", holder, 1, MaxHolderBytes)
}
