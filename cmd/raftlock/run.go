package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/raftlock/raftlock/session/api"

	"github.com/raftlock/raftlock/session"
	"github.com/raftlock/raftlock/transport"
)

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

const defaultAddr = "127.0.0.1:7001"

const usageText = `usage: raftlock [global flags] COMMAND [ARGS]

Global flags:
  --addr host:port[,host:port...]  nodes to talk to (env RAFTLOCK_ADDR; default 127.0.0.1:7001)
  --timeout D                      give up after D (default 30s; 0s: never; not
                                   negative); a waiting acquire gets its --wait on top
  --json                           print the API's JSON instead of text

Commands:
  status                           leader, term, members
  lock get NAME                    state of one lock
  lock list [PREFIX]               locks whose names start with PREFIX
  lock watch NAME                  print the lock's state, then every change (blocking
                                   queries, no polling) until interrupted
  sequencer check SEQUENCER        is the sequencer still current? (exit 1,
                                   stale_sequencer, if it is not)
  session open [--ttl 15s] [--lock-delay 10s] [--name N]
                                   open a session; prints its id (--ttl 1s to 5m;
                                   --lock-delay 0s to 1m, 0s: none)
  session keepalive ID             extend a session's lease
  session get ID                   describe a session
  session close ID                 close a session (releases its locks at once)
  acquire --session ID [--holder H] [--shared] [--wait 0s] [--value V] NAME
                                   take a lock; prints token, sequencer and holder
                                   (a random holder id unless --holder; --wait 0s
                                   to 10m, 0s: try once)
  release --session ID --holder H NAME
                                   give a lock up
  exec [--shared] [--wait D] [--ttl 15s] [--lock-delay 10s] [--kill-grace 3s] [--value V]
       NAME -- CMD [ARGS...]
                                   run CMD while holding NAME (see below)
  elect [--ttl 15s] [--lock-delay 10s] NAME VALUE
                                   campaign to lead NAME with VALUE (e.g. your address);
                                   prints when elected, holds until interrupted (then
                                   resigns); exits 1 if the leadership is lost
  leader [--observe] NAME          the current leader of NAME (value, token, sequencer);
                                   --observe prints each new leader until interrupted
  help                             this text

exec waits for the lock (as long as it takes, or up to --wait; --wait 0s tries once),
then runs CMD in its own process group with RAFTLOCK_SEQUENCER, RAFTLOCK_TOKEN,
RAFTLOCK_LOCK and RAFTLOCK_SESSION set, forwards SIGINT, SIGTERM, SIGHUP, SIGQUIT,
SIGUSR1 and SIGUSR2 to it, and releases the lock when it ends. CMD is dead before
the cluster can give the lock to anyone else: if no keepalive is acknowledged, CMD
gets SIGTERM kill-grace + 0.5s before the lock is lost (lease end + lock-delay -
margin), SIGKILL kill-grace later. So exec needs --lock-delay of at least
--kill-grace + 0.5s + margin (3.8s with the defaults: --ttl 15s, --kill-grace 3s); it refuses
shorter ones and names the values that work.

Exit status: 0 on success, 1 on an error (printed as "raftlock: <code>: <message>"),
2 on a usage error. exec exits with CMD's status (128+N if signal N ended it), or
124 if the lock was lost while CMD ran, 125 if the lock could not be taken, 126 if
CMD could not be started, 127 if CMD was not found.
`

// cli is one invocation's settings and output.
type cli struct {
	stdout, stderr io.Writer
	addrs          []string
	timeout        time.Duration
	json           bool
}

// usageError is a command line that cannot be run. err, if any, is the
// validator's error behind it (errors.Is(err, api.ErrInvalidArgument)).
type usageError struct {
	msg string
	err error
}

func (e *usageError) Error() string { return e.msg }

func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// badFlag is the usage error of a flag value refused by a session
// validator (api.CheckTTL, CheckNonNegative, ...): printed once as
// "raftlock: CMD: <message>", the message naming the flag, the value and
// the allowed range, without the API code. cmd is "" for a global flag.
func badFlag(cmd string, err error) error {
	msg := err.Error()
	var e *api.Error
	if errors.As(err, &e) {
		msg = e.Message
	}
	if cmd != "" {
		msg = cmd + ": " + msg
	}
	return &usageError{msg: msg, err: err}
}

// run runs the CLI with args (without the program name) and returns the
// exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := &cli{stdout: stdout, stderr: stderr}
	fs := flag.NewFlagSet("raftlock", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usageText) }
	addr := os.Getenv("RAFTLOCK_ADDR")
	if addr == "" {
		addr = defaultAddr
	}
	fs.StringVar(&addr, "addr", addr, "nodes: host:port[,host:port...]")
	fs.DurationVar(&c.timeout, "timeout", 30*time.Second, "overall timeout (0s: never)")
	fs.BoolVar(&c.json, "json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usageText)
			return exitOK
		}
		return exitUsage
	}
	if err := api.CheckNonNegative("--timeout", c.timeout); err != nil {
		return c.finish(badFlag("", err))
	}
	for _, a := range strings.Split(addr, ",") {
		if a = strings.TrimSpace(a); a != "" {
			c.addrs = append(c.addrs, a)
		}
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fmt.Fprint(stderr, usageText)
		return exitUsage
	}
	return c.finish(c.dispatch(ctx, rest[0], rest[1:]))
}

// finish prints err (if it says something) and returns the exit status
// it calls for.
func (c *cli) finish(err error) int {
	stderr := c.stderr
	var ue *usageError
	var es *exitStatus
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &es):
		if es.err != nil {
			code, msg := describe(es.err)
			fmt.Fprintf(stderr, "raftlock: %s: %s\n", code, msg)
		}
		return es.code
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "raftlock: %s\nrun 'raftlock help' for usage\n", ue.msg)
		return exitUsage
	default:
		code, msg := describe(err)
		fmt.Fprintf(stderr, "raftlock: %s: %s\n", code, msg)
		return exitError
	}
}

// describe returns the code and message to print for err.
func describe(err error) (string, string) {
	var e *api.Error
	switch {
	case errors.As(err, &e):
		msg := e.Message
		if errors.Is(err, context.DeadlineExceeded) {
			msg += " (timed out)"
		}
		return string(e.Code), msg
	case errors.Is(err, session.ErrElectionNoLeader):
		return "no_election_leader", err.Error()
	case errors.Is(err, errStaleSequencer):
		return "stale_sequencer", err.Error()
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout", err.Error()
	case errors.Is(err, context.Canceled):
		return "canceled", err.Error()
	default:
		return string(api.CodeInternal), err.Error()
	}
}

// dispatch runs one command.
func (c *cli) dispatch(ctx context.Context, name string, args []string) error {
	switch name {
	case "help", "-h", "--help":
		fmt.Fprint(c.stdout, usageText)
		return nil
	case "status":
		return c.status(ctx, args)
	case "lock":
		return c.sub(ctx, "lock", args, map[string]func(context.Context, []string) error{
			"get": c.lockGet, "list": c.lockList, "watch": c.lockWatch})
	case "sequencer":
		return c.sub(ctx, "sequencer", args, map[string]func(context.Context, []string) error{
			"check": c.sequencerCheck})
	case "session":
		return c.sub(ctx, "session", args, map[string]func(context.Context, []string) error{
			"open": c.sessionOpen, "keepalive": c.sessionKeepAlive, "get": c.sessionGet, "close": c.sessionClose})
	case "acquire":
		return c.acquire(ctx, args)
	case "release":
		return c.release(ctx, args)
	case "exec":
		return c.execCmd(ctx, args)
	case "elect":
		return c.elect(ctx, args)
	case "leader":
		return c.leader(ctx, args)
	default:
		return usagef("unknown command %q", name)
	}
}

// sub runs a subcommand of a command group.
func (c *cli) sub(ctx context.Context, group string, args []string, cmds map[string]func(context.Context, []string) error) error {
	if len(args) == 0 {
		return usagef("%s: missing subcommand", group)
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(c.stdout, usageText)
		return nil
	}
	f, ok := cmds[args[0]]
	if !ok {
		return usagef("%s: unknown subcommand %q", group, args[0])
	}
	return f(ctx, args[1:])
}

// flags returns a FlagSet for a subcommand; it accepts --json too.
func (c *cli) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// A parse error comes back from Parse and is printed once, by run, as a
	// usage error; the flag package does not print it too.
	fs.SetOutput(io.Discard)
	fs.Usage = func() { fmt.Fprint(c.stdout, usageText) }
	fs.BoolVar(&c.json, "json", c.json, "print JSON")
	return fs
}

// parse parses a subcommand's flags, which may come before or after its
// positional arguments ("--" ends the flags), and checks the number of
// positional arguments.
func parse(fs *flag.FlagSet, args []string, minPos, maxPos int) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usagef("%s: %v", fs.Name(), err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	switch {
	case len(pos) < minPos:
		return nil, usagef("%s: missing argument", fs.Name())
	case len(pos) > maxPos:
		return nil, usagef("%s: too many arguments: %q", fs.Name(), pos[maxPos:])
	}
	return pos, nil
}

// client returns a client of the cluster and the ctx of one command, with
// extra time on top of --timeout (a waiting acquire's wait).
func (c *cli) client(ctx context.Context, extra time.Duration) (*transport.Client, context.Context, context.CancelFunc, error) {
	cl, err := transport.NewClient(c.addrs)
	if err != nil {
		return nil, nil, nil, usagef("--addr: %v", err)
	}
	if c.timeout == 0 { // --timeout 0s: never give up
		ctx, cancel := context.WithCancel(ctx)
		return cl, ctx, cancel, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout+extra)
	return cl, ctx, cancel, nil
}
