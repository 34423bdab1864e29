package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/node"
	"github.com/raftlock/raftlock/node/backupfile"
)

// DefaultRestoreHold is --restore-hold's default: the longest lease plus
// the longest lock-delay a session can have, so that whatever the old
// cluster's clients held, none of them can still believe it when the new
// cluster grants its first lock.
const DefaultRestoreHold = api.MaxTTL + api.MaxLockDelay

// backupOptions are the flags of snapshots, restores and recovery.
type backupOptions struct {
	// snapshotThreshold and snapshotInterval: node.Config's.
	snapshotThreshold uint64
	snapshotInterval  time.Duration
	// trailingLogs: node.Config.TrailingLogs.
	trailingLogs uint64
	// restore is a backup file to restore into the new cluster this node
	// bootstraps; recover a peers file to recover the data dir with
	// (deprecated: raftlockd recover).
	restore, recover string
	// minToken is the token floor of --restore and --recover;
	// minTokenSet: the flag was given.
	minToken    uint64
	minTokenSet bool
	// backup is the checked backup file of --restore (read by check).
	backup []byte
	// hold is the restore hold of --restore and --recover: how long the
	// new cluster grants no lock (node.RestoreSeed.Hold).
	hold time.Duration
}

func addBackupFlags(fs *flag.FlagSet, o *backupOptions) {
	fs.Uint64Var(&o.snapshotThreshold, "snapshot-threshold", node.DefaultSnapshotThreshold,
		"log entries since the last snapshot that make the node take one")
	fs.DurationVar(&o.snapshotInterval, "snapshot-interval", node.DefaultSnapshotInterval,
		fmt.Sprintf("how often the node checks --snapshot-threshold (%v to %v; Raft waits 1x to 2x of it)",
			node.MinSnapshotInterval, node.MaxSnapshotInterval))
	fs.Uint64Var(&o.trailingLogs, "snapshot-trailing-logs", node.DefaultTrailingLogs,
		"log entries a snapshot leaves in the log, so that a follower lagging by fewer catches up without a snapshot")
	fs.StringVar(&o.restore, "restore", "", "restore this backup file (raftlock snapshot save) into the new cluster this node bootstraps (needs --min-token and an empty --data-dir)")
	fs.StringVar(&o.recover, "recover", "", "deprecated: raftlockd recover --peers-file FILE --data-dir DIR --min-token N")
	holdFlag(fs, &o.hold, "with --restore or --recover: grant no lock for this long after the new cluster starts, so that every client of the old cluster "+
		"has been told or has reached the end of its lease plus lock-delay (0s: none, when the old cluster has served no client for at least that long)")
	minTokenFlag(fs, &o.minToken, &o.minTokenSet,
		"with --restore or --recover: every token granted afterwards is above `N` (the highest token any fence or client saw, or a generous bound above it)")
}

// holdFlag adds --restore-hold, of serve (--restore) and recover.
func holdFlag(fs *flag.FlagSet, hold *time.Duration, usage string) {
	fs.DurationVar(hold, "restore-hold", DefaultRestoreHold, usage)
}

// checkHold refuses a --restore-hold out of [0s, DefaultRestoreHold].
func checkHold(hold time.Duration) error {
	if hold < 0 || hold > DefaultRestoreHold {
		return api.Errorf(api.CodeInvalidArgument, "--restore-hold %v out of range [0s, %v]", hold, DefaultRestoreHold)
	}
	return nil
}

// minTokenFlag adds --min-token, of serve (--restore) and recover; set
// records that it was given.
func minTokenFlag(fs *flag.FlagSet, minToken *uint64, set *bool, usage string) {
	fs.Func("min-token", usage, func(s string) error {
		_, err := fmt.Sscan(s, minToken)
		*set = err == nil
		if err != nil {
			return fmt.Errorf("%q is not a token (a non-negative integer)", s)
		}
		return nil
	})
}

// minTokenWhy says why --min-token is required and how to choose it.
const minTokenWhy = "every token granted afterwards is above N, so N must be at least " +
	"the highest token the old cluster issued (the highest a fence or client saw, or a generous bound: tokens are 64-bit; see docs/OPERATIONS.md, Backup, restore and recovery)"

// check checks the flags, and reads and checks the --restore file, before
// anything starts.
func (o *backupOptions) check(dev bool, dataDir string) error {
	if o.trailingLogs == 0 {
		return api.Errorf(api.CodeInvalidArgument, "--snapshot-trailing-logs must be positive")
	}
	if o.snapshotThreshold == 0 {
		return api.Errorf(api.CodeInvalidArgument, "--snapshot-threshold must be positive")
	}
	if err := api.CheckDuration("--snapshot-interval", o.snapshotInterval, node.MinSnapshotInterval, node.MaxSnapshotInterval); err != nil {
		return err
	}
	if err := checkHold(o.hold); err != nil {
		return err
	}
	switch {
	case o.restore == "" && o.recover == "":
		if o.minTokenSet {
			return errors.New("--min-token is for --restore and --recover")
		}
		return nil
	case dev:
		return errors.New("--restore and --recover are for real nodes, not --dev")
	case o.restore != "" && o.recover != "":
		return errors.New("--restore and --recover do not go together")
	case !o.minTokenSet:
		return errors.New("--restore and --recover need --min-token N: " + minTokenWhy)
	case o.minToken > node.MaxMinToken:
		return fmt.Errorf("--min-token %d is above %d (2^62): pick a bound closer to the tokens issued", o.minToken, uint64(node.MaxMinToken))
	case dataDir == "":
		return errors.New("--restore and --recover need --data-dir")
	case o.recover != "":
		return nil
	}
	has, err := node.HasState(dataDir)
	if err != nil {
		return fmt.Errorf("--restore: %w", err)
	}
	if has {
		return fmt.Errorf("--restore: %s holds Raft state: --restore is for the first start of a brand-new cluster "+
			"(use raftlock snapshot restore to restore into a running one)", dataDir)
	}
	data, err := os.ReadFile(o.restore)
	if err != nil {
		return fmt.Errorf("--restore: %w", err)
	}
	if _, err := backupfile.Parse(data); err != nil {
		return fmt.Errorf("--restore %s: %w", o.restore, err)
	}
	o.backup = data
	return nil
}

// seed is the node's Config.Restore: the checked --restore backup, or nil.
func (o *backupOptions) seed() *node.RestoreSeed {
	if o.backup == nil {
		return nil
	}
	return &node.RestoreSeed{Backup: o.backup, MinToken: o.minToken, Hold: o.hold}
}
