package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// snapshotsDirName is the snapshot store's directory in the data dir
// (hashicorp/raft's FileSnapshotStore names it).
const snapshotsDirName = "snapshots"

// snapshotTmpSuffix marks a snapshot being written (FileSnapshotStore's).
const snapshotTmpSuffix = ".tmp"

// snapshotStore is hashicorp/raft's FileSnapshotStore (same files, same
// layout), made durable before Raft compacts the log: Raft deletes the
// entries a snapshot covers as soon as the sink's Close returns, so every
// file and directory entry the snapshot needs must be on disk by then.
// FileSnapshotStore fsyncs state.bin, meta.json and, after the rename,
// snapshots/; it does not fsync the snapshot's own directory (the entries
// of state.bin and meta.json) nor the data dir (the entry of snapshots/).
// After a power loss a filesystem may keep the compacted log and lose
// the snapshot that replaced it, and the node cannot start.
//
// It also removes what a failed snapshot leaves (a .tmp directory), at
// open and after every failure, and tells onResult how each snapshot
// written through it ended (nil: durable).
type snapshotStore struct {
	*raft.FileSnapshotStore
	dir      string // data dir/snapshots
	log      hclog.Logger
	onResult func(error)
	// newest is the size of the newest snapshot's state.bin.
	newest atomic.Int64
	// active names the .tmp directories of sinks still open: a follower
	// may install a snapshot from its leader while it takes its own, and
	// one's failure must not remove the other's.
	mu     sync.Mutex
	active map[string]bool
}

// openSnapshotStore opens (or creates) the snapshot store of dataDir,
// removes leftover .tmp directories of snapshots that never completed,
// and makes snapshots/ durable in dataDir. onResult may be nil.
func openSnapshotStore(dataDir string, logger hclog.Logger, onResult func(error)) (*snapshotStore, error) {
	inner, err := raft.NewFileSnapshotStoreWithLogger(dataDir, 2, logger)
	if err != nil {
		return nil, err
	}
	s := &snapshotStore{FileSnapshotStore: inner, dir: filepath.Join(dataDir, snapshotsDirName), log: logger, onResult: onResult,
		active: make(map[string]bool)}
	if _, err := s.removeLeftovers(); err != nil {
		return nil, err
	}
	if err := syncDir(s.dir); err != nil {
		return nil, err
	}
	if err := syncDir(dataDir); err != nil {
		return nil, err
	}
	s.noteNewest()
	return s, nil
}

// removeLeftovers removes every .tmp directory in snapshots/ but those
// of sinks still open, and says how many it removed.
func (s *snapshotStore) removeLeftovers() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return 0, fmt.Errorf("snapshots: %w", err)
	}
	removed := 0
	for _, e := range ents {
		if !e.IsDir() || !strings.HasSuffix(e.Name(), snapshotTmpSuffix) || s.active[e.Name()] {
			continue
		}
		if err := os.RemoveAll(filepath.Join(s.dir, e.Name())); err != nil {
			return removed, fmt.Errorf("snapshots: remove the unfinished %s: %w", e.Name(), err)
		}
		removed++
	}
	if removed > 0 {
		s.log.Info("removed unfinished snapshots", "count", removed)
	}
	return removed, nil
}

// cleanUp removes what a failed snapshot left, logging (not returning)
// a failure to.
func (s *snapshotStore) cleanUp() {
	if _, err := s.removeLeftovers(); err != nil {
		s.log.Warn("cannot remove unfinished snapshots", "error", err)
	}
}

func (s *snapshotStore) result(err error) {
	if s.onResult != nil {
		s.onResult(err)
	}
}

// Create implements raft.SnapshotStore.
func (s *snapshotStore) Create(version raft.SnapshotVersion, index, term uint64,
	configuration raft.Configuration, configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.FileSnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		// A full disk fails here (meta.json), leaving the .tmp directory.
		s.cleanUp()
		err = fmt.Errorf("snapshots: create: %w", err)
		s.result(err)
		return nil, err
	}
	name := sink.ID() + snapshotTmpSuffix
	s.mu.Lock()
	s.active[name] = true
	s.mu.Unlock()
	return &durableSink{SnapshotSink: sink, s: s, tmp: filepath.Join(s.dir, name)}, nil
}

// release forgets an open sink's directory.
func (s *snapshotStore) release(tmp string) {
	s.mu.Lock()
	delete(s.active, filepath.Base(tmp))
	s.mu.Unlock()
}

// durableSink is a FileSnapshotSink whose Close returns only once the
// snapshot is durable.
type durableSink struct {
	raft.SnapshotSink
	s   *snapshotStore
	tmp string // the snapshot's directory while it is written
	// done is set by the first Close or Cancel (the FSM's Persist closes
	// the sink, and Raft closes it again): later calls do nothing.
	done bool
}

// Close implements raft.SnapshotSink: the snapshot's directory is
// fsynced (state.bin and meta.json exist since Create; Close rewrites
// meta.json in place), then FileSnapshotSink's Close fsyncs state.bin and
// meta.json, renames the directory into place and fsyncs snapshots/.
func (d *durableSink) Close() error {
	if d.done {
		return nil
	}
	d.done = true
	defer d.s.release(d.tmp)
	if err := syncDir(d.tmp); err != nil {
		d.done = false
		_ = d.Cancel()
		err = fmt.Errorf("snapshots: %w", err)
		d.s.result(err)
		return err
	}
	if err := d.SnapshotSink.Close(); err != nil {
		d.s.release(d.tmp) // its own directory goes too
		d.s.cleanUp()
		err = fmt.Errorf("snapshots: %w", err)
		d.s.result(err)
		return err
	}
	d.s.noteNewest()
	d.s.result(nil)
	return nil
}

// Cancel implements raft.SnapshotSink, removing the directory even when
// FileSnapshotSink's Cancel stops short (it does when the flush fails).
func (d *durableSink) Cancel() error {
	if d.done {
		return nil
	}
	d.done = true
	defer d.s.release(d.tmp)
	err := d.SnapshotSink.Cancel()
	if rmErr := os.RemoveAll(d.tmp); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
		err = errors.Join(err, rmErr)
	}
	return err
}

// mkdirDurable creates directory dir (and missing parents) and fsyncs
// the parent of every directory it created, so that a data dir the node
// creates is still there after a power loss.
func mkdirDurable(dir string, perm os.FileMode) error {
	dir = filepath.Clean(dir)
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := mkdirDurable(parent, perm); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, perm); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return syncDir(parent)
}

// noteNewest records the size of the newest snapshot (0 if none).
func (s *snapshotStore) noteNewest() {
	if metas, err := s.List(); err == nil && len(metas) > 0 {
		s.newest.Store(metas[0].Size)
	}
}
