// Command raftlock-bench measures a running raftlock cluster over its HTTP
// API. One run is one scenario:
//
//	uncontended (a)  --clients N clients, each with its own session and lock,
//	                 doing acquire+release pairs for --duration: pairs/s
//	contended   (b)  --clients N clients on one lock, blocking acquires:
//	                 handoffs/s
//	sessions    (c)  --sessions S sessions kept alive for --session-time by a
//	                 pool of --workers keepalive workers, --held-locks of them
//	                 holding a lock: spurious expiries (must be 0), leader CPU,
//	                 leader memory per session and per held lock
//	failover    (d)  the load of (a); --rounds times the leader is killed
//	                 with SIGKILL (--pids) and the time to the next grant by a
//	                 new leader is measured; --restart-cmd restarts it
//
// Each run prints one aligned line (pairs/s or handoffs/s, p50/p99 of a
// pair, errors, CPU figures); --json prints it as a JSON line instead.
// `raftlock-bench compare BASE.jsonl CAND.jsonl` prints the table of two
// systems' JSON lines (bench-vs-etcd.sh uses it).
//
// The client shares the machine with the servers when run locally: every
// line carries client_cpu_pct and machine_busy_pct, and a note when the
// machine was saturated, so that a CPU-bound run is not read as the
// servers' limit.
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
	// leaderFirst puts the leader's address first in every client.
	leaderFirst bool
}

func parse(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("raftlock-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.Register(fs, "127.0.0.1:7001")
	route := fs.String("route", "leader", "leader: clients start at the leader's address; given: in --addr order (followers forward)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	switch *route {
	case "leader":
		c.leaderFirst = true
	case "given":
	default:
		return c, fmt.Errorf("--route %q: want leader or given", *route)
	}
	if err := c.Validate(); err != nil {
		return c, err
	}
	return c, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "compare" {
		return compare(args[1:], stdout, stderr)
	}
	c, err := parse(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "raftlock-bench: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := runBench(ctx, c, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "raftlock-bench: %v\n", err)
		return 1
	}
	return 0
}

func runBench(ctx context.Context, c config, stdout, stderr io.Writer) error {
	conns := max(c.Clients, c.Workers) + 16
	sys, err := newSystem(ctx, c.Addrs, c.TTL, conns, c.leaderFirst)
	if err != nil {
		return err
	}
	r, err := bench.Run(ctx, sys, &c.Options)
	if err != nil {
		if r.Ops > 0 {
			fmt.Fprintln(stderr, r.Line())
		}
		return err
	}
	return r.Print(stdout, stderr, c.JSON)
}

// compare prints the comparison table of two files of JSON result lines.
func compare(args []string, stdout, stderr io.Writer) int {
	if len(args) != 2 {
		fmt.Fprintln(stderr, "usage: raftlock-bench compare BASE.jsonl CANDIDATE.jsonl")
		return 2
	}
	var sets [2][]bench.Result
	for i, name := range args {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintf(stderr, "raftlock-bench compare: %v\n", err)
			return 1
		}
		sets[i], err = bench.ReadResults(f)
		f.Close()
		if err != nil {
			fmt.Fprintf(stderr, "raftlock-bench compare: %s: %v\n", name, err)
			return 1
		}
	}
	if err := bench.Table(stdout, sets[0], sets[1]); err != nil {
		fmt.Fprintf(stderr, "raftlock-bench compare: %v\n", err)
		return 1
	}
	return 0
}
