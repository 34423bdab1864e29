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

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/node/backupfile"
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
func (n *Node) Snapshot(ctx context.Context, w io.Writer) (api.SnapshotInfo, error) {
	if err := n.authorize(ctx, api.AccessAdmin, ""); err != nil {
		return api.SnapshotInfo{}, err
	}
	if !n.ready.Load() {
		return api.SnapshotInfo{}, n.noLeader()
	}
	if err := waitFuture(ctx, n.raft.Barrier(DefaultApplyTimeout)); err != nil {
		return api.SnapshotInfo{}, mapRaftError(err)
	}
	term := n.raft.CurrentTerm()
	state := n.fsm.Dump()
	sum, err := fsm.Inspect(state)
	if err != nil {
		return api.SnapshotInfo{}, api.Errorf(api.CodeInternal, "snapshot: the state does not decode: %v", err)
	}
	h := backupfile.Header{Index: sum.Applied, Term: term, Created: time.Now().UTC(), Node: n.cfg.ID}
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return api.SnapshotInfo{}, mapRaftError(err)
	}
	for _, s := range cf.Configuration().Servers {
		h.Configuration = append(h.Configuration, backupfile.Server{ID: string(s.ID), Address: string(s.Address), Suffrage: s.Suffrage.String()})
	}
	checksum, err := backupfile.Encode(w, h, state)
	if err != nil {
		return api.SnapshotInfo{}, err
	}
	return api.SnapshotInfo{Index: h.Index, Term: term, Sessions: sum.Sessions, Locks: sum.Locks, Checksum: checksum}, nil
}

// Restore replaces the cluster's whole state with a backup's (data, a
// backupfile): sessions, locks, histories, ACL tokens. Admin only, on the
// leader. Every token granted afterwards is above every token the cluster
// issued before (its last log index), and above minToken. data is checked
// completely first: a file that is not a whole backup is refused
// (invalid_argument) and nothing changes.
func (n *Node) Restore(ctx context.Context, data []byte, minToken uint64) (api.RestoreInfo, error) {
	if err := n.authorize(ctx, api.AccessAdmin, ""); err != nil {
		return api.RestoreInfo{}, err
	}
	return n.restore(ctx, data, minToken)
}

// PeerRestore is Restore for a member, on the peer port
// (POST /v1/internal/restore): no token is needed, as for every peer-only
// route. raftlockd --restore no longer uses it (a new cluster starts from
// its backup, Config.Restore); it restores into the running cluster as
// Restore does.
func (n *Node) PeerRestore(ctx context.Context, data []byte, minToken uint64) (api.RestoreInfo, error) {
	return n.restore(ctx, data, minToken)
}

func (n *Node) restore(ctx context.Context, data []byte, minToken uint64) (api.RestoreInfo, error) {
	if err := checkMinToken(minToken); err != nil {
		return api.RestoreInfo{}, err
	}
	b, err := backupfile.Parse(data)
	if err != nil {
		return api.RestoreInfo{}, api.Errorf(api.CodeInvalidArgument, "restore: %v", err)
	}
	n.snap.mu.Lock()
	defer n.snap.mu.Unlock()
	t := n.leadership()
	if !n.ready.Load() || t == nil {
		return api.RestoreInfo{}, n.noLeader()
	}
	// Refuse proposals and pause expiries while the state is replaced,
	// then drain what Raft already has: the last index read next is then
	// final but for a proposal on its way in (restoreMargin).
	n.snap.restoring.Store(true)
	n.ready.Store(false)
	defer func() {
		n.snap.restoring.Store(false)
		t.serve()
	}()
	if err := waitFuture(ctx, n.raft.Barrier(DefaultApplyTimeout)); err != nil {
		return api.RestoreInfo{}, mapRaftError(err)
	}
	floor := max(n.raft.LastIndex(), b.Header.Index, minToken) + restoreMargin
	state, rep, err := fsm.PrepareRestore(b.State, floor, n.fsm)
	if err != nil {
		return api.RestoreInfo{}, api.Errorf(api.CodeInvalidArgument, "restore: %v", err)
	}
	if err := ctx.Err(); err != nil {
		return api.RestoreInfo{}, err
	}
	// raft.Restore writes the state as a snapshot at index
	// max(last index, meta.Index)+1 = floor+1: every later entry, hence
	// every later grant's token, is above the floor. Followers install it.
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Index: floor, Term: b.Header.Term, Size: int64(len(state))}
	n.raftLog.lim.restoring()
	if err := n.raft.Restore(meta, bytes.NewReader(state), restoreTimeout); err != nil {
		return api.RestoreInfo{}, fmt.Errorf("restore: %w", mapRaftError(err))
	}
	t.afterRestore()
	if n.cfg.Faults.revokeWithoutNotice() {
		t.endDelaysNow()
	}
	index, _ := strconv.ParseUint(n.raft.Stats()["last_snapshot_index"], 10, 64)
	n.log.Warn("state restored from a backup", "backup_index", b.Header.Index, "backup_created", b.Header.Created,
		"floor", floor, "index", index, "sessions_kept", rep.SessionsKept, "sessions_ended", rep.SessionsEnded,
		"grants_revoked", rep.GrantsRevoked, "grants_dropped", rep.GrantsDropped, "locks", rep.State.Locks)
	return api.RestoreInfo{BackupIndex: b.Header.Index, Floor: floor, Index: index,
		Sessions: rep.SessionsKept, Locks: rep.State.Locks, Checksum: b.Checksum, SessionsEnded: rep.SessionsEnded,
		GrantsRevoked: rep.GrantsRevoked, GrantsDropped: rep.GrantsDropped}, nil
}

// afterRestore rebuilds the leader's state for the restored one, as a new
// leader does: every session's deadline restarts at now+ttl+grace (a
// session the restore ended is unknown from now on: its keepalives answer
// session_not_found), and every lock-delay, wait and restore hold restarts
// for its full length.
func (t *leaderTerm) afterRestore() {
	n := t.n
	t.mu.Lock()
	t.stopTimersLocked()
	waiting := make([]waitKey, 0, len(t.waits))
	for k := range t.waits {
		waiting = append(waiting, k)
	}
	t.mu.Unlock()
	ttls := make(map[string]time.Duration)
	for _, s := range n.fsm.Sessions() {
		ttls[s.ID] = time.Duration(s.TTL)
	}
	t.leases.Reset(ttls, n.cfg.FailoverGrace)
	t.restartLockTimers()
	// A waiting request whose place the restore did not keep is answered
	// wait_timeout, so that its client asks again at once (finding its
	// session gone, or queueing anew) instead of at the end of its slice.
	for _, k := range waiting {
		if !n.placeOrGrant(k) {
			t.notifyWait(k, waitResult{why: fsm.WaitTimedOut})
		}
	}
}

// placeOrGrant reports whether (lock, session, holder) holds or waits for
// the lock in the local state.
func (n *Node) placeOrGrant(k waitKey) bool {
	l, ok := n.fsm.Lock(k.lock)
	if !ok {
		return false
	}
	for _, h := range l.Holders {
		if h.Session == k.session && h.Holder == k.holder {
			return true
		}
	}
	for _, w := range l.Waiters {
		if w.Session == k.session && w.Holder == k.holder {
			return true
		}
	}
	return false
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

// RestoreSeed is the backup a brand-new cluster starts from (Config.Restore,
// raftlockd --restore FILE --min-token N --restore-hold D).
type RestoreSeed struct {
	// Backup is the backup file (backupfile format), checked whole.
	Backup []byte
	// MinToken: every token the new cluster grants is above it (and above
	// the backup's index).
	MinToken uint64
	// Hold is how long the new cluster grants no lock (fsm.Hold): until
	// every client of the old cluster that cannot reach the new one has
	// reached the end of its lease plus its lock-delay. Zero: none (the
	// operator knows the old cluster has served nobody for that long).
	Hold time.Duration
}

// seedRestore writes the restored state as this node's first snapshot,
// at index floor = max(backup index, min token) + restoreMargin, term 1,
// with the bootstrap configuration conf, in place of a bootstrap entry:
// the node starts from it and, the only peer with a configuration, is the
// one that stands for election; the other peers start empty (they saw it
// restoring in the probe) and receive the state from it. So the new
// cluster serves nothing before the restored state, and every token it
// grants is above the floor.
func (n *Node) seedRestore(conf raft.Configuration, snaps raft.SnapshotStore) error {
	seed := n.cfg.Restore
	b, err := backupfile.Parse(seed.Backup)
	if err != nil {
		return api.Errorf(api.CodeInvalidArgument, "restore: %v", err)
	}
	if err := checkMinToken(seed.MinToken); err != nil {
		return err
	}
	floor := max(b.Header.Index, seed.MinToken) + restoreMargin
	var members []fsm.Member
	for _, p := range n.cfg.Peers {
		members = append(members, fsm.Member{ID: p.ID, RaftAddr: p.RaftAddr})
	}
	state, rep, err := fsm.PrepareNewCluster(b.State, floor, members, int64(seed.Hold))
	if err != nil {
		return api.Errorf(api.CodeInvalidArgument, "restore: %v", err)
	}
	sink, err := snaps.Create(raft.SnapshotVersionMax, floor, 1, conf, 1, n.trans)
	if err != nil {
		return fmt.Errorf("node: restore: create snapshot: %w", err)
	}
	if _, err := sink.Write(state); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("node: restore: write snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("node: restore: write snapshot: %w", err)
	}
	n.log.Warn("new cluster starts from a backup", "backup_index", b.Header.Index, "backup_created", b.Header.Created,
		"floor", floor, "sessions_ended", rep.SessionsEnded, "grants_dropped", rep.GrantsDropped,
		"locks", rep.State.Locks, "hold", seed.Hold, "acl_tokens", rep.State.Tokens)
	if rep.State.Tokens > 0 {
		// The backup's tokens come back as they were: one deleted (a
		// revoked credential) after the backup was taken is valid again.
		n.log.Warn(fmt.Sprintf("the new cluster holds the backup's %d ACL tokens, also every one deleted since %s: "+
			"delete again each token revoked since the backup (raftlock snapshot inspect --tokens FILE lists them; docs/OPERATIONS.md)",
			rep.State.Tokens, b.Header.Created.UTC().Format(time.RFC3339)), "acl_tokens", rep.State.Tokens)
	}
	return nil
}
