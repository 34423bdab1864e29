// Command etcdbench runs raftlock-bench's scenarios against an etcd cluster
// with etcd's own lock recipe (go.etcd.io/etcd/client/v3/concurrency:
// NewSession, NewMutex, Lock, Unlock) and prints the same lines, so that
// bench-vs-etcd.sh can compare the two. It is a separate module so that
// raftlock never depends on etcd; the client (v3.5) speaks to etcd 3.4 and
// 3.5 servers.
//
//	uncontended (a)  --clients N, each its own etcd client, session and mutex
//	contended   (b)  --clients N on one mutex: handoffs/s
//	sessions    (c)  --sessions S leases kept alive by one client's lease
//	                 keepalive stream (the library's own multiplexing)
//	failover    (d)  the load of (a); the leader (--pids member-name=PID) is
//	                 killed --rounds times; --restart-cmd restarts it
//
// --route leader (the default) gives the clients of (a), (b) and (c) only
// the leader's endpoint, as raftlock-bench starts its clients at the
// leader; (d) always uses every endpoint.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/raftlock/raftlock/cmd/raftlock-bench/internal/bench"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// config is the parsed command line.
type config struct {
	bench.Options
	leaderOnly bool
}

func parse(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("etcdbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.Register(fs, "127.0.0.1:2379")
	route := fs.String("route", "leader", "leader: clients of scenarios a-c use only the leader's endpoint; all: every endpoint (round robin)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	switch *route {
	case "leader":
		c.leaderOnly = true
	case "all":
	default:
		return c, fmt.Errorf("--route %q: want leader or all", *route)
	}
	if err := c.Validate(); err != nil {
		return c, err
	}
	if c.TTL%1e9 != 0 {
		return c, fmt.Errorf("--ttl %v: etcd leases take whole seconds", c.TTL)
	}
	return c, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	c, err := parse(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "etcdbench: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := runBench(ctx, c, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "etcdbench: %v\n", err)
		return 1
	}
	return 0
}

func runBench(ctx context.Context, c config, stdout, stderr io.Writer) error {
	sys, err := newSystem(ctx, c.Addrs, c.TTL, c.leaderOnly && c.Scenario != bench.Failover)
	if err != nil {
		return err
	}
	defer sys.Close()
	r, err := bench.Run(ctx, sys, &c.Options)
	if err != nil {
		if r.Ops > 0 {
			fmt.Fprintln(stderr, r.Line())
		}
		return err
	}
	return r.Print(stdout, stderr, c.JSON)
}
