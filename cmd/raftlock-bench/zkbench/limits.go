package main

import (
	"fmt"
	"syscall"

	"github.com/raftlock/raftlock/cmd/raftlock-bench/internal/bench"
)

// fileReserve is what this process needs besides its sessions' sockets
// (the runtime, the admin connections, /proc probes), with room to spare.
const fileReserve = 100

// checkFiles refuses a sessions run (c) that cannot fit the open-file
// limit: a ZooKeeper session is a TCP connection, so S sessions take S
// sockets here and as many on the server they land on. Without the check
// the opens fail with EMFILE on either side and are retried for ever.
// (The Go runtime has already raised the soft limit to the hard one.)
func checkFiles(o *bench.Options) error {
	if o.Scenario != bench.Sessions {
		return nil
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("open-file limit: %w", err)
	}
	return fitsFiles(o.SessionCount, lim.Cur)
}

// fitsFiles reports whether sessions connections fit an open-file limit.
func fitsFiles(sessions int, limit uint64) error {
	if uint64(sessions)+fileReserve > limit {
		return fmt.Errorf("--sessions %d: a ZooKeeper session is a connection, and this process may open only %d files "+
			"(RLIMIT_NOFILE; a server holding the sessions needs as many): raise the hard limit (needs CAP_SYS_RESOURCE) "+
			"or open at most %d sessions", sessions, limit, int64(limit)-fileReserve)
	}
	return nil
}
