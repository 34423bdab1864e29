package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"syscall"
)

// Command is one benchmark binary's command line: the shared Options, a
// --route flag choosing between starting clients at the leader (the
// default) and another routing, and one run of Run printed as a result
// line (or JSON).
type Command struct {
	// Name names the binary in usage and error messages.
	Name string
	// DefaultAddr is --addr's default.
	DefaultAddr string
	// LeaderRoute and OtherRoute are --route's two values; LeaderRoute is
	// the default and sets Config.Leader.
	LeaderRoute, OtherRoute string
	// RouteUsage is --route's usage text.
	RouteUsage string
	// Check validates the system's own limits on parsed options (nil: none).
	Check func(*Options) error
	// Open connects to the system under test. If the System is also an
	// io.Closer, it is closed when the run ends.
	Open func(ctx context.Context, c Config) (System, error)
	// Flags registers the system's own flags (nil: none); Open reads
	// what they set.
	Flags func(fs *flag.FlagSet)
}

// Config is a parsed command line.
type Config struct {
	Options
	// Leader reports --route LeaderRoute.
	Leader bool
}

// Parse parses args; flag errors and usage go to stderr.
func (cmd *Command) Parse(args []string, stderr io.Writer) (Config, error) {
	var c Config
	fs := flag.NewFlagSet(cmd.Name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.Register(fs, cmd.DefaultAddr)
	route := fs.String("route", cmd.LeaderRoute, cmd.RouteUsage)
	if cmd.Flags != nil {
		cmd.Flags(fs)
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	switch *route {
	case cmd.LeaderRoute:
		c.Leader = true
	case cmd.OtherRoute:
	default:
		return c, fmt.Errorf("--route %q: want %s or %s", *route, cmd.LeaderRoute, cmd.OtherRoute)
	}
	if err := c.Validate(); err != nil {
		return c, err
	}
	if cmd.Check != nil {
		if err := cmd.Check(&c.Options); err != nil {
			return c, err
		}
	}
	return c, nil
}

// Main parses args, runs the scenario until it ends or SIGINT/SIGTERM,
// and returns the exit status: 0 done (or -h), 1 the run failed, 2 a bad
// command line.
func (cmd *Command) Main(args []string, stdout, stderr io.Writer) int {
	c, err := cmd.Parse(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "%s: %v\n", cmd.Name, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := cmd.run(ctx, c, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmd.Name, err)
		return 1
	}
	return 0
}

func (cmd *Command) run(ctx context.Context, c Config, stdout, stderr io.Writer) error {
	sys, err := cmd.Open(ctx, c)
	if err != nil {
		return err
	}
	if cl, ok := sys.(io.Closer); ok {
		defer cl.Close()
	}
	r, err := Run(ctx, sys, &c.Options)
	if err != nil {
		if r.Ops > 0 {
			fmt.Fprintln(stderr, r.Line())
		}
		return err
	}
	return r.Print(stdout, stderr, c.JSON)
}
