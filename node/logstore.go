package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	"go.etcd.io/bbolt"
)

// The Raft log store of a data dir (Config.LogStore, raftlockd
// --log-store). raft.db (raft-boltdb) is the stable store (term, vote)
// either way.
const (
	// LogStoreWAL keeps the log in raft-wal segments under wal/: one
	// fsync per append batch. The default for a new data dir.
	LogStoreWAL = "wal"
	// LogStoreBoltDB keeps the log in raft.db beside the term and vote
	// (raft-boltdb): two fdatasyncs per append batch. Data dirs made
	// before the choice existed hold this one.
	LogStoreBoltDB = "boltdb"
)

// logStoreFile, in a data dir, records which log store it was created
// with ("wal" or "boltdb", one line).
const logStoreFile = "log-store"

// walDirName is the directory of a data dir that holds raft-wal's
// segments and its wal-meta.db.
const walDirName = "wal"

// CheckLogStore refuses a log store name other than "", "wal" or "boltdb".
func CheckLogStore(s string) error {
	switch s {
	case "", LogStoreWAL, LogStoreBoltDB:
		return nil
	}
	return fmt.Errorf("log store %q: want %q or %q", s, LogStoreWAL, LogStoreBoltDB)
}

// LogStoreOf says which log store the data dir dir holds: the one its
// log-store file records; else (a data dir made before it was recorded)
// wal if wal/ exists, boltdb if raft.db does; "" for a new data dir.
func LogStoreOf(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, logStoreFile))
	switch {
	case err == nil:
		s := strings.TrimSpace(string(b))
		if s != LogStoreWAL && s != LogStoreBoltDB {
			return "", DataDamaged("", filepath.Join(dir, logStoreFile), fmt.Sprintf("it names no known log store (%q)", s))
		}
		return s, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("read %s: %w", filepath.Join(dir, logStoreFile), err)
	}
	if _, err := os.Stat(filepath.Join(dir, walDirName)); err == nil {
		return LogStoreWAL, nil
	}
	if _, err := os.Stat(filepath.Join(dir, "raft.db")); err == nil {
		return LogStoreBoltDB, nil
	}
	return "", nil
}

// chooseLogStore is the log store a node opens dir with, given the one
// asked for (Config.LogStore, "" for none): the data dir's own, which an
// explicit contradicting choice cannot change (the error names the fix);
// for a new data dir, the one asked for or wal.
func chooseLogStore(dir, asked string) (string, error) {
	if err := CheckLogStore(asked); err != nil {
		return "", err
	}
	have, err := LogStoreOf(dir)
	if err != nil {
		return "", err
	}
	switch {
	case have == "" && asked == "":
		return LogStoreWAL, nil
	case have == "":
		return asked, nil
	case asked != "" && asked != have:
		return "", fmt.Errorf("the data dir %s holds a %s log store, but %s was asked for: start it with --log-store %s "+
			"(or without --log-store), or move its log first with `raftlockd --data-dir %s --migrate-log-store %s` while the node is stopped",
			dir, have, asked, have, dir, asked)
	}
	return have, nil
}

// recordLogStore writes dir's log-store file (if it does not say kind
// already), durably: a temporary file, fsynced, renamed, and the
// directory fsynced.
func recordLogStore(dir, kind string) error {
	path := filepath.Join(dir, logStoreFile)
	if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) == kind {
		return nil
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return fmt.Errorf("record the log store: %w", err)
	}
	if _, err := f.WriteString(kind + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("record the log store: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("record the log store: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("record the log store: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("record the log store: %w", err)
	}
	return syncDir(dir)
}

// syncDir fsyncs directory dir (a rename or a new file in it durable).
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// openBolt opens dir's raft.db as a node does. fsync stays on (NoSync is
// never set). The freelist is not written on every commit (bbolt
// rebuilds it by scanning on open), which takes pages off every group
// commit; the hashmap freelist keeps allocation cheap as the log is
// truncated after snapshots.
func openBolt(dir string, readOnly bool) (*raftboltdb.BoltStore, error) {
	opts := &bbolt.Options{Timeout: time.Second, NoFreelistSync: true, FreelistType: bbolt.FreelistMapType}
	if readOnly {
		opts = &bbolt.Options{Timeout: time.Second, ReadOnly: true}
	}
	s, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db"), BoltOptions: opts})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", filepath.Join(dir, "raft.db"), err)
	}
	return s, nil
}

// openWAL opens (or creates) the raft-wal log under dir/wal. raft-wal
// checks its segments as it opens them; what it refuses is reported as
// the data dir's damage (DataDamagedError), naming the directory.
func openWAL(id, dir string, logger hclog.Logger) (*wal.WAL, error) {
	wdir := filepath.Join(dir, walDirName)
	if err := os.MkdirAll(wdir, 0o750); err != nil {
		return nil, fmt.Errorf("create %s: %w", wdir, err)
	}
	w, err := openWALQuiet(wdir, logger)
	if err != nil {
		return nil, DataDamaged(id, wdir, fmt.Sprintf("raft-wal cannot open its log: %v", err))
	}
	return w, nil
}

// openWALQuiet opens raft-wal in wdir, a panic on a damaged segment
// turned into an error.
func openWALQuiet(wdir string, logger hclog.Logger) (w *wal.WAL, err error) {
	defer func() {
		if p := recover(); p != nil {
			w, err = nil, fmt.Errorf("it failed reading its segments: %v", p)
		}
	}()
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return wal.Open(wdir, wal.WithLogger(logger.Named("wal")))
}

// dataDirStores are a stopped node's stores, opened by tools (Recover,
// InspectDataDir, MigrateLogStore).
type dataDirStores struct {
	kind   string
	stable *raftboltdb.BoltStore
	logs   raft.LogStore
	wal    *wal.WAL // nil for boltdb
}

// openDataDirStores opens dir's raft.db and its log store (readOnly
// opens raft.db read-only; raft-wal has no such mode). raft.db is opened
// first, with a timeout: a running node holds it, and the open fails.
func openDataDirStores(dir string, readOnly bool) (*dataDirStores, error) {
	kind, err := LogStoreOf(dir)
	if err != nil {
		return nil, err
	}
	if kind == "" {
		return nil, fmt.Errorf("%s holds no Raft state", dir)
	}
	stable, err := openBolt(dir, readOnly)
	if err != nil {
		return nil, fmt.Errorf("%w (is the node still running?)", err)
	}
	s := &dataDirStores{kind: kind, stable: stable, logs: stable}
	if kind == LogStoreWAL {
		if _, err := os.Stat(filepath.Join(dir, walDirName)); err != nil {
			stable.Close()
			return nil, fmt.Errorf("%s: its log store is wal, but: %w", dir, err)
		}
		w, err := openWALQuiet(filepath.Join(dir, walDirName), nil)
		if err != nil {
			stable.Close()
			return nil, fmt.Errorf("open %s: %w", filepath.Join(dir, walDirName), err)
		}
		s.wal, s.logs = w, w
	}
	return s, nil
}

func (s *dataDirStores) Close() error {
	var err error
	if s.wal != nil {
		err = s.wal.Close()
	}
	return errors.Join(err, s.stable.Close())
}

// openStores opens the node's raft.db and its log store (the data dir's
// own, chooseLogStore), records the choice, and wraps both with their
// writes watched; it returns raft.db and the log cache Raft is given.
func (n *Node) openStores() (*raftboltdb.BoltStore, raft.LogStore, error) {
	dir := n.cfg.DataDir
	kind, err := chooseLogStore(dir, n.cfg.LogStore)
	if err != nil {
		return nil, nil, fmt.Errorf("node: %w", err)
	}
	dbPath := filepath.Join(dir, "raft.db")
	_, dbErr := os.Stat(dbPath)
	if kind == LogStoreWAL && dbErr == nil {
		// raft.db with a wal log store but no wal/: the log was lost.
		if _, err := os.Stat(filepath.Join(dir, walDirName)); errors.Is(err, fs.ErrNotExist) {
			return nil, nil, fmt.Errorf("node: %w", n.damaged(filepath.Join(dir, walDirName),
				"the directory is missing, but raft.db holds the node's term and vote: the log was lost"))
		}
	}
	if err := n.checkRaftDB(dbPath); err != nil {
		return nil, nil, fmt.Errorf("node: %w", err)
	}
	reserve, err := setDiskReserve(n.cfg.ID, dir)
	if err != nil {
		return nil, nil, err
	}
	store, err := openBolt(dir, false)
	if err != nil {
		return nil, nil, fmt.Errorf("node: %w", err)
	}
	n.store, n.logs, n.logPath = store, store, dbPath
	if kind == LogStoreWAL {
		if err := removeWALRebuilds(dir); err != nil {
			store.Close()
			return nil, nil, fmt.Errorf("node: %w", err)
		}
		w, err := openWAL(n.cfg.ID, dir, n.cfg.Logger)
		if err != nil {
			store.Close()
			return nil, nil, fmt.Errorf("node: %w", err)
		}
		n.logs, n.walLog, n.logPath = w, w, filepath.Join(dir, walDirName)
	}
	if err := recordLogStore(dir, kind); err != nil {
		n.closeRaftStores()
		return nil, nil, fmt.Errorf("node: %w", err)
	}
	n.log.Info("Raft stores open", "log_store", kind, "log", n.logPath, "stable", dbPath)
	n.watched = &storeWatch{log: n.log, latency: n.metrics.storeWrite, reserve: reserve, onFull: n.stopFull, probes: map[string]func() error{
		// A write (fsynced) of a key of its own proves the stable store
		// works (not the log store, even where that is raft.db too).
		storeStable: func() error { return store.Set(diskProbeKey, []byte(time.Now().UTC().Format(time.RFC3339Nano))) },
	}}
	n.watchedStable = &watchedStable{StableStore: store, file: dbPath, w: n.watched}
	// The leader replicates recent entries from memory instead of reading
	// them back from disk and decoding them for every AppendEntries.
	wl := &watchedLog{store: n.logs, file: n.logPath, w: n.watched}
	if n.walLog != nil {
		// From here the wrapper owns the WAL (a rebuild replaces it):
		// reads and the close go through it.
		wl.rebuild = n.rebuildWAL
		n.logs, n.walLog = wl, wl
	}
	logs, err := raft.NewLogCache(logCacheSize, wl)
	if err != nil {
		n.closeRaftStores()
		return nil, nil, fmt.Errorf("node: log cache: %w", err)
	}
	return store, logs, nil
}

// diskProbeKey is the key a failing store's probe writes (in raft.db, or
// raft-wal's wal-meta.db); nothing reads it.
var diskProbeKey = []byte("raftlock_disk_probe")

// closeRaftStores closes the log store (if it is not raft.db) and
// raft.db.
func (n *Node) closeRaftStores() error {
	var err error
	if n.walLog != nil {
		err = n.walLog.Close()
	}
	if n.store != nil {
		err = errors.Join(err, n.store.Close())
	}
	return err
}

// LogStore is the log store this node opened (LogStoreWAL or
// LogStoreBoltDB).
func (n *Node) LogStore() string {
	if n.walLog != nil {
		return LogStoreWAL
	}
	return LogStoreBoltDB
}

// LogPath is the file or directory that holds this node's Raft log.
func (n *Node) LogPath() string { return n.logPath }
