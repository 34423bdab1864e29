// Command raftlock is the command-line client of a raftlock cluster: cluster
// status, sessions, locks and sequencer checks over the HTTP/JSON API.
//
//	raftlock [--addr host:port[,host:port...]] [--timeout 30s] [-o text|json] COMMAND [ARGS]
//
// Run "raftlock help" for the commands, "raftlock help COMMAND" for one of
// them. The commands are a table (table.go).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == guardCommand {
		os.Exit(guardMain(os.Args[2:])) // exec's guard of CMD (guard.go)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
