package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// guardCommand is the hidden argument with which exec re-executes its own
// binary as CMD's guard: "raftlock __exec-guard CMD [ARGS...]" (main and
// the test binary's TestMain dispatch it before anything else).
const guardCommand = "__exec-guard"

// The guard's pipes, as the guard sees them: exec's orders come in on
// guardCtlFD, the guard's reports go out on guardReportFD.
const (
	guardCtlFD    = 3
	guardReportFD = 4
)

// Why the guard killed CMD's process group, in its exit report.
const (
	whyNone     = "-"         // it did not: CMD ended by itself or by exec's signals
	whyDeadline = "deadline"  // exec did not renew the deadline in time (frozen, starved)
	whyExecGone = "exec_gone" // exec's pipe closed (exec died: SIGKILL, a crash)
	whySignal   = "signal"    // the guard itself was told to terminate
)

// The guard's protocol: one line per message, space-separated.
//
// From exec to the guard:
//
//	deadline NS   CMD may run until CLOCK_MONOTONIC reads NS (nanoseconds)
//	signal N      send signal N to CMD's process group
//
// From the guard to exec:
//
//	started PID           CMD runs as PID, leading its own process group
//	start_failed KIND MSG CMD could not be started (KIND: not_found,
//	                      no_such_file, not_executable, late)
//	exited STATUS WHY     CMD was reaped with STATUS (128+N for signal N);
//	                      WHY says whether and why the guard killed it
//
// The deadline is a reading of CLOCK_MONOTONIC, which every process on the
// machine shares and no wall-clock step moves. A remaining duration would
// be wrong by however long exec stalled between computing it and writing
// it; an absolute reading is not.
type guardMsg struct {
	kind     string // "deadline", "signal", or "terminate" (the guard's own, never on the wire)
	deadline int64  // CLOCK_MONOTONIC nanoseconds
	sig      syscall.Signal
}

// String is the message's line, without the newline.
func (m guardMsg) String() string {
	if m.kind == "signal" {
		return "signal " + strconv.Itoa(int(m.sig))
	}
	return "deadline " + strconv.FormatInt(m.deadline, 10)
}

// parseGuardMsg parses one line from exec.
func parseGuardMsg(line string) (guardMsg, error) {
	f := strings.Fields(line)
	if len(f) != 2 {
		return guardMsg{}, fmt.Errorf("guard: bad order %q: want \"deadline NS\" or \"signal N\"", line)
	}
	n, err := strconv.ParseInt(f[1], 10, 64)
	switch {
	case err != nil:
		return guardMsg{}, fmt.Errorf("guard: bad order %q: %w", line, err)
	case f[0] == "deadline":
		return guardMsg{kind: "deadline", deadline: n}, nil
	case f[0] == "signal" && n > 0 && n < 65:
		return guardMsg{kind: "signal", sig: syscall.Signal(n)}, nil
	}
	return guardMsg{}, fmt.Errorf("guard: bad order %q: want \"deadline NS\" or \"signal N\" (1 to 64)", line)
}

// monoNow reads CLOCK_MONOTONIC in nanoseconds: the clock the guard's
// deadlines are on.
func monoNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("clock_gettime(CLOCK_MONOTONIC): " + err.Error())
	}
	return ts.Nano()
}

// monoDeadline turns t, a time with a monotonic reading, into the guard's
// deadline: CLOCK_MONOTONIC as it will read at t. Both clocks are read
// together, so a stall after this call does not move the deadline.
func monoDeadline(t time.Time) int64 { return monoNow() + int64(time.Until(t)) }

// guardOps is what the guard's loop does to the world: read the clock, arm
// a timer, signal CMD's process group.
type guardOps interface {
	now() int64
	after(d time.Duration) (<-chan time.Time, func() bool)
	signalGroup(sig syscall.Signal)
}

// guardExit is how CMD ended: its status, and why the guard killed it
// (whyNone if it did not).
type guardExit struct {
	status int
	why    string
}

// guardLoop is the guard's dead-man switch, from CMD's start until it is
// reaped: it forwards exec's signals to CMD's group, and SIGKILLs the group
// when orders closes (exec died) or the deadline passes without a renewal
// (exec frozen or starved). A group killed stays killed: later orders are
// ignored. It returns once exited delivers CMD's status.
func guardLoop(deadline int64, orders <-chan guardMsg, exited <-chan int, ops guardOps) guardExit {
	why := whyNone
	kill := func(reason string) {
		if why == whyNone {
			why = reason
			ops.signalGroup(syscall.SIGKILL)
		}
	}
	for {
		var (
			timer <-chan time.Time
			stop  = func() bool { return false }
		)
		if why == whyNone {
			if left := deadline - ops.now(); left <= 0 {
				kill(whyDeadline)
			} else {
				timer, stop = ops.after(time.Duration(left))
			}
		}
		select {
		case status := <-exited:
			stop()
			return guardExit{status: status, why: why}
		case m, ok := <-orders:
			stop()
			switch {
			case !ok:
				orders = nil
				kill(whyExecGone)
			case why != whyNone:
			case m.kind == "deadline":
				deadline = m.deadline
			case m.kind == "signal":
				ops.signalGroup(m.sig)
			case m.kind == "terminate":
				kill(whySignal)
			}
		case <-timer:
			// Checked again at the top: the timer may fire early or the
			// clocks may disagree by a tick.
		}
	}
}

// realGuardOps are guardOps on the real clock, for the group led by pid.
type realGuardOps struct{ pid int }

func (realGuardOps) now() int64 { return monoNow() }

func (realGuardOps) after(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}

func (o realGuardOps) signalGroup(sig syscall.Signal) { _ = syscall.Kill(-o.pid, sig) }

// readOrders reads exec's orders from r until it closes or sends a line
// that does not parse (a broken exec: the guard kills CMD), then closes the
// channel. A bad line is reported on stderr.
func readOrders(r io.Reader, stderr io.Writer) <-chan guardMsg {
	orders := make(chan guardMsg)
	go func() {
		defer close(orders)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			m, err := parseGuardMsg(sc.Text())
			if err != nil {
				fmt.Fprintf(stderr, "raftlock: %v\n", err)
				return
			}
			orders <- m
		}
	}()
	return orders
}

// guardMain is the guard process: "raftlock __exec-guard CMD [ARGS...]",
// started by exec with its orders on fd 3 and its reports on fd 4, and its
// environment the one CMD gets. It waits for the first deadline, becomes
// the subreaper of CMD's tree (Linux), starts CMD in a process group of
// its own (with PR_SET_PDEATHSIG=SIGKILL on Linux, so CMD dies with the
// guard's thread that started it) and runs guardLoop. If that killed CMD's
// group, it also kills the orphans re-parented to it. Then it reports how
// CMD ended. It returns its exit status.
func guardMain(argv []string) int {
	var st syscall.Stat_t
	if len(argv) == 0 || syscall.Fstat(guardCtlFD, &st) != nil || syscall.Fstat(guardReportFD, &st) != nil {
		fmt.Fprintln(os.Stderr, "raftlock: "+guardCommand+" is exec's internal guard, not a command")
		return exitNoLock
	}
	ctl, report := os.NewFile(guardCtlFD, "exec-orders"), os.NewFile(guardReportFD, "exec-reports")
	// Not for CMD: it must not hold exec's orders open, nor the reports.
	syscall.CloseOnExec(guardCtlFD)
	syscall.CloseOnExec(guardReportFD)
	// The guard is not in the terminal's process group (exec started it in
	// its own), but a signal sent to it by pid must not leave CMD running
	// unguarded: a termination signal kills CMD's group first; a stop
	// from the terminal is refused (SIGSTOP cannot be, see the docs).
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU)

	orders := readOrders(ctl, os.Stderr)
	first, ok := <-orders
	if !ok || first.kind != "deadline" {
		return exitNoLock // exec is gone before CMD started
	}
	if first.deadline <= monoNow() {
		fmt.Fprintln(report, "start_failed late the deadline passed before CMD could start")
		return 0
	}
	if err := becomeSubreaper(); err != nil {
		fmt.Fprintf(os.Stderr, "raftlock: guard: %v (orphans of CMD's tree go to PID 1, out of the guard's reach)\n", err)
	}
	started := make(chan error, 1)
	exited := make(chan int, 1)
	var pid int
	go func() {
		// PR_SET_PDEATHSIG fires when the thread that forked CMD exits,
		// not the process (golang/go#27505): this goroutine keeps its
		// thread for CMD's whole life, and never unlocks it.
		runtime.LockOSThread()
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		cmd.SysProcAttr = childSysProcAttr()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		pid = cmd.Process.Pid
		started <- nil
		exited <- childStatus(cmd.Wait())
	}()
	if err := <-started; err != nil {
		kind, msg := classifyStart(err)
		fmt.Fprintf(report, "start_failed %s %s\n", kind, msg)
		return 0
	}
	fmt.Fprintf(report, "started %d\n", pid)

	// Orphans re-parented to the guard are its to reap while CMD runs.
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	go func() {
		for range chld {
			reapOrphans(pid)
		}
	}()

	ops := realGuardOps{pid: pid}
	orders = mergeTermSignals(orders, sigs)
	end := guardLoop(first.deadline, orders, exited, ops)
	if end.why != whyNone {
		// The orphans that left CMD's group (setsid) go too.
		sweepOrphans()
	}
	fmt.Fprintf(report, "exited %d %s\n", end.status, end.why)
	return 0
}

// mergeTermSignals passes orders on, and adds a "terminate" order when the
// guard gets a termination signal; stop signals are dropped.
func mergeTermSignals(orders <-chan guardMsg, sigs <-chan os.Signal) <-chan guardMsg {
	out := make(chan guardMsg)
	go func() {
		defer close(out)
		for {
			select {
			case m, ok := <-orders:
				if !ok {
					return
				}
				out <- m
			case sig := <-sigs:
				switch sig {
				case syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU:
				default:
					out <- guardMsg{kind: "terminate"}
				}
			}
		}
	}()
	return out
}

// classifyStart names why CMD could not start, for exec's startFailure.
func classifyStart(err error) (kind, msg string) {
	var pe *os.PathError
	switch {
	case errors.Is(err, exec.ErrNotFound):
		return "not_found", "not found in $PATH"
	case errors.Is(err, os.ErrNotExist):
		return "no_such_file", "no such file"
	case errors.As(err, &pe):
		err = pe.Err
	}
	return "not_executable", err.Error()
}
