package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/raftlock/raftlock/node"
)

// preflight checks what a real node needs before it opens anything, so
// that a wrong deployment stops with one line naming the fix and no data
// touched: the data dir writable, this node among a new cluster's --peers,
// the TLS files readable.
func preflight(o options, peers []node.Peer) error {
	for _, f := range []struct{ flag, path string }{{"--tls-cert", o.tlsCert}, {"--tls-key", o.tlsKey}, {"--tls-ca", o.tlsCA}} {
		if f.path == "" {
			continue
		}
		fh, err := os.Open(f.path)
		if err != nil {
			return fmt.Errorf("%s %s: %v: give the file the flag names, readable by this user "+
				"(Kubernetes: the TLS Secret mounted there; raftlock tls init makes the files)", f.flag, f.path, errors.Unwrap(err))
		}
		fh.Close()
	}
	if err := checkWritable(o.dataDir); err != nil {
		return err
	}
	if len(peers) > 0 && !hasRaftState(o.dataDir) {
		var ids []string
		self := false
		for _, p := range peers {
			ids = append(ids, p.ID)
			self = self || p.ID == o.id
		}
		if !self {
			return fmt.Errorf("--id %s is not one of the --peers ids (%s): start every member with the same --peers and an --id from it "+
				"(Kubernetes: the pod name; the StatefulSet's name and replicas must match the --peers list)", o.id, strings.Join(ids, ", "))
		}
	}
	return nil
}

// hasRaftState reports whether dir holds a node's Raft state (raft.db or
// a wal/ directory), as checkDataDir decides.
func hasRaftState(dir string) bool {
	for _, p := range []string{filepath.Join(dir, "raft.db"), filepath.Join(dir, "wal")} {
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	return false
}

// checkWritable checks that this process can write in dir, or, if dir does
// not exist yet, in its nearest existing parent (where the node will make
// it); nothing is created. A volume mounted read-only or owned by another
// user is refused here, naming the user, not deep in the stores' open.
func checkWritable(dir string) error {
	d := dir
	for {
		if _, err := os.Stat(d); err == nil {
			break
		}
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	if err := syscall.Access(d, 2 /* W_OK */); err != nil {
		what := "not writable"
		if d != dir {
			what = "cannot be made: " + d + " is not writable"
		}
		return fmt.Errorf("--data-dir %s: %s: %v: %s", dir, what, err, writableFix())
	}
	return nil
}

// writableFix says how to give the node a data dir it can write.
func writableFix() string {
	return fmt.Sprintf("give uid %d a writable directory (Kubernetes: securityContext.fsGroup and a read-write volume; systemd: StateDirectory=)", os.Getuid())
}
