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
// systems' JSON lines; `raftlock-bench compare PEER.jsonl... CAND.jsonl`
// with two or more peers prints one table of all of them with the best
// peer of each row and the candidate against it (bench-vs-peers.sh uses
// it).
//
// The client shares the machine with the servers when run locally: every
// line carries client_cpu_pct and machine_busy_pct, and a note when the
// machine was saturated, so that a CPU-bound run is not read as the
// servers' limit.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/raftlock/raftlock/cmd/raftlock-bench/internal/bench"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// newCommand returns raftlock-bench's command line. --route leader puts
// the leader's address first in every client; --http chooses the protocol
// of every client (HTTP/1.1, or HTTP/2: one multiplexed connection per
// node for the whole run).
func newCommand() *bench.Command {
	var proto, driverName, driverCmd string
	return &bench.Command{
		Name:        "raftlock-bench",
		DefaultAddr: "127.0.0.1:7001",
		LeaderRoute: "leader",
		OtherRoute:  "given",
		RouteUsage:  "leader: clients start at the leader's address; given: in --addr order (followers forward)",
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&proto, "http", "1.1", "protocol of the clients: 1.1 (a connection per request in flight), 2 (h2c, or h2 over TLS: one multiplexed connection per node) "+
				"or stream (the stream protocol where a node serves it: one connection per node, writes coalesced)")
			fs.StringVar(&driverName, "driver", "go", "whose clients run (a)-(c): go (this process), python or java (a driver program, through that client's own API)")
			fs.StringVar(&driverCmd, "driver-cmd", "", "the driver's program and leading arguments (default: the built-in one of --driver, relative to the repository root)")
		},
		Check: func(*bench.Options) error {
			if proto != "1.1" && proto != "2" && proto != "stream" {
				return fmt.Errorf("--http %q: want 1.1, 2 or stream", proto)
			}
			if _, err := newDriver(driverName, driverCmd); err != nil {
				return err
			}
			return nil
		},
		Open: func(ctx context.Context, c bench.Config) (bench.System, error) {
			conns := max(c.Clients, c.Workers) + 16
			s, err := newSystem(ctx, c.Addrs, c.TTL, conns, c.Leader, proto)
			if err != nil {
				return nil, err
			}
			s.driver, _ = newDriver(driverName, driverCmd)
			return s, nil
		},
	}
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "compare" {
		return compare(args[1:], stdout, stderr)
	}
	return newCommand().Main(args, stdout, stderr)
}

// compare prints the comparison table of files of JSON result lines: of
// two (base and candidate), or of two or more peers and the candidate.
func compare(args []string, stdout, stderr io.Writer) int {
	if len(args) < 2 {
		fmt.Fprintln(stderr, "usage: raftlock-bench compare BASE.jsonl CANDIDATE.jsonl\n"+
			"       raftlock-bench compare PEER.jsonl PEER.jsonl... CANDIDATE.jsonl")
		return 2
	}
	sets := make([][]bench.Result, len(args))
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
	var err error
	if len(sets) == 2 {
		err = bench.Table(stdout, sets[0], sets[1])
	} else {
		named := make([]bench.Set, len(sets))
		for i, rs := range sets {
			named[i] = bench.Set{Name: setName(args[i], rs), Results: rs}
		}
		err = bench.TablePeers(stdout, named[:len(named)-1], named[len(named)-1])
	}
	if err != nil {
		fmt.Fprintf(stderr, "raftlock-bench compare: %v\n", err)
		return 1
	}
	return 0
}

// setName names a file's results in the table: the system of its lines,
// or for a file without any the file's name without directory and
// extension.
func setName(file string, rs []bench.Result) string {
	if len(rs) > 0 && rs[0].System != "" {
		return rs[0].System
	}
	return strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
}
