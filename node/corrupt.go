package node

import (
	"context"
	"fmt"
	"time"
)

// haltTimeout bounds how long a halted node waits for Raft to stop.
const haltTimeout = 10 * time.Second

// halt stops the node for good after its state machine met a corrupt log
// entry (fsm.EventHalted, err naming the entry): from that moment it
// serves nothing (it is not ready, so it answers no_leader, and it
// applies nothing more), and it shuts Raft down so that it neither leads
// nor votes on a log it cannot trust. Fatal is closed with the error,
// which names the entry, the file it came from and the repair. halt runs
// on the FSM's goroutine with the state lock held: it only flags and
// hands the rest to a goroutine.
func (n *Node) halt(err error) {
	n.ready.Store(false)
	n.fatalOnce.Do(func() {
		n.fatalErr = fmt.Errorf("node %s: %w, read from %s: this node has stopped and serves nothing from it; "+
			"repair: run `raftlock members remove %s` on the cluster, wipe the data dir %s and start this node with --join "+
			"(its state comes back from the others)", n.cfg.ID, err, n.logPath, n.cfg.ID, n.cfg.DataDir)
		go func() {
			n.log.Error("corrupt log entry: stopping", "error", n.fatalErr)
			ctx, cancel := context.WithTimeout(context.Background(), haltTimeout)
			defer cancel()
			if serr := n.Shutdown(ctx); serr != nil {
				n.log.Warn("stopping after a corrupt entry", "error", serr)
			}
			close(n.fatal)
		}()
	})
}

// Fatal is closed when the node has stopped itself for good: it met a
// corrupt log entry (FatalErr says which, where, and how to repair it).
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
