package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/cmd/internal/flaghint"
	"github.com/raftlock/raftlock/session"
	"github.com/raftlock/raftlock/transport/client"
	"github.com/raftlock/raftlock/transport/tlsconf"
)

// Exit statuses (exec adds its own: exec.go).
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

const (
	defaultAddr    = "127.0.0.1:7001"
	defaultTimeout = 30 * time.Second
	// failFast is how long a command tries to connect to any node before
	// it fails with unreachable (client.WithFailFast).
	failFast = time.Second
)

// Output formats (-o).
const (
	outText = "text"
	outJSON = "json"
)

// cli is one invocation's settings and output.
type cli struct {
	stdout, stderr io.Writer
	// The global flags: --addr, --timeout, -o/--output (and --json).
	addr    string
	addrs   []string
	timeout time.Duration
	output  string
	// --ca, --cert, --key: the CA to verify https:// nodes against and the
	// client's certificate (tlsConfig builds their tls.Config).
	caFile, certFile, keyFile string
	// token is the ACL secret sent with every call (--token, else
	// aclTokenFromEnv).
	token string
	// now and loc time and place the timestamps that lock watch prints
	// (tests fix them).
	now func() time.Time
	loc *time.Location
	// guardStarted, if set (tests), is told CMD's pid once exec knows it
	// from its guard: from then on exec can kill CMD's group itself.
	guardStarted func(pid int)
}

func newCLI(stdout, stderr io.Writer) *cli {
	return &cli{stdout: stdout, stderr: stderr, now: time.Now, loc: time.Local}
}

// json reports whether the result is to be printed as JSON.
func (c *cli) json() bool { return c.output == outJSON }

// run runs the CLI with args (without the program name) and returns the
// exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return newCLI(stdout, stderr).main(ctx, args)
}

// main parses the global flags, finds the command in the table, parses
// its flags and runs it.
func (c *cli) main(ctx context.Context, args []string) int {
	if err := c.fromEnv(); err != nil {
		return c.finish(err)
	}
	gfs := newFlagSet("raftlock")
	c.globalFlags(gfs, true)
	version := gfs.Bool("version", false, "print the version and exit")
	if err := gfs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c.finish(c.printf("%s", overview()))
		}
		return c.finish(usagef("", "%v", flaghint.Error(err)))
	}
	if *version {
		return c.finish(c.printf("%s", versionText()))
	}
	rest := gfs.Args()
	if len(rest) == 0 {
		fmt.Fprint(c.stderr, overview())
		return exitUsage
	}
	cmd, group, args, err := lookup(rest)
	switch {
	case err != nil:
		return c.finish(err)
	case cmd == nil: // "raftlock lock --help"
		return c.finish(c.printf("%s", groupHelp(group)))
	}
	fs := newFlagSet(cmd.name)
	c.globalFlags(fs, cmd.output)
	runCmd := cmd.setup(c, fs)
	split := cmd.split
	if split == nil {
		split = func(fs *flag.FlagSet, args []string) ([]string, error) {
			return parse(fs, args, cmd.nargs[0], cmd.nargs[1])
		}
	}
	pos, err := split(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return c.finish(c.printf("%s", cmd.helpText()))
	}
	if err == nil {
		err = c.settle()
	}
	if err == nil {
		err = runCmd(ctx, pos)
	}
	return c.finish(err)
}

// fromEnv sets the global flags' defaults from the environment.
func (c *cli) fromEnv() error {
	c.addr, c.timeout, c.output = defaultAddr, defaultTimeout, outText
	if v := os.Getenv("RAFTLOCK_ADDR"); v != "" {
		c.addr = v
	}
	if v := os.Getenv("RAFTLOCK_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return usagef("", "RAFTLOCK_TIMEOUT=%q: not a duration (e.g. 30s)", v)
		}
		c.timeout = d
	}
	c.caFile, c.certFile, c.keyFile = os.Getenv("RAFTLOCK_CACERT"), os.Getenv("RAFTLOCK_CERT"), os.Getenv("RAFTLOCK_KEY")
	var deprecated bool
	if c.token, deprecated = aclTokenFromEnv(os.Getenv); deprecated {
		fmt.Fprint(c.stderr, deprecatedTokenWarning)
	}
	if v := os.Getenv("RAFTLOCK_OUTPUT"); v != "" {
		if err := (outputFlag{c}).Set(v); err != nil {
			return usagef("", "RAFTLOCK_OUTPUT=%q: %v", v, err)
		}
	}
	return nil
}

// aclTokenFromEnv is the ACL secret the environment gives:
// RAFTLOCK_ACL_TOKEN, else (deprecated, until 0.2.0) RAFTLOCK_TOKEN, in
// which case deprecated is true. Inside a command that raftlock exec runs
// (RAFTLOCK_LOCK set), RAFTLOCK_TOKEN is the lock's fencing token (also
// RAFTLOCK_FENCING_TOKEN), which exec hands its command, and never an ACL
// secret: a raftlock called from there reads RAFTLOCK_ACL_TOKEN only.
func aclTokenFromEnv(getenv func(string) string) (secret string, deprecated bool) {
	if s := getenv("RAFTLOCK_ACL_TOKEN"); s != "" {
		return s, false
	}
	if getenv("RAFTLOCK_LOCK") != "" {
		return "", false
	}
	s := getenv("RAFTLOCK_TOKEN")
	return s, s != ""
}

// deprecatedTokenWarning is what the CLI prints when it takes the ACL
// secret from RAFTLOCK_TOKEN.
const deprecatedTokenWarning = "raftlock: warning: the ACL secret in RAFTLOCK_TOKEN is deprecated and stops working in 0.2.0: " +
	"set RAFTLOCK_ACL_TOKEN instead (in a command raftlock exec runs, RAFTLOCK_FENCING_TOKEN is the lock's fencing token)\n"

// globalFlags defines the global flags on fs: --addr, --timeout, the
// deprecated --json and, with output, -o/--output. Every command's flag
// set has them too, so they may come before or after the command. (Every
// command took --json before -o came, so every one still does; it changes
// nothing for those that print no result.)
func (c *cli) globalFlags(fs *flag.FlagSet, output bool) {
	fs.StringVar(&c.addr, "addr", c.addr, "nodes to talk to, `host:port[,host:port...]`")
	fs.DurationVar(&c.timeout, "timeout", c.timeout, "give up after `D`")
	fs.StringVar(&c.caFile, "ca", c.caFile, "the CA certificate to verify https:// nodes against, `FILE`")
	fs.StringVar(&c.certFile, "cert", c.certFile, "the client certificate to present, `FILE`")
	fs.StringVar(&c.keyFile, "key", c.keyFile, "the key of --cert, `FILE`")
	fs.StringVar(&c.token, "token", c.token, "the ACL token's `SECRET` (better: env RAFTLOCK_ACL_TOKEN, which ps does not show)")
	fs.BoolFunc("json", "same as -o json (deprecated)", func(s string) error {
		on, err := strconv.ParseBool(s)
		if on {
			c.output = outJSON
		}
		return err
	})
	if output {
		fs.Var(outputFlag{c}, "o", "output format, `text|json`")
		fs.Var(outputFlag{c}, "output", "output format, `text|json`")
	}
}

// globalFlag names the flags globalFlags defines (a command's help lists
// the others).
var globalFlag = map[string]bool{"addr": true, "timeout": true, "o": true, "output": true, "json": true,
	"ca": true, "cert": true, "key": true, "token": true}

// outputFlag is -o/--output: text or json.
type outputFlag struct{ c *cli }

func (o outputFlag) String() string {
	if o.c == nil {
		return ""
	}
	return o.c.output
}

func (o outputFlag) Set(s string) error {
	switch s {
	case outText, outJSON:
		o.c.output = s
		return nil
	}
	return fmt.Errorf("want text or json")
}

// settle checks the global flags once every flag is parsed.
func (c *cli) settle() error {
	if err := api.CheckNonNegative("--timeout", c.timeout); err != nil {
		return badFlag("", err)
	}
	c.addrs = c.addrs[:0]
	for _, a := range strings.Split(c.addr, ",") {
		if a = strings.TrimSpace(a); a != "" {
			c.addrs = append(c.addrs, a)
		}
	}
	return nil
}

// newFlagSet returns a flag set that prints nothing: a parse error comes
// back from Parse and is printed once, as a usage error, and -h/--help
// prints the command's help once.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// usageError is a command line that cannot be run (exit 2). cmd names the
// command (or group) whose help the hint points to ("": the overview);
// err, if any, is the validator's error behind it (errors.Is(err,
// api.ErrInvalidArgument)).
type usageError struct {
	cmd string
	msg string
	err error
}

func (e *usageError) Error() string {
	if e.cmd == "" {
		return e.msg
	}
	return e.cmd + ": " + e.msg
}

func (e *usageError) Unwrap() error { return e.err }

// usagef returns the usage error of command cmd ("": none).
func usagef(cmd, format string, args ...any) error {
	return &usageError{cmd: cmd, msg: fmt.Sprintf(format, args...)}
}

// badFlag is the usage error of a flag value refused by a session
// validator (api.CheckTTL, CheckNonNegative, ...): its message names the
// flag, the value and the allowed range, without the API code. cmd is ""
// for a global flag.
func badFlag(cmd string, err error) error {
	msg := err.Error()
	var e *api.Error
	if errors.As(err, &e) {
		msg = e.Message
	}
	return &usageError{cmd: cmd, msg: msg, err: err}
}

// codeError is an error with one of the CLI's own codes (API.md):
// stale_sequencer, command_not_found, not_executable, lock_lost.
type codeError struct {
	code string
	err  error
}

func (e *codeError) Error() string { return e.err.Error() }

func (e *codeError) Unwrap() error { return e.err }

// finish prints err (if it says something) as one line, "raftlock: CODE:
// message" (a usage error: "raftlock: usage: message" and a hint naming
// the help to read), and returns the exit status it calls for.
func (c *cli) finish(err error) int {
	var ue *usageError
	var es *exitStatus
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &es):
		if es.err != nil {
			code, msg := describe(es.err)
			fmt.Fprintf(c.stderr, "raftlock: %s: %s\n", code, msg)
		}
		return es.code
	case errors.As(err, &ue):
		help := ""
		if ue.cmd != "" {
			help = " " + ue.cmd
		}
		fmt.Fprintf(c.stderr, "raftlock: usage: %s\nrun 'raftlock help%s' for usage\n", ue.Error(), help)
		return exitUsage
	default:
		code, msg := describe(err)
		fmt.Fprintf(c.stderr, "raftlock: %s: %s\n", code, msg)
		return exitError
	}
}

// describe returns the code and message to print for err.
func describe(err error) (string, string) {
	var e *api.Error
	var ce *codeError
	switch {
	case errors.As(err, &ce):
		return ce.code, ce.err.Error()
	case errors.As(err, &e):
		msg := e.Message
		if errors.Is(err, context.DeadlineExceeded) {
			msg += " (timed out)"
		}
		return string(e.Code), msg
	case errors.Is(err, session.ErrElectionNoLeader):
		return "no_election_leader", err.Error()
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout", err.Error()
	case errors.Is(err, context.Canceled):
		return "canceled", err.Error()
	default:
		return string(api.CodeInternal), err.Error()
	}
}

// parse parses a command's flags, which may come before or after its
// positional arguments ("--" ends the flags), and checks the number of
// positional arguments (maxPos -1: any).
func parse(fs *flag.FlagSet, args []string, minPos, maxPos int) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usagef(fs.Name(), "%v", flaghint.Error(err))
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
		return nil, usagef(fs.Name(), "missing argument")
	case maxPos >= 0 && len(pos) > maxPos:
		return nil, usagef(fs.Name(), "too many arguments: %q", pos[maxPos:])
	}
	return pos, nil
}

// newClient returns a client of the cluster. Unless --timeout is 0s
// (never give up), it fails fast: a cluster none of whose nodes can be
// connected to is reported as unreachable after about a second.
func (c *cli) newClient() (*client.Client, error) {
	var opts []client.ClientOption
	if c.timeout > 0 {
		opts = append(opts, client.WithFailFast(failFast))
	}
	return c.dial(opts...)
}

// dial returns a client of --addr with opts and, when --ca or --cert is
// given, TLS.
func (c *cli) dial(opts ...client.ClientOption) (*client.Client, error) {
	return c.dialTo(c.addrs, opts...)
}

// dialTo returns a client of addrs with opts and the CLI's TLS and token.
func (c *cli) dialTo(addrs []string, opts ...client.ClientOption) (*client.Client, error) {
	if c.caFile != "" || c.certFile != "" || c.keyFile != "" {
		cfg, err := tlsconf.ClientConfig(c.caFile, c.certFile, c.keyFile)
		if err != nil {
			return nil, usagef("", "--ca, --cert, --key: %v", err)
		}
		opts = append(opts, client.WithTLS(cfg))
	}
	if c.token != "" {
		opts = append(opts, client.WithToken(c.token))
	}
	cl, err := client.NewClient(addrs, opts...)
	if err != nil {
		return nil, usagef("", "--addr: %v", err)
	}
	return cl, nil
}

// client returns a client of the cluster and the ctx of one command, with
// extra time on top of --timeout (a waiting acquire's wait).
func (c *cli) client(ctx context.Context, extra time.Duration) (*client.Client, context.Context, context.CancelFunc, error) {
	cl, err := c.newClient()
	if err != nil {
		return nil, nil, nil, err
	}
	if c.timeout == 0 { // --timeout 0s: never give up
		ctx, cancel := context.WithCancel(ctx)
		return cl, ctx, cancel, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout+extra)
	return cl, ctx, cancel, nil
}

// longClient returns the client of a command that runs until interrupted
// or for as long as its child (exec, elect, lock watch, leader --observe):
// it first makes sure the cluster is reachable (one fail-fast health
// call, unless --timeout is 0s), then returns a client that, like a
// session's, retries until its ctx ends, so that the command rides out a
// full restart of the cluster.
func (c *cli) longClient(ctx context.Context) (*client.Client, error) {
	if c.timeout > 0 {
		err := c.call(ctx, 0, func(ctx context.Context, cl *client.Client) error {
			_, err := cl.Health(ctx)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return c.dial()
}
