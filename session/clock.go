package session

import (
	"context"
	"time"
)

// Clock is the time source of a client Session: its keepalive cadence, lease,
// jeopardy and grace timers, the deadline of each keepalive, the slices of
// a waiting acquire, the bound of a background release and the queries of
// its watches all run on it. Production code uses RealClock; tests inject a
// fake clock (the package's tests: FakeClock) and advance it instead of
// sleeping. (A caller's ctx deadline is on the real clock, as every ctx's.)
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

// withTimeout returns a context that is done when ctx is, or d from now on
// clock. On the real clock it is context.WithTimeout, whose deadline the
// backend sees (client.Client splits what is left of a call between its
// attempts); on any other clock a timer of that clock ends it.
func withTimeout(ctx context.Context, clock Clock, d time.Duration) (context.Context, context.CancelFunc) {
	if _, real := clock.(realClock); real {
		return context.WithTimeout(ctx, d)
	}
	ctx, cancel := context.WithCancel(ctx)
	t := clock.NewTimer(d)
	go func() {
		select {
		case <-t.C():
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() { t.Stop(); cancel() }
}

// sleep waits d on clock, or until ctx is done (then it returns ctx's error).
func sleep(ctx context.Context, clock Clock, d time.Duration) error {
	t := clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
