package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/node/backupfile"
	"github.com/raftlock/raftlock/session/api"
	"github.com/raftlock/raftlock/transport"
)

// DefaultTrailingLogs is how many entries a snapshot leaves in the log
// (hashicorp/raft's default).
const DefaultTrailingLogs = 10240

// DefaultSnapshotThreshold is how many log entries since the last snapshot
// make a node take the next one (Config.SnapshotThreshold).
const DefaultSnapshotThreshold = 8192

// DefaultSnapshotInterval is how often a node checks whether it passed the
// threshold (Config.SnapshotInterval). hashicorp/raft's default (120 s,
// randomised up to 240 s) let a busy node run tens of thousands of entries
// past the threshold, all replayed at its next start; checking every 10 s
// bounds that to ten seconds of traffic beyond the threshold, and costs a
// comparison of two integers when there is nothing to do.
const DefaultSnapshotInterval = 10 * time.Second

// Bounds of Config.SnapshotInterval.
const (
	MinSnapshotInterval = 100 * time.Millisecond
	MaxSnapshotInterval = time.Hour
)

// restoreMargin is how far above the leader's last log index a restore
// into a running cluster puts its floor: the entries a concurrent proposal
// may still append between the read of the last index and the restore
// (proposals are refused while it runs, but one may be on its way into
// Raft) stay below the floor, so the restored state's histories are
// complete from the floor on. Tokens are 64-bit: skipping 1024 costs
// nothing.
const restoreMargin = 1024

// MaxMinToken bounds a restore's or a recovery's min token: 2^62 leaves
// room for more entries than any cluster will write, and no floor
// arithmetic can wrap around.
const MaxMinToken = 1 << 62

// checkMinToken refuses a min token above MaxMinToken (invalid_argument).
func checkMinToken(minToken uint64) error {
	if minToken > MaxMinToken {
		return api.Errorf(api.CodeInvalidArgument, "min token %d is above %d (2^62): pick a bound closer to the tokens issued", minToken, uint64(MaxMinToken))
	}
	return nil
}

// restoreTimeout bounds a restore that Raft takes in (raft.Restore).
const restoreTimeout = time.Minute

var _ transport.SnapshotService = (*Node)(nil)

// snapshotState is a Node's backup and restore state.
type snapshotState struct {
	// mu lets one restore run at a time on this node.
	mu sync.Mutex
	// restoring pauses the leader's expiries while a restore runs.
	restoring atomic.Bool
}

// checkSnapshotConfig fills in and checks the snapshot settings of c.
func (c *Config) checkSnapshotConfig() error {
	if c.SnapshotInterval == 0 {
		c.SnapshotInterval = DefaultSnapshotInterval
	}
	if err := api.CheckDuration("SnapshotInterval", c.SnapshotInterval, MinSnapshotInterval, MaxSnapshotInterval); err != nil {
		return fmt.Errorf("node: config: %w", err)
	}
	return nil
}

// Snapshot writes a backup of the state to w (the backupfile format): on
// the leader, after a Barrier, so that it holds every entry committed
// before the call. Admin only.
func (n *Node) Snapshot(ctx context.Context, w io.Writer) (transport.SnapshotInfo, error) {
	if err := n.authorize(ctx, api.AccessAdmin, ""); err != nil {
		return transport.SnapshotInfo{}, err
	}
	if !n.ready.Load() {
		return transport.SnapshotInfo{}, n.noLeader()
	}
	if err := waitFuture(ctx, n.raft.Barrier(DefaultApplyTimeout)); err != nil {
		return transport.SnapshotInfo{}, mapRaftError(err)
	}
	term := n.raft.CurrentTerm()
	state := n.fsm.Dump()
	sum, err := fsm.Inspect(state)
	if err != nil {
		return transport.SnapshotInfo{}, api.Errorf(api.CodeInternal, "snapshot: the state does not decode: %v", err)
	}
	h := backupfile.Header{Index: sum.Applied, Term: term, Created: time.Now().UTC(), Node: n.cfg.ID}
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return transport.SnapshotInfo{}, mapRaftError(err)
	}
	for _, s := range cf.Configuration().Servers {
		h.Configuration = append(h.Configuration, backupfile.Server{ID: string(s.ID), Address: string(s.Address), Suffrage: s.Suffrage.String()})
	}
	checksum, err := backupfile.Encode(w, h, state)
	if err != nil {
		return transport.SnapshotInfo{}, err
	}
	return transport.SnapshotInfo{Index: h.Index, Term: term, Sessions: sum.Sessions, Locks: sum.Locks, Checksum: checksum}, nil
}

// Restore replaces the cluster's whole state with a backup's (data, a
// backupfile): sessions, locks, histories, ACL tokens. Admin only, on the
// leader. Every token granted afterwards is above every token the cluster
// issued before (its last log index), and above minToken. data is checked
// completely first: a file that is not a whole backup is refused
// (invalid_argument) and nothing changes.
func (n *Node) Restore(ctx context.Context, data []byte, minToken uint64) (transport.RestoreInfo, error) {
	if err := n.authorize(ctx, api.AccessAdmin, ""); err != nil {
		return transport.RestoreInfo{}, err
	}
	return n.restore(ctx, data, minToken)
}

// PeerRestore is Restore for a member, on the peer port (raftlockd
// --restore on a new node that does not lead): no token is needed, as for
// every peer-only route.
func (n *Node) PeerRestore(ctx context.Context, data []byte, minToken uint64) (transport.RestoreInfo, error) {
	return n.restore(ctx, data, minToken)
}

func (n *Node) restore(ctx context.Context, data []byte, minToken uint64) (transport.RestoreInfo, error) {
	if err := checkMinToken(minToken); err != nil {
		return transport.RestoreInfo{}, err
	}
	b, err := backupfile.Parse(data)
	if err != nil {
		return transport.RestoreInfo{}, api.Errorf(api.CodeInvalidArgument, "restore: %v", err)
	}
	n.snap.mu.Lock()
	defer n.snap.mu.Unlock()
	if !n.ready.Load() {
		return transport.RestoreInfo{}, n.noLeader()
	}
	done := n.leadershipDone()
	// Refuse proposals and pause expiries while the state is replaced,
	// then drain what Raft already has: the last index read next is then
	// final but for a proposal on its way in (restoreMargin).
	n.snap.restoring.Store(true)
	n.ready.Store(false)
	defer func() {
		n.snap.restoring.Store(false)
		select {
		case <-done:
		default:
			n.ready.Store(true)
		}
	}()
	if err := waitFuture(ctx, n.raft.Barrier(DefaultApplyTimeout)); err != nil {
		return transport.RestoreInfo{}, mapRaftError(err)
	}
	floor := max(n.raft.LastIndex(), b.Header.Index, minToken) + restoreMargin
	state, err := fsm.PrepareRestore(b.State, floor, n.fsm.Members())
	if err != nil {
		return transport.RestoreInfo{}, api.Errorf(api.CodeInvalidArgument, "restore: %v", err)
	}
	if err := ctx.Err(); err != nil {
		return transport.RestoreInfo{}, err
	}
	// raft.Restore writes the state as a snapshot at index
	// max(last index, meta.Index)+1 = floor+1: every later entry, hence
	// every later grant's token, is above the floor. Followers install it.
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Index: floor, Term: b.Header.Term, Size: int64(len(state))}
	if err := n.raft.Restore(meta, bytes.NewReader(state), restoreTimeout); err != nil {
		return transport.RestoreInfo{}, fmt.Errorf("restore: %w", mapRaftError(err))
	}
	n.afterRestore()
	index, _ := strconv.ParseUint(n.raft.Stats()["last_snapshot_index"], 10, 64)
	n.log.Warn("state restored from a backup", "backup_index", b.Header.Index, "backup_created", b.Header.Created,
		"floor", floor, "index", index, "sessions", b.Summary.Sessions, "locks", b.Summary.Locks)
	return transport.RestoreInfo{BackupIndex: b.Header.Index, Floor: floor, Index: index,
		Sessions: b.Summary.Sessions, Locks: b.Summary.Locks, Checksum: b.Checksum}, nil
}

// afterRestore rebuilds the leader's state for the restored one, as a new
// leader does: every session's deadline restarts at now+ttl+grace (a
// session the backup does not hold is unknown from now on: its keepalives
// answer session_not_found), and every lock-delay and wait restarts for
// its full length.
func (n *Node) afterRestore() {
	n.mu.Lock()
	for k, t := range n.timers {
		t.Stop()
		delete(n.timers, k)
		delete(n.timerDue, k)
	}
	n.mu.Unlock()
	ttls := make(map[string]time.Duration)
	for _, s := range n.fsm.Sessions() {
		ttls[s.ID] = time.Duration(s.TTL)
	}
	n.leases.Reset(ttls, n.cfg.FailoverGrace)
	n.restartLockTimers()
}

// RestoreNewCluster restores data (a backup file) into the new cluster
// this node has just bootstrapped (raftlockd --restore FILE --min-token
// N): it waits for a leader that serves, then restores there, here or at
// the leader's peer port (POST /v1/internal/restore). It tries again after
// a failure (no leader yet, a leader change) until ctx ends or the node
// shuts down; a backup refused as invalid ends it. A try whose outcome was
// unknown may have restored already: the next one restores again, which
// in a cluster nobody uses yet changes nothing but the floor, higher.
func (n *Node) RestoreNewCluster(ctx context.Context, data []byte, minToken uint64) (transport.RestoreInfo, error) {
	if _, err := backupfile.Parse(data); err != nil {
		return transport.RestoreInfo{}, api.Errorf(api.CodeInvalidArgument, "restore: %v", err)
	}
	if err := checkMinToken(minToken); err != nil {
		return transport.RestoreInfo{}, err
	}
	for {
		li := n.Leader()
		var info transport.RestoreInfo
		var err error
		switch {
		case li.Self && li.Serving:
			info, err = n.restore(ctx, data, minToken)
		case !li.Self && li.PeerAddr != "":
			info, err = transport.PostRestore(ctx, n.DialPeer, li.PeerAddr, data, minToken)
		default:
			err = api.Errorf(api.CodeNoLeader, "no leader serving yet")
		}
		if err == nil {
			return info, nil
		}
		if api.CodeOf(err) == api.CodeInvalidArgument {
			return transport.RestoreInfo{}, err
		}
		n.log.Debug("restore into the new cluster: trying again", "error", err)
		select {
		case <-ctx.Done():
			return transport.RestoreInfo{}, fmt.Errorf("restore into the new cluster: %w (last: %v)", ctx.Err(), err)
		case <-n.stop:
			return transport.RestoreInfo{}, fmt.Errorf("restore into the new cluster: %w (last: %v)", errShutdown, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// HasState reports whether dataDir holds a node's Raft state (raftlockd
// --restore refuses to run on one: it is for a brand-new cluster).
func HasState(dataDir string) (bool, error) {
	if _, err := os.Stat(filepath.Join(dataDir, "raft.db")); err == nil {
		return true, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	entries, err := os.ReadDir(filepath.Join(dataDir, "snapshots"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	return len(entries) > 0, nil
}
