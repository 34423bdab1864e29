// Package flaghint makes the flag package's errors say what to write: a
// duration it cannot parse is reported as "parse error", which tells a
// user neither that a unit is needed nor what one looks like.
package flaghint

import (
	"io"
	"strings"
)

// durationHint replaces the flag package's "parse error" of a duration
// flag (the only flag type of these commands that reports it).
const durationHint = "not a duration: write it like 5s, 500ms or 1m30s"

// Text returns s with the flag package's "parse error" replaced by the
// hint.
func Text(s string) string {
	return strings.ReplaceAll(s, ": parse error", ": "+durationHint)
}

// Error returns err with its message passed through Text (nil: nil). The
// result wraps err.
func Error(err error) error {
	if err == nil || !strings.Contains(err.Error(), ": parse error") {
		return err
	}
	return &hinted{err: err}
}

type hinted struct{ err error }

func (h *hinted) Error() string { return Text(h.err.Error()) }
func (h *hinted) Unwrap() error { return h.err }

// Writer returns a writer that passes what it is given through Text, for a
// FlagSet's output (the flag package writes its error in one Write).
func Writer(w io.Writer) io.Writer { return writer{w} }

type writer struct{ w io.Writer }

func (w writer) Write(p []byte) (int, error) {
	if _, err := io.WriteString(w.w, Text(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
