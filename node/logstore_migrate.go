package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/hashicorp/raft-wal/migrate"
)

// migrateBatchBytes is how much log data MigrateLogStore copies per
// append.
const migrateBatchBytes = 4 << 20

// MigrateInfo says what MigrateLogStore did.
type MigrateInfo struct {
	// From and To are the log stores before and after.
	From, To string
	// First and Last are the indexes of the entries moved (0, 0 for an
	// empty log).
	First, Last uint64
}

// MigrateLogStore moves the Raft log of the stopped node's data dir
// dataDir to log store `to` (LogStoreWAL or LogStoreBoltDB) with
// raft-wal's migrate.CopyLogs; the term and vote stay in raft.db. It is
// safe to run again after a crash at any point: the data dir's log-store
// file is switched only once the copy is complete and durable, and the
// old copy is removed after that.
func MigrateLogStore(ctx context.Context, dataDir, to string, logger hclog.Logger) (MigrateInfo, error) {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	if to != LogStoreWAL && to != LogStoreBoltDB {
		return MigrateInfo{}, fmt.Errorf("migrate the log store: %w", CheckLogStore(to))
	}
	from, err := LogStoreOf(dataDir)
	if err != nil {
		return MigrateInfo{}, fmt.Errorf("migrate the log store: %w", err)
	}
	if from == "" {
		return MigrateInfo{}, fmt.Errorf("migrate the log store: %s holds no Raft state", dataDir)
	}
	if from == to {
		return MigrateInfo{}, fmt.Errorf("migrate the log store: %s already keeps its log in %s", dataDir, to)
	}
	src, err := openDataDirStores(dataDir, false)
	if err != nil {
		return MigrateInfo{}, fmt.Errorf("migrate the log store: %w", err)
	}
	defer src.Close()
	info := MigrateInfo{From: from, To: to}
	if info.First, err = src.logs.FirstIndex(); err != nil {
		return MigrateInfo{}, fmt.Errorf("migrate the log store: first index: %w", err)
	}
	if info.Last, err = src.logs.LastIndex(); err != nil {
		return MigrateInfo{}, fmt.Errorf("migrate the log store: last index: %w", err)
	}
	if to == LogStoreWAL {
		err = migrateToWAL(ctx, dataDir, src)
	} else {
		err = migrateToBolt(ctx, dataDir, src)
	}
	if err != nil {
		return MigrateInfo{}, fmt.Errorf("migrate the log store from %s to %s: %w", from, to, err)
	}
	logger.Info("log store migrated", "data_dir", dataDir, "from", from, "to", to, "first", info.First, "last", info.Last)
	return info, nil
}

// migrateToWAL copies raft.db's log into a new raft-wal under
// wal.migrating/, renames it wal/, records wal, then deletes the log
// from raft.db.
func migrateToWAL(ctx context.Context, dataDir string, src *dataDirStores) error {
	tmp := filepath.Join(dataDir, walDirName+".migrating")
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.MkdirAll(tmp, 0o750); err != nil {
		return err
	}
	w, err := openWALQuiet(tmp, nil)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	tail, err := contiguousTail(src.stable)
	if err != nil {
		w.Close()
		return err
	}
	if err := migrate.CopyLogs(ctx, w, tail, migrateBatchBytes, nil); err != nil {
		w.Close()
		return fmt.Errorf("copy the log: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	// A wal/ beside a boltdb log store is what an interrupted run left.
	if err := os.RemoveAll(filepath.Join(dataDir, walDirName)); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dataDir, walDirName)); err != nil {
		return err
	}
	if err := syncDir(dataDir); err != nil {
		return err
	}
	if err := recordLogStore(dataDir, LogStoreWAL); err != nil {
		return err
	}
	return clearLog(src.stable)
}

// migrateToBolt copies the raft-wal log into raft.db (after clearing
// what an interrupted run left there), records boltdb, then removes wal/.
func migrateToBolt(ctx context.Context, dataDir string, src *dataDirStores) error {
	if err := clearLog(src.stable); err != nil {
		return err
	}
	if err := migrate.CopyLogs(ctx, src.stable, src.wal, migrateBatchBytes, nil); err != nil {
		return fmt.Errorf("copy the log: %w", err)
	}
	if err := recordLogStore(dataDir, LogStoreBoltDB); err != nil {
		return err
	}
	if err := src.wal.Close(); err != nil {
		return fmt.Errorf("close %s: %w", walDirName, err)
	}
	src.wal = nil
	if err := os.RemoveAll(filepath.Join(dataDir, walDirName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return syncDir(dataDir)
}

// clearLog deletes every entry of the log store s.
func clearLog(s raft.LogStore) error {
	first, err := s.FirstIndex()
	if err != nil {
		return fmt.Errorf("clear the old log: %w", err)
	}
	last, err := s.LastIndex()
	if err != nil {
		return fmt.Errorf("clear the old log: %w", err)
	}
	if last == 0 {
		return nil
	}
	if err := s.DeleteRange(first, last); err != nil {
		return fmt.Errorf("clear the old log: %w", err)
	}
	return nil
}

// tailStore is a log store seen from first on.
type tailStore struct {
	raft.LogStore
	first uint64
}

func (t tailStore) FirstIndex() (uint64, error) { return t.first, nil }

// contiguousTail is the log store s from the start of its newest run of
// consecutive indexes: raft-boltdb's log may hold a gap after Raft
// installed a snapshot (older entries kept below it), which raft-wal
// takes no gap in; the entries before the gap are covered by that
// snapshot.
func contiguousTail(s raft.LogStore) (raft.LogStore, error) {
	first, err := s.FirstIndex()
	if err != nil {
		return nil, fmt.Errorf("first index: %w", err)
	}
	last, err := s.LastIndex()
	if err != nil {
		return nil, fmt.Errorf("last index: %w", err)
	}
	start := last
	var l raft.Log
	for start > first && start > 1 {
		if err := s.GetLog(start-1, &l); errors.Is(err, raft.ErrLogNotFound) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("log entry %d: %w", start-1, err)
		}
		start--
	}
	if last == 0 {
		start = first
	}
	return tailStore{LogStore: s, first: start}, nil
}
