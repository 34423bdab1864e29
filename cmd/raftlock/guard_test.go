package main

import (
	"sync"
	"syscall"
	"testing"
	"time"
)

// fakeGuardOps is guardOps on a clock the test sets: every timer the loop
// arms is handed to the test on armed, every group signal on sigs.
type fakeGuardOps struct {
	mu    sync.Mutex
	clock int64
	armed chan fakeTimer
	sigs  chan syscall.Signal
}

type fakeTimer struct {
	at int64 // the clock's reading when it is due
	c  chan time.Time
}

func newFakeGuardOps(now int64) *fakeGuardOps {
	return &fakeGuardOps{clock: now, armed: make(chan fakeTimer, 1), sigs: make(chan syscall.Signal, 8)}
}

func (f *fakeGuardOps) now() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.clock
}

func (f *fakeGuardOps) set(now int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.clock = now
}

func (f *fakeGuardOps) after(d time.Duration) (<-chan time.Time, func() bool) {
	t := fakeTimer{at: f.now() + int64(d), c: make(chan time.Time, 1)}
	f.armed <- t
	return t.c, func() bool { return true }
}

func (f *fakeGuardOps) signalGroup(sig syscall.Signal) { f.sigs <- sig }

// guardRun is guardLoop running on fake ops.
type guardRun struct {
	ops    *fakeGuardOps
	orders chan guardMsg
	exited chan int
	end    chan guardExit
}

func startGuardLoop(deadline, now int64) *guardRun {
	r := &guardRun{ops: newFakeGuardOps(now), orders: make(chan guardMsg), exited: make(chan int, 1), end: make(chan guardExit, 1)}
	go func() { r.end <- guardLoop(deadline, r.orders, r.exited, r.ops) }()
	return r
}

// armed returns the timer the loop armed next; it must be due at at.
func (r *guardRun) armed(t *testing.T, at int64) fakeTimer {
	t.Helper()
	tm := <-r.ops.armed
	if tm.at != at {
		t.Fatalf("the guard armed its timer for %d, want %d", tm.at, at)
	}
	return tm
}

// noSignal checks that the loop sent no signal so far.
func (r *guardRun) noSignal(t *testing.T, when string) {
	t.Helper()
	select {
	case sig := <-r.ops.sigs:
		t.Fatalf("%s: the guard sent the group %v", when, sig)
	default:
	}
}

// finish reaps CMD with status and returns the loop's report.
func (r *guardRun) finish(status int) guardExit {
	r.exited <- status
	return <-r.end
}

func TestGuardKillsTheGroupWhenTheDeadlinePassesUnrenewed(t *testing.T) {
	r := startGuardLoop(100, 0)
	tm := r.armed(t, 100)
	r.ops.set(100)
	tm.c <- time.Time{}
	if sig := <-r.ops.sigs; sig != syscall.SIGKILL {
		t.Fatalf("at the deadline the guard sent %v, want SIGKILL", sig)
	}
	if end := r.finish(137); end != (guardExit{status: 137, why: whyDeadline}) {
		t.Fatalf("report %+v, want status 137 why %s", end, whyDeadline)
	}
}

func TestGuardRenewalMovesTheDeadline(t *testing.T) {
	r := startGuardLoop(100, 0)
	r.armed(t, 100)
	r.orders <- guardMsg{kind: "deadline", deadline: 200}
	tm := r.armed(t, 200)
	// The old deadline passes (the timer fires early, say): no kill.
	r.ops.set(150)
	tm.c <- time.Time{}
	tm = r.armed(t, 200)
	r.noSignal(t, "after the renewed deadline's timer fired early")
	r.ops.set(200)
	tm.c <- time.Time{}
	if sig := <-r.ops.sigs; sig != syscall.SIGKILL {
		t.Fatalf("at the renewed deadline the guard sent %v, want SIGKILL", sig)
	}
	if end := r.finish(137); end.why != whyDeadline {
		t.Fatalf("report %+v, want why %s", end, whyDeadline)
	}
}

func TestGuardKillsTheGroupAtOnceWhenExecsPipeCloses(t *testing.T) {
	r := startGuardLoop(1000, 0)
	r.armed(t, 1000)
	close(r.orders)
	if sig := <-r.ops.sigs; sig != syscall.SIGKILL {
		t.Fatalf("when exec's pipe closed the guard sent %v, want SIGKILL", sig)
	}
	if end := r.finish(137); end != (guardExit{status: 137, why: whyExecGone}) {
		t.Fatalf("report %+v, want status 137 why %s", end, whyExecGone)
	}
}

func TestGuardKillsTheGroupWhenItIsTerminated(t *testing.T) {
	r := startGuardLoop(1000, 0)
	r.armed(t, 1000)
	r.orders <- guardMsg{kind: "terminate"}
	if sig := <-r.ops.sigs; sig != syscall.SIGKILL {
		t.Fatalf("a terminated guard sent %v, want SIGKILL", sig)
	}
	if end := r.finish(137); end.why != whySignal {
		t.Fatalf("report %+v, want why %s", end, whySignal)
	}
}

func TestGuardForwardsSignalsAndIgnoresOrdersOnceItKilled(t *testing.T) {
	r := startGuardLoop(100, 0)
	r.armed(t, 100)
	r.orders <- guardMsg{kind: "signal", sig: syscall.SIGTERM}
	if sig := <-r.ops.sigs; sig != syscall.SIGTERM {
		t.Fatalf("forwarded %v, want SIGTERM", sig)
	}
	tm := r.armed(t, 100)
	r.ops.set(100)
	tm.c <- time.Time{}
	if sig := <-r.ops.sigs; sig != syscall.SIGKILL {
		t.Fatalf("at the deadline the guard sent %v, want SIGKILL", sig)
	}
	// Killed stays killed: a late renewal or signal changes nothing, and
	// no timer is armed again.
	r.orders <- guardMsg{kind: "deadline", deadline: 500}
	r.orders <- guardMsg{kind: "signal", sig: syscall.SIGUSR1}
	close(r.orders)
	if end := r.finish(137); end.why != whyDeadline {
		t.Fatalf("report %+v, want why %s", end, whyDeadline)
	}
	r.noSignal(t, "after the kill")
	select {
	case tm := <-r.ops.armed:
		t.Fatalf("the guard armed a timer for %d after it killed the group", tm.at)
	default:
	}
}

func TestGuardReportsCMDsOwnExitWithoutKilling(t *testing.T) {
	r := startGuardLoop(100, 0)
	r.armed(t, 100)
	if end := r.finish(7); end != (guardExit{status: 7, why: whyNone}) {
		t.Fatalf("report %+v, want status 7 why %s", end, whyNone)
	}
	r.noSignal(t, "CMD exited by itself")
}

func TestGuardKillsAtOnceWhenTheDeadlineHasPassedAlready(t *testing.T) {
	r := startGuardLoop(100, 100)
	if sig := <-r.ops.sigs; sig != syscall.SIGKILL {
		t.Fatalf("with the deadline passed the guard sent %v, want SIGKILL", sig)
	}
	if end := r.finish(137); end.why != whyDeadline {
		t.Fatalf("report %+v, want why %s", end, whyDeadline)
	}
}

func TestGuardOrdersRoundTripAndBadOnesAreRefused(t *testing.T) {
	for _, m := range []guardMsg{
		{kind: "deadline", deadline: 123456789012},
		{kind: "deadline", deadline: -5},
		{kind: "signal", sig: syscall.SIGTERM},
		{kind: "signal", sig: syscall.SIGKILL},
	} {
		got, err := parseGuardMsg(m.String())
		if err != nil || got != m {
			t.Errorf("parse(%q) = %+v, %v; want %+v", m.String(), got, err, m)
		}
	}
	for _, line := range []string{"", "deadline", "deadline soon", "signal 0", "signal 65", "signal -1", "terminate 1", "deadline 1 2"} {
		if m, err := parseGuardMsg(line); err == nil {
			t.Errorf("parse(%q) = %+v, want an error", line, m)
		}
	}
}

func TestMonoDeadlineIsOnTheSharedMonotonicClock(t *testing.T) {
	before := monoNow()
	d := monoDeadline(time.Now().Add(time.Hour))
	after := monoNow()
	// Both readings are of CLOCK_MONOTONIC: d is an hour after a moment
	// between before and after, less at most the time the call took.
	lo, hi := before-(after-before)+int64(time.Hour), after+int64(time.Hour)
	if d < lo || d > hi {
		t.Fatalf("monoDeadline(now + 1h) = %d, want within [%d, %d]", d, lo, hi)
	}
}
