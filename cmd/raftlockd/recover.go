package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/raftlock/raftlock/node"
)

// recoverOptions are the flags of raftlockd recover (and of the
// deprecated --recover).
type recoverOptions struct {
	dataDir, peersFile string
	// minToken: every token granted afterwards is above it; minTokenSet:
	// --min-token was given.
	minToken    uint64
	minTokenSet bool
	// hold: how long the recovered cluster grants no lock.
	hold time.Duration
	log  logOptions
}

const recoverDetails = `
It rewrites the data dir of a stopped node whose cluster lost its quorum for
good, for the configuration the peers file names (a JSON list of
{"id", "address", "non_voter"}, hashicorp/raft's peers.json): the state of
every entry it holds, no session, every later token above --min-token, no
lock granted for --restore-hold. It prints what it did and exits 0; then
start the node(s) of that configuration as usual. Exit 1: the recovery
failed; 2: a flag or the peers file is wrong.`

func recoverFlags(o *recoverOptions, stderr io.Writer) *flag.FlagSet {
	fs := newFlagSet("recover", stderr)
	fs.StringVar(&o.dataDir, "data-dir", "", "the stopped node's data dir (required)")
	fs.StringVar(&o.peersFile, "peers-file", "", "the new configuration: a JSON list of {\"id\",\"address\",\"non_voter\"} with at least one voter (required)")
	minTokenFlag(fs, &o.minToken, &o.minTokenSet,
		"every token granted afterwards is above `N` (the highest token any fence or client saw, or a generous bound above it; required)")
	holdFlag(fs, &o.hold, "grant no lock for this long after the recovered cluster starts, so that every client of the old cluster "+
		"has been told or has reached the end of its lease plus lock-delay (0s: none, when the old cluster has served no client for at least that long)")
	addLogFlags(fs, &o.log)
	return fs
}

// check refuses missing or out-of-range flags of raftlockd recover.
func (o recoverOptions) check() error {
	switch {
	case o.peersFile == "":
		return errors.New("raftlockd recover needs --peers-file FILE: the configuration to recover to")
	case o.dataDir == "":
		return errors.New("raftlockd recover needs --data-dir: the stopped node's data dir")
	case !o.minTokenSet:
		return errors.New("raftlockd recover needs --min-token N: " + minTokenWhy)
	case o.minToken > node.MaxMinToken:
		return fmt.Errorf("--min-token %d is above %d (2^62): pick a bound closer to the tokens issued", o.minToken, uint64(node.MaxMinToken))
	}
	if err := checkHold(o.hold); err != nil {
		return err
	}
	return o.log.check()
}

// runRecoverCommand is raftlockd recover.
func runRecoverCommand(args []string, stdout, stderr io.Writer) int {
	var o recoverOptions
	if code, ok := parseCommand("recover", recoverFlags(&o, stderr), args, stdout, stderr); !ok {
		return code
	}
	if err := o.check(); err != nil {
		fmt.Fprintf(stderr, "raftlockd recover: %s\n", message(err))
		return 2
	}
	return runRecover(o, false, stderr)
}

// runRecover rewrites the stopped node's data dir for the configuration
// the peers file names (node.Recover), prints what it did and exits; the
// node is then started as usual (docs/DESIGN.md, Lost quorum). alias: run
// as the deprecated --recover, whose messages it keeps.
func runRecover(o recoverOptions, alias bool, stderr io.Writer) int {
	name, then := "raftlockd recover", "Start the node(s) of that configuration now."
	if alias {
		name, then = "raftlockd --recover", "Start the node(s) of that configuration now, without --recover."
	}
	servers, err := node.ReadPeersFile(o.peersFile)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	info, err := node.Recover(o.dataDir, servers, o.minToken, o.hold, o.log.logger(stderr))
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	fmt.Fprintf(stderr, "%s: %s recovered: %d sessions, %d locks, every entry up to index %d; "+
		"configuration %v; every new token is above %d. %s\n",
		name, o.dataDir, info.Sessions, info.Locks, info.LastIndex, servers, info.Floor, then)
	return 0
}
