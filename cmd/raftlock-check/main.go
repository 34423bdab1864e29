// Command raftlock-check is the fault-injection checker of raftlock, in
// the manner of Jepsen. It starts a real cluster of raftlockd processes on
// the loopback addresses 127.0.0.11 to .15, runs client processes (this
// same binary in its "client" mode) that contend for a few locks and write
// to a fenced resource kept by the checker, injects faults on a schedule
// (kill -9 and restart of the leader, of a follower and of the whole
// cluster; SIGSTOP of the leader and of a lock holder; network partitions
// with iptables, between nodes and between a lock holder and the cluster),
// and then checks the recorded history:
//
//  1. it is linearizable for the lock model (porcupine);
//  2. the fenced resource accepted writes in token order and never a
//     stale holder's write inside the next holder's tenure;
//  3. no acknowledged grant of a live session was lost;
//  4. no live session was expired (leader changes included);
//  5. a holder's Lost() closed before the lock was granted to another
//     client;
//  6. grants follow the lock's FIFO queue: a waiter a read showed in the
//     queue is not overtaken while its place lives;
//  7. a holder id whose place surely ended (no_leader, wait_timeout,
//     wait_cancelled, session_not_found, a busy try) is never seen
//     holding or waiting again: no ghost grants.
//
// With --worker-clients N, N of the clients drive the workload through a
// conformance worker (--worker CMD, docs/CONFORMANCE.md): a client in
// another language, whose requests a recording proxy in the client
// process records for the same checks (worker.go, wproxy.go).
//
// It prints a summary and exits 1 if any check failed, writing the
// history and porcupine's visualisation to --out. "raftlock-check analyze
// FILE" checks a history file again.
//
//	go run ./cmd/raftlock-check --duration 10m --nodes 3 --out /tmp/rlcheck
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
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "client" {
		os.Exit(clientMain(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == execWriterCommand {
		os.Exit(execWriterMain(os.Stderr))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(checkMain(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// checkMain runs the checker (or "analyze FILE") and returns the exit
// status: 0 no violation, 1 violations (or an inconclusive check), 2 a
// usage or setup error.
func checkMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "analyze" {
		if len(args) != 2 {
			fmt.Fprintln(stderr, "usage: raftlock-check analyze HISTORY.jsonl")
			return 2
		}
		h, err := readHistory(args[1])
		if err != nil {
			fmt.Fprintf(stderr, "raftlock-check: %v\n", err)
			return 2
		}
		rep := analyze(h, defaultConfig().CheckTimeout)
		rep.Setup = "analysis of " + args[1]
		rep.print(stdout)
		return rep.exitCode()
	}
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "raftlock-check: %v\n", err)
		return 2
	}
	rep, err := Run(ctx, cfg, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "raftlock-check: %v\n", err)
		return 2
	}
	rep.print(stdout)
	return rep.exitCode()
}
