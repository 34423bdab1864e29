package node

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/fsm"
)

// RecoverServer is one member of the configuration a lost-quorum
// recovery installs (an entry of the peers file, as hashicorp/raft's
// peers.json).
type RecoverServer struct {
	ID       string `json:"id"`
	Address  string `json:"address"`
	NonVoter bool   `json:"non_voter"`
}

// RecoverInfo describes a recovery.
type RecoverInfo struct {
	// LastIndex is the last log index the data dir held (the state
	// recovered is every entry up to it); Floor the index the recovered
	// state was written at: every later token is above it.
	LastIndex uint64
	Floor     uint64
	Sessions  int
	Locks     int
}

// ReadPeersFile reads a peers file: a JSON list of {"id", "address",
// "non_voter"}, with at least one voter and no id or address twice.
func ReadPeersFile(path string) ([]RecoverServer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("peers file: %w", err)
	}
	var servers []RecoverServer
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&servers); err != nil {
		return nil, fmt.Errorf("peers file %s: %w (want a JSON list of {\"id\", \"address\", \"non_voter\"})", path, err)
	}
	if _, err := recoverConfiguration(servers); err != nil {
		return nil, fmt.Errorf("peers file %s: %w", path, err)
	}
	return servers, nil
}

func recoverConfiguration(servers []RecoverServer) (raft.Configuration, error) {
	var conf raft.Configuration
	ids, addrs, voters := map[string]bool{}, map[string]bool{}, 0
	for _, s := range servers {
		if s.ID == "" || s.Address == "" {
			return conf, fmt.Errorf("every server needs an id and an address: %+v", s)
		}
		if ids[s.ID] || addrs[s.Address] {
			return conf, fmt.Errorf("id %q or address %q twice", s.ID, s.Address)
		}
		ids[s.ID], addrs[s.Address] = true, true
		suffrage := raft.Voter
		if s.NonVoter {
			suffrage = raft.Nonvoter
		} else {
			voters++
		}
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: suffrage, ID: raft.ServerID(s.ID), Address: raft.ServerAddress(s.Address)})
	}
	if voters == 0 {
		return conf, fmt.Errorf("no voter")
	}
	return conf, nil
}

// Recover rewrites the Raft state of the stopped node in dataDir for a
// cluster that lost its quorum for good (raftlockd recover): it
// replays the node's latest snapshot and every log entry it holds, as
// hashicorp/raft's RecoverCluster does, and writes the result as a
// snapshot whose configuration is servers, with an empty log. Unlike
// RecoverCluster it writes that snapshot at index max(last index,
// minToken), so every token granted afterwards is above minToken too:
// the lost nodes may have committed entries (issued tokens) this node
// never received. For the same reason it restores no session, grant or
// waiter, and holds every lock for hold (fsm.PrepareNewCluster): the lost
// nodes may have committed grants and releases that clients believe in
// and this node never received, so no lock is granted until every client
// has been told (its session is gone) or has reached the end of its lease
// plus its lock-delay. Every node of the new configuration must be
// recovered alike (or given a copy of this data dir). The node must be
// stopped.
func Recover(dataDir string, servers []RecoverServer, minToken uint64, hold time.Duration, logger hclog.Logger) (RecoverInfo, error) {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	if err := checkMinToken(minToken); err != nil {
		return RecoverInfo{}, fmt.Errorf("recover: %w", err)
	}
	conf, err := recoverConfiguration(servers)
	if err != nil {
		return RecoverInfo{}, fmt.Errorf("recover: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "raft.db")); err != nil {
		return RecoverInfo{}, fmt.Errorf("recover: %s holds no Raft state: %w", dataDir, err)
	}
	stores, err := openDataDirStores(dataDir, false)
	if err != nil {
		return RecoverInfo{}, fmt.Errorf("recover: %w", err)
	}
	defer stores.Close()
	store := stores.logs
	snaps, err := openSnapshotStore(dataDir, logger.Named("snapshots"), nil)
	if err != nil {
		return RecoverInfo{}, fmt.Errorf("recover: snapshot store: %w", err)
	}
	has, err := raft.HasExistingState(store, stores.stable, snaps)
	if err != nil || !has {
		return RecoverInfo{}, fmt.Errorf("recover: %s holds no Raft state (%v)", dataDir, err)
	}
	f := fsm.New(nil)
	var lastIndex, lastTerm uint64
	metas, err := snaps.List()
	if err != nil {
		return RecoverInfo{}, fmt.Errorf("recover: list snapshots: %w", err)
	}
	for _, m := range metas {
		_, rc, err := snaps.Open(m.ID)
		if err != nil {
			logger.Warn("recover: skipping a snapshot that does not open", "id", m.ID, "error", err)
			continue
		}
		if err := f.Restore(rc); err != nil {
			logger.Warn("recover: skipping a snapshot that does not restore", "id", m.ID, "error", err)
			continue
		}
		lastIndex, lastTerm = m.Index, m.Term
		break
	}
	if len(metas) > 0 && lastIndex == 0 {
		return RecoverInfo{}, fmt.Errorf("recover: none of the %d snapshots in %s restores", len(metas), dataDir)
	}
	first, err := store.FirstIndex()
	if err != nil {
		return RecoverInfo{}, fmt.Errorf("recover: first log index: %w", err)
	}
	last, err := store.LastIndex()
	if err != nil {
		return RecoverInfo{}, fmt.Errorf("recover: last log index: %w", err)
	}
	for i := lastIndex + 1; i <= last; i++ {
		var e raft.Log
		if err := store.GetLog(i, &e); err != nil {
			return RecoverInfo{}, fmt.Errorf("recover: log entry %d: %w", i, err)
		}
		if e.Type == raft.LogCommand {
			f.Apply(&e)
		}
		lastIndex, lastTerm = e.Index, e.Term
	}
	floor := max(lastIndex, minToken)
	// The member table keeps the HTTP addresses of the configuration's
	// members only: the lost nodes are gone.
	var members []fsm.Member
	for _, m := range f.Members() {
		for _, s := range servers {
			if m.ID == s.ID {
				members = append(members, m)
			}
		}
	}
	state, rep, err := fsm.PrepareNewCluster(f.Dump(), floor, members, int64(hold))
	if err != nil {
		return RecoverInfo{}, fmt.Errorf("recover: %w", err)
	}
	sum := rep.State
	// The transport only encodes the legacy peer list (addresses as
	// they are), as the node's TCP transport does.
	_, trans := raft.NewInmemTransport("")
	defer trans.Close()
	sink, err := snaps.Create(raft.SnapshotVersionMax, floor, lastTerm, conf, 1, trans)
	if err != nil {
		return RecoverInfo{}, fmt.Errorf("recover: create snapshot: %w", err)
	}
	if _, err := sink.Write(state); err != nil {
		sink.Cancel()
		return RecoverInfo{}, fmt.Errorf("recover: write snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return RecoverInfo{}, fmt.Errorf("recover: write snapshot: %w", err)
	}
	if last > 0 && first > 0 {
		if err := store.DeleteRange(first, last); err != nil {
			return RecoverInfo{}, fmt.Errorf("recover: compact the log: %w", err)
		}
	}
	return RecoverInfo{LastIndex: lastIndex, Floor: floor, Sessions: sum.Sessions, Locks: sum.Locks}, nil
}

// DataDirInfo describes the Raft state of a stopped node's data dir.
type DataDirInfo struct {
	// LastIndex is the highest Raft index the data dir holds (log or
	// snapshot): no token this node knows of is above it. SnapshotIndex
	// and SnapshotTerm are its newest snapshot's (0 if none).
	LastIndex     uint64 `json:"last_index"`
	SnapshotIndex uint64 `json:"snapshot_index"`
	SnapshotTerm  uint64 `json:"snapshot_term"`
}

// InspectDataDir reads the last index of a stopped node's data dir
// (raftlock snapshot inspect DIR), to help choose --min-token: it opens
// raft.db read-only, which waits for a running node's lock and fails
// after a second.
func InspectDataDir(dataDir string) (DataDirInfo, error) {
	if _, err := os.Stat(filepath.Join(dataDir, "raft.db")); err != nil {
		return DataDirInfo{}, fmt.Errorf("%s is not a node's data dir: %w", dataDir, err)
	}
	stores, err := openDataDirStores(dataDir, true)
	if err != nil {
		return DataDirInfo{}, fmt.Errorf("%w (stop the node first)", err)
	}
	defer stores.Close()
	store := stores.logs
	var info DataDirInfo
	if info.LastIndex, err = store.LastIndex(); err != nil {
		return DataDirInfo{}, fmt.Errorf("%s: last index: %w", dataDir, err)
	}
	metas, err := raft.NewFileSnapshotStoreWithLogger(dataDir, 2, hclog.NewNullLogger())
	if err != nil {
		return DataDirInfo{}, fmt.Errorf("%s: snapshots: %w", dataDir, err)
	}
	list, err := metas.List()
	if err != nil {
		return DataDirInfo{}, fmt.Errorf("%s: snapshots: %w", dataDir, err)
	}
	if len(list) > 0 {
		info.SnapshotIndex, info.SnapshotTerm = list[0].Index, list[0].Term
	}
	info.LastIndex = max(info.LastIndex, info.SnapshotIndex)
	return info, nil
}
