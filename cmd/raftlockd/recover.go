package main

import (
	"fmt"
	"io"

	"github.com/hashicorp/go-hclog"

	"github.com/raftlock/raftlock/node"
)

// runRecover is raftlockd --recover PEERS --data-dir D --min-token N: it
// rewrites the stopped node's data dir for the configuration the peers
// file names (node.Recover), prints what it did and exits; the node is
// then started as usual (README, Lost quorum).
func runRecover(o options, stderr io.Writer) int {
	logger := hclog.New(&hclog.LoggerOptions{Name: "raftlockd", Level: hclog.LevelFromString(o.logLevel),
		JSONFormat: o.logJSON, Output: stderr})
	servers, err := node.ReadPeersFile(o.backup.recover)
	if err != nil {
		fmt.Fprintf(stderr, "raftlockd --recover: %v\n", err)
		return 2
	}
	info, err := node.Recover(o.dataDir, servers, o.backup.minToken, o.backup.hold, logger)
	if err != nil {
		fmt.Fprintf(stderr, "raftlockd --recover: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "raftlockd --recover: %s recovered: %d sessions, %d locks, every entry up to index %d; "+
		"configuration %v; every new token is above %d. Start the node(s) of that configuration now, without --recover.\n",
		o.dataDir, info.Sessions, info.Locks, info.LastIndex, servers, info.Floor)
	return 0
}
