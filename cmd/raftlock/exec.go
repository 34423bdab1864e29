package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/raftlock/raftlock/session/api"

	"github.com/raftlock/raftlock/sequencer"
	"github.com/raftlock/raftlock/session"
	"github.com/raftlock/raftlock/transport"
)

// Exit statuses of exec when CMD did not run to completion with the lock.
const (
	exitLockLost = 124 // the lock was lost while CMD ran; CMD was stopped
	exitNoLock   = 125 // raftlock could not get the lock or could not run CMD
	exitNoExec   = 126 // CMD was found but could not be started
	exitNotFound = 127 // CMD was not found
)

// DefaultKillGrace is how long exec waits after SIGTERM before SIGKILL.
const DefaultKillGrace = 3 * time.Second

// reapBudget is the time exec allows between SIGKILL and the moment the
// lock is lost (session.LostDeadline) for the kernel to end CMD's process
// group and for exec to reap it.
const reapBudget = 500 * time.Millisecond

// forwarded are the signals exec passes on to CMD.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// exitStatus is an error that sets the process's exit status.
type exitStatus struct {
	code int
	err  error // printed as "raftlock: <code>: <message>" unless nil
}

func (e *exitStatus) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitStatus) Unwrap() error { return e.err }

// execOptions are exec's flags.
type execOptions struct {
	shared    bool
	wait      time.Duration
	waitSet   bool
	ttl       time.Duration
	lockDelay time.Duration
	killGrace time.Duration
	value     string
}

// maxKillGrace bounds --kill-grace: stopping CMD must fit in a lock-delay.
const maxKillGrace = api.MaxLockDelay

// validate checks the duration flags of exec and elect with the contract's
// validators; cmd names the command in the error.
func (o *execOptions) validate(cmd string) error {
	for _, err := range []error{
		api.CheckTTL("--ttl", o.ttl),
		api.CheckLockDelay("--lock-delay", o.lockDelay),
		api.CheckDuration("--kill-grace", o.killGrace, time.Millisecond, maxKillGrace),
	} {
		if err != nil {
			return badFlag(cmd, err)
		}
	}
	return nil
}

// waitFlag is --wait: absent means wait as long as it takes; 0s means try
// once.
type waitFlag struct{ o *execOptions }

func (w waitFlag) String() string {
	if w.o == nil || !w.o.waitSet {
		return "forever"
	}
	return w.o.wait.String()
}

func (w waitFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return fmt.Errorf("want a non-negative duration like 30s")
	}
	w.o.wait, w.o.waitSet = d, true
	return nil
}

func (c *cli) execFlags() (*flag.FlagSet, *execOptions) {
	o := &execOptions{}
	fs := c.flags("exec")
	fs.BoolVar(&o.shared, "shared", false, "take the lock in shared mode")
	fs.Var(waitFlag{o}, "wait", "give up if the lock is not ours within this time (default: wait as long as it takes; 0s: try once)")
	fs.DurationVar(&o.ttl, "ttl", api.DefaultTTL, "the session's lease")
	fs.DurationVar(&o.lockDelay, "lock-delay", api.DefaultLockDelay, "how long the lock stays unavailable if this session dies")
	fs.DurationVar(&o.killGrace, "kill-grace", DefaultKillGrace, "time between SIGTERM and SIGKILL when CMD must stop")
	fs.StringVar(&o.value, "value", "", "a value to set on the lock (default: host and pid)")
	return fs, o
}

// execCmd runs "raftlock exec [flags] NAME -- CMD [ARGS...]": it holds the
// lock NAME while CMD runs, passes the sequencer in RAFTLOCK_SEQUENCER,
// forwards signals to CMD, stops CMD if the lock is lost, releases the lock
// when CMD ends and exits with CMD's status.
func (c *cli) execCmd(ctx context.Context, args []string) error {
	fs, o := c.execFlags()
	name, argv, err := splitExecArgs(fs, args)
	if err != nil {
		return err
	}
	if err := o.validate("exec"); err != nil {
		return err
	}
	if err := checkStopWindow(o.ttl, o.lockDelay, o.killGrace); err != nil {
		return err
	}
	if o.value == "" {
		host, _ := os.Hostname()
		o.value = host + ":" + strconv.Itoa(os.Getpid())
	}
	cl, err := transport.NewClient(c.addrs)
	if err != nil {
		return usagef("--addr: %v", err)
	}
	defer cl.CloseIdleConnections()

	s, l, err := c.takeLock(ctx, cl, name, o)
	if err != nil {
		return &exitStatus{code: exitNoLock, err: err}
	}
	// From here on the child's fate decides; an interrupt is forwarded to
	// it rather than ending raftlock.
	bg := context.WithoutCancel(ctx)
	defer func() {
		ctx, cancel := context.WithTimeout(bg, 10*time.Second)
		defer cancel()
		_ = l.Unlock(ctx)
		_ = s.Close(ctx)
	}()
	return c.runLocked(s, l, o, argv)
}

// splitExecArgs parses "[flags] NAME [flags] -- CMD [ARGS...]"; without
// "--", flags end at NAME and CMD follows it.
func splitExecArgs(fs *flag.FlagSet, args []string) (string, []string, error) {
	for i, a := range args {
		if a != "--" {
			continue
		}
		pos, err := parse(fs, args[:i], 1, 1)
		if err != nil {
			return "", nil, err
		}
		if len(args[i+1:]) == 0 {
			return "", nil, usagef("exec: missing CMD after --")
		}
		return pos[0], args[i+1:], nil
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return "", nil, err
		}
		return "", nil, usagef("exec: %v", err)
	}
	rest := fs.Args()
	if len(rest) < 2 {
		return "", nil, usagef("exec: want NAME -- CMD [ARGS...]")
	}
	return rest[0], rest[1:], nil
}

// takeLock opens a session and takes the lock as --wait says.
func (c *cli) takeLock(ctx context.Context, cl *transport.Client, name string, o *execOptions) (*session.Session, *session.Lock, error) {
	octx := ctx
	if c.timeout > 0 {
		var cancel context.CancelFunc
		octx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	delay := o.lockDelay
	if delay == 0 {
		delay = api.NoLockDelay
	}
	s, err := session.Open(octx, cl, session.TTL(o.ttl), session.LockDelay(delay), session.Name("raftlock exec "+name))
	if err != nil {
		return nil, nil, fmt.Errorf("exec: open session: %w", err)
	}
	mode := sequencer.Exclusive
	if o.shared {
		mode = sequencer.Shared
	}
	var l *session.Lock
	switch {
	case o.waitSet && o.wait == 0:
		if mode == sequencer.Shared {
			l, err = s.TryRLock(octx, name, session.Value(o.value))
		} else {
			l, err = s.TryLock(octx, name, session.Value(o.value))
		}
	default:
		wctx, cancel := ctx, context.CancelFunc(func() {})
		if o.waitSet {
			wctx, cancel = context.WithTimeout(ctx, o.wait)
		}
		if mode == sequencer.Shared {
			l, err = s.RLock(wctx, name, session.Value(o.value))
		} else {
			l, err = s.Lock(wctx, name, session.Value(o.value))
		}
		cancel()
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = api.Errorf(api.CodeWaitTimeout, "lock %s was not free within --wait %v", name, o.wait)
		}
	}
	if err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = s.Close(cctx)
		return nil, nil, fmt.Errorf("exec: lock %s: %w", name, err)
	}
	return s, l, nil
}

// stopLead is how long before the session's LostDeadline exec starts
// stopping CMD: SIGTERM then, SIGKILL killGrace later, and reapBudget for
// the kernel, so that CMD is dead before the lock can be granted to anyone
// else.
func stopLead(killGrace time.Duration) time.Duration { return killGrace + reapBudget }

// checkStopWindow refuses settings under which exec could not stop CMD in
// time without stopping it while the session is still safe: stopping
// starts stopLead before the lock is lost, and that must not come before
// the lease ends (jeopardy), i.e. lockDelay − LostMargin ≥ stopLead. The
// error names the safe values of --lock-delay and --kill-grace.
func checkStopWindow(ttl, lockDelay, killGrace time.Duration) error {
	lead := stopLead(killGrace)
	if lockDelay-session.LostMargin(ttl, lockDelay) >= lead {
		return nil
	}
	minDelay := (lead + 99*time.Millisecond).Truncate(100 * time.Millisecond)
	for minDelay-session.LostMargin(ttl, minDelay) < lead {
		minDelay += 100 * time.Millisecond
	}
	advice := fmt.Sprintf("use --lock-delay %v or more", minDelay)
	if minDelay > api.MaxLockDelay {
		advice = fmt.Sprintf("lower --kill-grace (no lock-delay up to the %v limit is long enough)", api.MaxLockDelay)
	}
	if maxGrace := (lockDelay - session.LostMargin(ttl, lockDelay) - reapBudget).Truncate(100 * time.Millisecond); maxGrace > 0 {
		advice += fmt.Sprintf(", or --kill-grace %v or less", maxGrace)
	}
	return usagef("exec: --lock-delay %v is too short for --kill-grace %v: CMD must be dead before the cluster can give the lock to someone else "+
		"(lease end + lock-delay), and stopping it takes kill-grace + %v from the moment the lease ends without a keepalive; %s",
		lockDelay, killGrace, reapBudget, advice)
}

// runLocked runs CMD while l is held and returns its exit status.
func (c *cli) runLocked(s *session.Session, l *session.Lock, o *execOptions, argv []string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, c.stdout, c.stderr
	cmd.Env = append(os.Environ(),
		"RAFTLOCK_SEQUENCER="+l.Sequencer().String(),
		"RAFTLOCK_TOKEN="+strconv.FormatUint(uint64(l.Token()), 10),
		"RAFTLOCK_LOCK="+l.Name(),
		"RAFTLOCK_SESSION="+s.ID())
	// Its own process group, so that stopping CMD stops its children too
	// and a terminal's ^C reaches it once, through us.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}

	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	if err := cmd.Start(); err != nil {
		code := exitNoExec
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = exitNotFound
		}
		return &exitStatus{code: code, err: fmt.Errorf("exec: start %s: %w", argv[0], err)}
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	signalGroup := func(sig syscall.Signal) { _ = syscall.Kill(-cmd.Process.Pid, sig) }

	var (
		lost      = l.Lost()
		events    = s.Events()
		stopAt    <-chan time.Time // fires stopLead before the lock is lost
		stopTimer *time.Timer
		killTimer <-chan time.Time
		lostWhy   error
	)
	stop := func(why error) {
		if lostWhy != nil {
			return
		}
		lostWhy = why
		fmt.Fprintf(c.stderr, "raftlock: lock_lost: %v; stopping %s (SIGTERM, SIGKILL after %v)\n", why, argv[0], o.killGrace)
		signalGroup(syscall.SIGTERM)
		killTimer = time.After(o.killGrace)
	}
	disarm := func() {
		if stopTimer != nil {
			stopTimer.Stop()
			stopTimer, stopAt = nil, nil
		}
	}
	for {
		select {
		case err := <-exited:
			disarm()
			status := childStatus(err)
			if lostWhy != nil {
				return &exitStatus{code: exitLockLost}
			}
			if status != 0 {
				return &exitStatus{code: status}
			}
			return nil
		case sig := <-sigs:
			signalGroup(sig.(syscall.Signal))
		case <-lost:
			lost = nil
			stop(fmt.Errorf("lock %s is lost (session %s)", l.Name(), s.State()))
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			switch ev.State {
			case session.Jeopardy:
				// Armed on the lease as it stands: a keepalive acknowledged
				// later makes the session safe again and disarms it.
				if stopTimer == nil {
					stopTimer = time.NewTimer(time.Until(s.LostDeadline().Add(-stopLead(o.killGrace))))
					stopAt = stopTimer.C
				}
			case session.Safe:
				disarm()
			}
		case <-stopAt:
			stopAt, stopTimer = nil, nil
			stop(fmt.Errorf("session %s: no keepalive acknowledged, and the lock is lost in %v", s.ID(), stopLead(o.killGrace)))
		case <-killTimer:
			killTimer = nil
			signalGroup(syscall.SIGKILL)
		}
	}
}

// childStatus turns cmd.Wait's error into an exit status: the child's
// code, or 128+signal when a signal ended it.
func childStatus(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return exitNoExec
}
