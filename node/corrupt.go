package node

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/raftlock/raftlock/fsm"
)

// haltTimeout bounds how long a halted node waits for Raft to stop.
const haltTimeout = 10 * time.Second

// halt stops the node for good after its state machine met a corrupt log
// entry (fsm.EventHalted, err naming the entry): from that moment it
// serves nothing (it is not ready, so it answers no_leader, and it
// applies nothing more), and it shuts Raft down so that it neither leads
// nor votes on a log it cannot trust. Fatal is closed with the error,
// which names the entry, the file it came from and the repair; an entry
// of a command version above this build's, whose checksum holds, was
// written by a newer build (a node rolled back after an upgrade): that is
// said, a DataNewerError, with no advice to wipe a sound node. halt runs
// on the FSM's goroutine with the state lock held: it only flags and
// hands the rest to a goroutine.
func (n *Node) halt(err error) {
	var newer *fsm.NewerVersionError
	if errors.As(err, &newer) {
		var index uint64
		if ce := (*fsm.CorruptEntryError)(nil); errors.As(err, &ce) {
			index = ce.Index
		}
		n.stopFor(fmt.Errorf("node %s: log entry %d: %w; this node has stopped and serves nothing until then",
			n.cfg.ID, index, &DataNewerError{File: n.logPath, Version: newer.Version}), "a log entry written by a newer build: stopping")
		return
	}
	n.stopFor(fmt.Errorf("node %s: %w, read from %s: this node has stopped and serves nothing from it; "+
		"repair: run `raftlock members remove %s` on the cluster, wipe the data dir %s and start this node with --join "+
		"(its state comes back from the others)", n.cfg.ID, err, n.logPath, n.cfg.ID, n.cfg.DataDir), "corrupt log entry: stopping")
}

// stopFull stops the node for good after a write to file failed for want
// of space (err; storeWatch.diskFull): the disk reserve is released, so
// that the term and vote writes of the moment succeed; the node stops
// before it needs more.
func (n *Node) stopFull(file string, err error) {
	n.stopFor(fmt.Errorf("node %s: %w: a write to %s failed (%v); the node released its %d MiB reserve %s to store its term and vote, "+
		"and stopped: it serves nothing until restarted; %s", n.cfg.ID, ErrDiskFull, file, err, diskReserveSize>>20,
		filepath.Join(n.cfg.DataDir, diskReserveName), diskFullRepair), "disk full (ENOSPC): stopping")
}

// stopFor stops the node for good with err (FatalErr), logging line: from
// that moment it serves nothing (it is not ready, so it answers
// no_leader, and it applies nothing more), and it shuts Raft down so that
// it neither leads nor votes; Fatal is then closed. It may run on Raft's
// or the FSM's goroutines: it only flags and hands the rest to a
// goroutine.
func (n *Node) stopFor(err error, line string) {
	n.ready.Store(false)
	n.fatalOnce.Do(func() {
		n.fatalErr = err
		go func() {
			n.log.Error(line, "error", n.fatalErr)
			ctx, cancel := context.WithTimeout(context.Background(), haltTimeout)
			defer cancel()
			if serr := n.Shutdown(ctx); serr != nil {
				n.log.Warn("stopping", "error", serr)
			}
			close(n.fatal)
		}()
	})
}

// Fatal is closed when the node has stopped itself for good: it met a
// corrupt log entry, or one written by a newer build (FatalErr says
// which, where, and how to repair it), or its disk filled up
// (ErrDiskFull).
// An embedding application should stop using the node; raftlockd exits.
func (n *Node) Fatal() <-chan struct{} { return n.fatal }

// FatalErr is why the node stopped itself (nil until Fatal is closed).
func (n *Node) FatalErr() error {
	select {
	case <-n.fatal:
		return n.fatalErr
	default:
		return nil
	}
}
