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

	"github.com/raftlock/raftlock/node"
)

// logStoreOptions are the --log-store and --migrate-log-store flags.
type logStoreOptions struct {
	// logStore is the Raft log store (node.Config.LogStore): wal,
	// boltdb, or "" for the data dir's own (wal for a new one).
	logStore string
	// migrate, if set, moves the stopped node's log to that store and
	// exits (deprecated: raftlockd migrate-log-store).
	migrate string
}

func addLogStoreFlags(fs *flag.FlagSet, o *logStoreOptions) {
	fs.StringVar(&o.logStore, "log-store", "", "the Raft log store, wal or boltdb (default: the data dir's own; wal for a new one); a data dir keeps the one it was created with")
	fs.StringVar(&o.migrate, "migrate-log-store", "", "deprecated: raftlockd migrate-log-store --data-dir DIR --to STORE")
}

// check refuses unknown stores, and --migrate-log-store without a
// --data-dir or with --dev.
func (o logStoreOptions) check(dev bool, dataDir string) error {
	if err := node.CheckLogStore(o.logStore); err != nil {
		return fmt.Errorf("--log-store: %w", err)
	}
	if o.migrate == "" {
		return nil
	}
	if o.migrate != node.LogStoreWAL && o.migrate != node.LogStoreBoltDB {
		return fmt.Errorf("--migrate-log-store %q: want %s or %s", o.migrate, node.LogStoreWAL, node.LogStoreBoltDB)
	}
	if dev || dataDir == "" {
		return errors.New("--migrate-log-store needs the stopped node's --data-dir (and no --dev)")
	}
	if o.logStore != "" && o.logStore != o.migrate {
		return fmt.Errorf("--log-store %s contradicts --migrate-log-store %s", o.logStore, o.migrate)
	}
	return nil
}

// migrateOptions are the flags of raftlockd migrate-log-store (and of
// the deprecated --migrate-log-store).
type migrateOptions struct {
	dataDir, to string
	log         logOptions
}

const migrateDetails = `
It moves the Raft log of a stopped node's data dir to the other log store
(wal: raft-wal, the default of a new data dir; boltdb: in raft.db); the term
and vote stay in raft.db. It is safe to run again after a crash at any
point. It prints what it moved and exits 0; then start the node as usual.
Exit 1: the move failed (it says why; run it again once that is
fixed); 2: a flag is wrong.`

func migrateFlags(o *migrateOptions, stderr io.Writer) *flag.FlagSet {
	fs := newFlagSet("migrate-log-store", stderr)
	fs.StringVar(&o.dataDir, "data-dir", "", "the stopped node's data dir (required)")
	fs.StringVar(&o.to, "to", "", "the log store to move the log to: wal or boltdb (required)")
	addLogFlags(fs, &o.log)
	return fs
}

// check refuses a missing --data-dir and an unknown store.
func (o migrateOptions) check() error {
	switch {
	case o.to != node.LogStoreWAL && o.to != node.LogStoreBoltDB:
		return fmt.Errorf("--to %q: want %s or %s", o.to, node.LogStoreWAL, node.LogStoreBoltDB)
	case o.dataDir == "":
		return errors.New("raftlockd migrate-log-store needs --data-dir: the stopped node's data dir")
	}
	return o.log.check()
}

// runMigrateCommand is raftlockd migrate-log-store.
func runMigrateCommand(args []string, stdout, stderr io.Writer) int {
	var o migrateOptions
	if code, ok := parseCommand("migrate-log-store", migrateFlags(&o, stderr), args, stdout, stderr); !ok {
		return code
	}
	if err := o.check(); err != nil {
		fmt.Fprintf(stderr, "raftlockd migrate-log-store: %v\n", err)
		return 2
	}
	return runMigrate(o, false, stderr)
}

// runMigrate moves the stopped node's log (node.MigrateLogStore), says
// what it did and exits; the node is then started as usual. alias: run
// as the deprecated --migrate-log-store, whose messages it keeps.
func runMigrate(o migrateOptions, alias bool, stderr io.Writer) int {
	name, then := "raftlockd migrate-log-store", "Start the node now."
	if alias {
		name, then = "raftlockd --migrate-log-store", "Start the node now, without --migrate-log-store."
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	info, err := node.MigrateLogStore(ctx, o.dataDir, o.to, o.log.logger(stderr))
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	fmt.Fprintf(stderr, "%s: %s: log entries %d to %d moved from %s to %s. %s\n",
		name, o.dataDir, info.First, info.Last, info.From, info.To, then)
	return 0
}
