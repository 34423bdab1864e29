package session

import "time"

// Clock is the time source of a client Session: its keepalive cadence, lease,
// jeopardy and grace timers and its retry backoff all run on it. Production
// code uses RealClock; tests inject a fake clock (the package's tests: FakeClock) and advance it instead of
// sleeping.
//
// Durations are computed on the times Now returns; with RealClock those carry
// Go's monotonic reading, so lease arithmetic is immune to wall-clock steps.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer that fires once, d from now (at once if d<=0).
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer of a Clock, with time.Timer's Go 1.23+
// semantics: after Stop or Reset returns, no stale value is received from C.
type Timer interface {
	// C is the channel on which the firing time is delivered.
	C() <-chan time.Time
	// Stop stops the timer; it reports whether the timer was pending.
	Stop() bool
	// Reset re-arms the timer to fire d from now; it reports whether the
	// timer was pending.
	Reset(d time.Duration) bool
}

// RealClock returns the Clock of the running process (time.Now, time.Timer).
func RealClock() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time                 { return time.Now() }
func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }
