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

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/cmd/internal/flaghint"

	"github.com/raftlock/raftlock/sequencer"
	"github.com/raftlock/raftlock/session"
	"github.com/raftlock/raftlock/transport/client"
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

// execHelp is exec's long help.
const execHelp = `exec waits for the lock NAME (as long as it takes, or up to --wait; --wait 0s
tries once), then runs CMD in its own process group with RAFTLOCK_SEQUENCER,
RAFTLOCK_FENCING_TOKEN, RAFTLOCK_LOCK and RAFTLOCK_SESSION set (and
RAFTLOCK_TOKEN, the fencing token's old name, until 0.2.0), forwards SIGINT,
SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 to it, and releases the lock
when it ends. With -n N it takes one of N slots of the semaphore NAME instead
(at most N such CMDs run at once; every holder passes the same N), sets
RAFTLOCK_SLOT, and RAFTLOCK_SEQUENCER names the slot (rl1:p<slot>/<permits>:...).
Without "--", the flags end at NAME and CMD follows it.

CMD is dead before the cluster can give the lock to anyone else: if no keepalive
is acknowledged, CMD gets SIGTERM kill-grace + 0.5s before the lock is lost
(lease end + lock-delay - margin), SIGKILL kill-grace later. A guard process
(raftlock itself) starts CMD and sends CMD's process group SIGKILL at once if
exec dies (kill -9), or 0.5s before the lock is lost if exec is stopped
(SIGSTOP) or starved and cannot do it. So exec needs
--lock-delay of at least --kill-grace + 0.5s + margin (3.8s with the defaults:
--ttl 15s, --kill-grace 3s); it refuses shorter ones and names the values that
work.

Exit status: CMD's own (128+N if signal N ended it); 124 if the lock was lost
while CMD ran (lock_lost: CMD was stopped); 125 if the lock could not be taken
(lock_busy, wait_timeout, unreachable, ...); 126 if CMD could not be started
(not_executable); 127 if CMD was not found (command_not_found); 2 on a usage
error.`

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
	maxHold   time.Duration
	// permits, above 0, takes a slot of a semaphore of that many (exec -n).
	permits uint64
	// unsafe: the raftlock_faults build's switches (exec_unsafe*.go).
	unsafe execUnsafe
}

// maxKillGrace bounds --kill-grace: stopping CMD must fit in a lock-delay.
const maxKillGrace = api.MaxLockDelay

// validate checks the duration flags of exec and elect with the contract's
// validators; cmd names the command in the error.
func (o *execOptions) validate(cmd string) error {
	errs := []error{api.CheckTTL("--ttl", o.ttl), api.CheckLockDelay("--lock-delay", o.lockDelay)}
	if o.permits > 0 {
		mode := sequencer.Exclusive
		if o.shared {
			mode = sequencer.Shared
		}
		if err := api.CheckPermits(o.permits, mode); err != nil {
			errs = append(errs, fmt.Errorf("-n: %w", err))
		}
	}
	if cmd == "exec" {
		errs = append(errs, api.CheckDuration("--kill-grace", o.killGrace, time.Millisecond, maxKillGrace))
	}
	for _, err := range errs {
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
		return "" // forever; as the default, not printed
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

// sessionFlags defines the flags exec and elect share: the session's and
// the wait for the lock.
func sessionFlags(fs *flag.FlagSet) *execOptions {
	o := &execOptions{}
	fs.Var(waitFlag{o}, "wait", "give up if the lock is not ours within `D` (0s: try once; default: wait as long as it takes)")
	fs.DurationVar(&o.ttl, "ttl", api.DefaultTTL, "the session's lease: 1s to 5m")
	fs.DurationVar(&o.lockDelay, "lock-delay", api.DefaultLockDelay, "how long the lock stays unavailable if this session dies: 0s to 1m")
	return o
}

// execCmd runs "raftlock exec [flags] NAME -- CMD [ARGS...]": it holds the
// lock NAME while CMD runs, passes the sequencer in RAFTLOCK_SEQUENCER,
// forwards signals to CMD, stops CMD if the lock is lost, releases the lock
// when CMD ends and exits with CMD's status.
func (c *cli) execCmd(fs *flag.FlagSet) runFunc {
	o := sessionFlags(fs)
	fs.BoolVar(&o.shared, "shared", false, "take the lock in shared mode")
	fs.DurationVar(&o.killGrace, "kill-grace", DefaultKillGrace, "time between SIGTERM and SIGKILL when CMD must stop")
	fs.StringVar(&o.value, "value", "", "a value `V` to set on the lock (default: host:pid)")
	fs.DurationVar(&o.maxHold, "max-hold", 0, "the grant's hold limit `D` (1s to 24h; 0: none): CMD is stopped before the cluster revokes the lock")
	o.unsafe.addFlags(fs)
	fs.Uint64Var(&o.permits, "n", 0, "take one of `N` slots of the semaphore NAME (1 to 256; every holder must pass the same N; default: the plain lock)")
	return func(ctx context.Context, pos []string) error {
		if o.maxHold != 0 {
			if err := api.CheckDuration("--max-hold", o.maxHold, api.MinMaxHold, api.MaxMaxHold); err != nil {
				return badFlag("exec", err)
			}
		}
		return c.exec(ctx, o, pos[0], pos[1:])
	}
}

// exec runs CMD (argv) under the lock name.
func (c *cli) exec(ctx context.Context, o *execOptions, name string, argv []string) error {
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
	cl, err := c.longClient(ctx)
	if err != nil {
		return noLock(err)
	}
	defer cl.CloseIdleConnections()

	s, l, err := c.takeLock(ctx, cl, "exec", name, o)
	if err != nil {
		return noLock(err)
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

// noLock is exec's error when it could not take the lock: exit status 125,
// unless err is a usage error (2).
func noLock(err error) error {
	var ue *usageError
	if errors.As(err, &ue) {
		return err
	}
	return &exitStatus{code: exitNoLock, err: err}
}

// splitExecArgs parses "[flags] NAME [flags] -- CMD [ARGS...]" into NAME,
// CMD and ARGS; without "--", flags end at NAME and CMD follows it.
func splitExecArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	for i, a := range args {
		if a != "--" {
			continue
		}
		pos, err := parse(fs, args[:i], 1, 1)
		if err != nil {
			return nil, err
		}
		if len(args[i+1:]) == 0 {
			return nil, usagef("exec", "missing CMD after --")
		}
		return append(pos, args[i+1:]...), nil
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, usagef("exec", "%v", flaghint.Error(err))
	}
	if len(fs.Args()) < 2 {
		return nil, usagef("exec", "want NAME -- CMD [ARGS...]")
	}
	return fs.Args(), nil
}

// takeLock opens a session and takes the lock as --wait says; cmd (exec,
// elect) names the command in its errors.
func (c *cli) takeLock(ctx context.Context, cl *client.Client, cmd, name string, o *execOptions) (*session.Session, *session.Lock, error) {
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
	s, err := session.Open(octx, cl, session.TTL(o.ttl), session.LockDelay(delay), session.Name("raftlock "+cmd+" "+name))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: open session: %w", cmd, err)
	}
	mode := sequencer.Exclusive
	if o.shared {
		mode = sequencer.Shared
	}
	opts := []session.LockOption{session.Value(o.value)}
	if o.permits > 0 {
		opts = append(opts, session.Permits(o.permits))
	}
	if o.maxHold > 0 {
		opts = append(opts, session.MaxHold(o.maxHold))
	}
	var l *session.Lock
	switch {
	case o.waitSet && o.wait == 0:
		if mode == sequencer.Shared {
			l, err = s.TryRLock(octx, name, opts...)
		} else {
			l, err = s.TryLock(octx, name, opts...)
		}
	default:
		wctx, cancel := ctx, context.CancelFunc(func() {})
		if o.waitSet {
			wctx, cancel = context.WithTimeout(ctx, o.wait)
		}
		if mode == sequencer.Shared {
			l, err = s.RLock(wctx, name, opts...)
		} else {
			l, err = s.Lock(wctx, name, opts...)
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
		return nil, nil, fmt.Errorf("%s: lock %s: %w", cmd, name, err)
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
	return usagef("exec", "--lock-delay %v is too short for --kill-grace %v: CMD must be dead before the cluster can give the lock to someone else "+
		"(lease end + lock-delay), and stopping it takes kill-grace + %v from the moment the lease ends without a keepalive; %s",
		lockDelay, killGrace, reapBudget, advice)
}

// runLocked runs CMD while l is held and returns its exit status.
func (c *cli) runLocked(s *session.Session, l *session.Lock, o *execOptions, argv []string) error {
	env := os.Environ()
	// CMD's RAFTLOCK_FENCING_TOKEN is the fencing token, and so is its
	// RAFTLOCK_TOKEN (the old name, until 0.2.0): an ACL secret given as
	// RAFTLOCK_TOKEN moves to RAFTLOCK_ACL_TOKEN, where a raftlock that
	// CMD runs finds it (aclTokenFromEnv).
	if acl, _ := aclTokenFromEnv(os.Getenv); acl != "" && os.Getenv("RAFTLOCK_ACL_TOKEN") == "" {
		env = append(env, "RAFTLOCK_ACL_TOKEN="+acl)
	}
	token := strconv.FormatUint(uint64(l.Token()), 10)
	env = append(env,
		"RAFTLOCK_SEQUENCER="+l.Sequencer().String(),
		"RAFTLOCK_FENCING_TOKEN="+token,
		"RAFTLOCK_TOKEN="+token,
		"RAFTLOCK_LOCK="+l.Name(),
		"RAFTLOCK_SESSION="+s.ID())
	if l.Permits() > 0 {
		env = append(env, "RAFTLOCK_SLOT="+strconv.FormatUint(l.Slot(), 10))
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	// CMD runs under a guard process that outlives exec and SIGKILLs CMD's
	// process group unless exec keeps renewing its deadline (exec_guard.go).
	g, err := o.unsafe.startGuard(argv, env, os.Stdin, c.stdout, c.stderr, guardDeadline(s))
	if err != nil {
		return err
	}
	defer g.close()
	if c.guardStarted != nil {
		c.guardStarted(g.pid)
	}
	renew := time.NewTicker(renewEvery(s.TTL()))
	defer renew.Stop()
	signalGroup := g.signal

	var (
		lost      = l.Lost()
		requested = l.ReleaseRequested()
		events    = s.Events()
		stopAt    <-chan time.Time // fires stopLead before the lock is lost
		stopTimer *time.Timer
		killTimer <-chan time.Time
		stopped   bool           // CMD was stopped: the lock is (about to be) lost
		final     *session.Event // the session's Expired event, once read
	)
	// stop stops CMD at once, then says why.
	stop := func(why func() string) {
		if stopped {
			return
		}
		stopped = true
		if g.missed() {
			// Too late for SIGTERM: exec was stopped or starved, and the
			// guard has sent SIGKILL at its deadline already (and if its
			// timer is late, this order does it).
			signalGroup(syscall.SIGKILL)
			fmt.Fprintf(c.stderr, "raftlock: lock_lost: %s; %s\n", why(), missedDeadline(argv[0]))
			return
		}
		signalGroup(syscall.SIGTERM)
		killTimer = time.After(o.killGrace)
		fmt.Fprintf(c.stderr, "raftlock: lock_lost: %s; stopping %s (SIGTERM, SIGKILL after %v)\n", why(), argv[0], o.killGrace)
	}
	disarm := func() {
		if stopTimer != nil {
			stopTimer.Stop()
			stopTimer, stopAt = nil, nil
		}
	}
	for {
		select {
		case end, ok := <-g.exited:
			disarm()
			switch {
			case !ok:
				g.killGroup()
				return &exitStatus{code: exitNoLock, err: &codeError{code: "guard_died",
					err: fmt.Errorf("exec: CMD's guard died before CMD ended; CMD's process group was sent SIGKILL")}}
			case stopped:
				return &exitStatus{code: exitLockLost}
			case end.why == whyDeadline:
				return &exitStatus{code: exitLockLost, err: &codeError{code: "lock_lost", err: fmt.Errorf(
					"session %s: no keepalive acknowledged in time; %s", sessionRef(s), missedDeadline(argv[0]))}}
			case end.why == whySignal:
				fmt.Fprintf(c.stderr, "raftlock: exec: CMD's guard got a termination signal and sent %s's process group SIGKILL\n", argv[0])
			}
			if end.status != 0 {
				return &exitStatus{code: end.status}
			}
			return nil
		case <-renew.C:
			if !stopped {
				// A failed write means the guard is gone: g.exited says so.
				_ = g.renew(s, l)
			}
		case sig := <-sigs:
			signalGroup(sig.(syscall.Signal))
		case <-requested:
			requested = nil
			if r, ok := l.RequestedBy(); ok {
				fmt.Fprintf(c.stderr, "raftlock: release_requested: lock %s (token %d): session %s %q (holder %s) asks for it; %s keeps running\n",
					l.Name(), l.Token(), r.BySessionHandle, r.BySessionName, r.ByHolder, argv[0])
			}
		case <-lost:
			lost = nil
			stop(func() string {
				if err := l.Err(); err != nil {
					return err.Error() // revoked: by an operator (and why), or its hold limit
				}
				return fmt.Sprintf("lock %s is lost: %s", l.Name(), lossReason(s, final, events))
			})
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
			case session.Expired:
				final = &ev
			}
		case <-stopAt:
			stopAt, stopTimer = nil, nil
			stop(func() string {
				return fmt.Sprintf("session %s: no keepalive acknowledged, and the lock is lost in %v", sessionRef(s), stopLead(o.killGrace))
			})
		case <-killTimer:
			killTimer = nil
			signalGroup(syscall.SIGKILL)
		}
	}
}

// sessionRef names s in a message: by its handle, never its id (a secret
// capability, and stderr goes to logs).
func sessionRef(s *session.Session) string { return "handle:" + s.Handle() }

// lossReason says why the locks of s were lost, once they were: the
// session is in jeopardy (no keepalive acknowledged since its lease ended),
// closed, or expired. An expired session's final event (final, or else
// read from events, up to a second for it to come) tells more: a session
// the cluster reported gone before its lease ended (as the client counts
// it, less 1% for clock drift) was closed by someone, not expired, since
// the cluster expires a session only once its lease has run out.
func lossReason(s *session.Session, final *session.Event, events <-chan session.Event) string {
	id := sessionRef(s)
	switch s.State() {
	case session.Jeopardy:
		return fmt.Sprintf("session %s: no keepalive acknowledged since its lease ended", id)
	case session.Closed:
		return fmt.Sprintf("session %s closed", id)
	case session.Safe:
		return "released"
	}
	timeout := time.After(time.Second)
	for final == nil {
		select {
		case ev, ok := <-events:
			if !ok {
				return fmt.Sprintf("session %s expired", id)
			}
			if ev.State == session.Expired {
				final = &ev
			}
		case <-timeout:
			return fmt.Sprintf("session %s expired", id)
		}
	}
	ttl, delay := s.TTL(), s.LockDelay()
	leaseEnd := s.LostDeadline().Add(session.LostMargin(ttl, delay) - delay)
	switch {
	case !errors.Is(final.Err, api.ErrSessionNotFound):
		return fmt.Sprintf("session %s expired: no keepalive acknowledged within its grace period", id)
	case final.At.Before(leaseEnd.Add(-ttl / 100)):
		return fmt.Sprintf("session %s closed (the cluster reported it gone while its lease still ran)", id)
	default:
		return fmt.Sprintf("session %s expired (the cluster reported it gone)", id)
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
