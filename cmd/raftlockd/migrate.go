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

	"github.com/hashicorp/go-hclog"

	"github.com/raftlock/raftlock/node"
)

// logStoreOptions are the --log-store and --migrate-log-store flags.
type logStoreOptions struct {
	// logStore is the Raft log store (node.Config.LogStore): wal,
	// boltdb, or "" for the data dir's own (wal for a new one).
	logStore string
	// migrate, if set, moves the stopped node's log to that store and
	// exits.
	migrate string
}

func addLogStoreFlags(fs *flag.FlagSet, o *logStoreOptions) {
	fs.StringVar(&o.logStore, "log-store", "", "the Raft log store, wal or boltdb (default: the data dir's own; wal for a new one); a data dir keeps the one it was created with")
	fs.StringVar(&o.migrate, "migrate-log-store", "", "move the stopped node's Raft log in --data-dir to this store (wal or boltdb), then exit")
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

// runMigrate is raftlockd --data-dir D --migrate-log-store S: it moves
// the stopped node's log (node.MigrateLogStore), says what it did and
// exits; the node is then started as usual.
func runMigrate(o options, stderr io.Writer) int {
	logger := hclog.New(&hclog.LoggerOptions{Name: "raftlockd", Level: hclog.LevelFromString(o.logLevel),
		JSONFormat: o.logJSON, Output: stderr})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	info, err := node.MigrateLogStore(ctx, o.dataDir, o.logStore.migrate, logger)
	if err != nil {
		fmt.Fprintf(stderr, "raftlockd --migrate-log-store: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "raftlockd --migrate-log-store: %s: log entries %d to %d moved from %s to %s. Start the node now, without --migrate-log-store.\n",
		o.dataDir, info.First, info.Last, info.From, info.To)
	return 0
}
