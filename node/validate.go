package node

import (
	"time"

	"github.com/raftlock/raftlock/sequencer"
	"github.com/raftlock/raftlock/session"
)

func invalid(format string, args ...any) error {
	return session.Errorf(session.CodeInvalidArgument, format, args...)
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
