package node

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/raftlock/raftlock/fsm"
)

// A damaged data dir is refused before Raft opens it, with an error that
// names the file, what is wrong and the repair (DataDamagedError), never
// a fault or a panic later (docs/DAMAGED.md).

// repairHint is the repair of every damaged data dir: the other members
// hold the state.
const repairHint = "wipe this data dir and rejoin: `raftlock members remove %s` on the cluster, then start this node with --join in place of --peers (docs/DAMAGED.md)"

// DataDamagedError is why a node refused to start on a damaged data dir.
type DataDamagedError struct {
	// File is the damaged file; What says what is wrong with it.
	File, What string
	// Repair says what to do.
	Repair string
}

func (e *DataDamagedError) Error() string {
	return fmt.Sprintf("data dir damaged: %s: %s; %s", e.File, e.What, e.Repair)
}

// DataNewerError is why a node refused to start on, or stopped at, a
// data dir that holds a command version this build cannot read, written
// by a newer build (a node rolled back after an upgrade): the data dir is
// sound, and a newer build reads it.
type DataNewerError struct {
	// File holds the entry; Version is the command version found.
	File    string
	Version byte
}

func (e *DataNewerError) Error() string {
	return fmt.Sprintf("data dir written by a newer build: %s holds command version %d, and this build reads versions %d to %d; "+
		"the data dir is not damaged: run a newer build (one that reads command version %d) on it, and do not wipe it (docs/DAMAGED.md, \"A newer build's data dir\")",
		e.File, e.Version, fsm.VersionUnchecked, fsm.Version, e.Version)
}

func (n *Node) damaged(file, format string, args ...any) error {
	return DataDamaged(n.cfg.ID, file, fmt.Sprintf(format, args...))
}

// DataDamaged is the refusal of node id to start on file, damaged as what
// says, with the repair.
func DataDamaged(id, file, what string) *DataDamagedError {
	return &DataDamagedError{File: file, What: what, Repair: fmt.Sprintf(repairHint, id)}
}

// bbolt's layout, as far as the checks need it (go.etcd.io/bbolt
// internal/common): a page header of 16 bytes, then on the two meta pages
// (0 and 1) magic, version, page size, flags (4 bytes each), the root
// bucket (16), the freelist page, the high-water page id and the txid (8
// each), and an FNV-1a 64 of those 56 bytes.
const (
	boltPageHeader = 16
	boltMetaLen    = 56
	boltMagic      = 0xED0CDAED
	boltVersion    = 2
)

// boltMeta is what checkRaftDB reads of a meta page.
type boltMeta struct {
	pageSize uint32
	pgid     uint64 // high-water mark: the file holds pages [0, pgid)
	txid     uint64
}

// readBoltMeta reads and verifies the meta page at off of f.
func readBoltMeta(f *os.File, off int64) (boltMeta, bool) {
	buf := make([]byte, boltPageHeader+boltMetaLen+8)
	if _, err := f.ReadAt(buf, off); err != nil {
		return boltMeta{}, false
	}
	m := buf[boltPageHeader:]
	h := fnv.New64a()
	h.Write(m[:boltMetaLen])
	le := binary.LittleEndian
	if le.Uint32(m[0:]) != boltMagic || le.Uint32(m[4:]) != boltVersion || le.Uint64(m[boltMetaLen:]) != h.Sum64() {
		return boltMeta{}, false
	}
	return boltMeta{pageSize: le.Uint32(m[8:]), pgid: le.Uint64(m[40:]), txid: le.Uint64(m[48:])}, true
}

// checkRaftDB refuses a raft.db that bbolt would fault on: no valid meta
// page, a file shorter than its meta page says (a truncation: bbolt maps
// the missing pages and dies of SIGBUS reading them), or pages that fail
// bbolt's own consistency check (run with faults turned into panics, and
// those into an error). A missing file is fine (a new node).
func (n *Node) checkRaftDB(path string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil // a new node
	}
	if err := CheckRaftDBFile(n.cfg.ID, path); err != nil {
		return err
	}
	return n.checkBoltPages(path)
}

// CheckRaftDBFile refuses (DataDamagedError for node id) a raft.db whose
// meta pages are both invalid or that is shorter than its meta page says:
// plain reads, no memory map, so it cannot fault or hang on a truncated
// file (raftlockd runs it before its deeper checks).
func CheckRaftDBFile(id, path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("node: open %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("node: stat %s: %w", path, err)
	}
	if st.Size() == 0 {
		return DataDamaged(id, path, "the file is empty")
	}
	m0, ok0 := readBoltMeta(f, 0)
	size := int64(os.Getpagesize())
	if ok0 {
		size = int64(m0.pageSize)
	}
	m1, ok1 := readBoltMeta(f, size)
	meta := m0
	switch {
	case !ok0 && !ok1:
		return DataDamaged(id, path, "neither of its two meta pages is valid (not a bbolt file, or both overwritten)")
	case !ok0 || (ok1 && m1.txid > m0.txid):
		meta = m1
	}
	if want := int64(meta.pgid) * int64(meta.pageSize); st.Size() < want {
		return DataDamaged(id, path, fmt.Sprintf("the file is truncated: %d bytes, but its meta page (txid %d) says %d pages of %d bytes (%d bytes)",
			st.Size(), meta.txid, meta.pgid, meta.pageSize, want))
	}
	return nil
}

// checkBoltPages reads every bucket, key and value of raft.db, read-only,
// in this goroutine, with memory faults turned into panics and panics into
// a DataDamagedError: a page that bbolt would fault or panic on later, in
// Raft's goroutines, is found here. (bbolt's own Tx.Check and the freelist
// scan of a writable open run in goroutines of their own, where a panic
// cannot be recovered: raftlockd runs those in a child process first, see
// CheckDataDirDeep.)
func (n *Node) checkBoltPages(path string) error {
	if err := walkBolt(path); err != nil {
		return n.damaged(path, "%v", err)
	}
	return nil
}

// walkBolt reads every key and value of the bbolt file at path.
func walkBolt(path string) (err error) {
	done := make(chan error, 1)
	go func() {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("reading its pages failed: %v", p)
			}
		}()
		db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
		if err != nil {
			done <- fmt.Errorf("bbolt cannot open it: %w", err)
			return
		}
		defer db.Close()
		done <- db.View(func(tx *bbolt.Tx) error {
			return tx.ForEach(func(name []byte, b *bbolt.Bucket) error { return walkBucket(b) })
		})
	}()
	return <-done
}

func walkBucket(b *bbolt.Bucket) error {
	return b.ForEach(func(k, v []byte) error {
		if v == nil {
			if sub := b.Bucket(k); sub != nil {
				return walkBucket(sub)
			}
		}
		return nil
	})
}

// CheckDataDirDeep runs bbolt's full consistency check of dir's raft.db
// (and of wal/wal-meta.db, raft-wal's bbolt index of its segments) and
// opens each writable as a node does (which rebuilds the freelist by
// scanning every page). Both run goroutines of bbolt's own, where a
// damaged page can crash the process beyond recovery: call it in a child
// process (raftlockd check-data) and treat its crash as the damage.
// Its error names the damaged file.
func CheckDataDirDeep(dir string) error {
	for _, path := range DeepCheckedFiles(dir) {
		if err := CheckBoltFileDeep(path); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return nil
}

// DeepCheckedFiles are the bbolt files of dir that CheckDataDirDeep
// checks, in its order.
func DeepCheckedFiles(dir string) []string {
	return []string{filepath.Join(dir, "raft.db"), filepath.Join(dir, walDirName, "wal-meta.db")}
}

// CheckBoltFileDeep is CheckDataDirDeep of one bbolt file (nil if it
// does not exist).
func CheckBoltFileDeep(path string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := walkBolt(path); err != nil {
		return err
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second, NoFreelistSync: true, FreelistType: bbolt.FreelistMapType})
	if err != nil {
		return fmt.Errorf("bbolt cannot open it: %w", err)
	}
	defer db.Close()
	return db.View(func(tx *bbolt.Tx) error {
		for err := range tx.Check() {
			return fmt.Errorf("bbolt's page check failed: %v", err)
		}
		return nil
	})
}

// checkOpenStores reads what checkStores judges from the open stores,
// and checks every command in the log against its checksum (a corrupt
// entry is refused here, at start, naming it, rather than met later).
func (n *Node) checkOpenStores(dbPath, logPath string, logs raft.LogStore, stable raft.StableStore, snaps *raft.FileSnapshotStore) error {
	first, err := logs.FirstIndex()
	if err != nil {
		return n.damaged(logPath, "its first log index cannot be read: %v", err)
	}
	last, err := logs.LastIndex()
	if err != nil {
		return n.damaged(logPath, "its last log index cannot be read: %v", err)
	}
	term, err := stable.GetUint64([]byte("CurrentTerm"))
	if err != nil && !errors.Is(err, raftboltdb.ErrKeyNotFound) {
		return n.damaged(dbPath, "its current term cannot be read: %v", err)
	}
	metas, err := snaps.List()
	if err != nil {
		return fmt.Errorf("node: list snapshots: %w", err)
	}
	// Raft restores the newest snapshot that reads back with its CRC, and
	// refuses to start if none does: find it first, and say which
	// snapshots are damaged.
	var snapIndex uint64
	var bad []string
	for _, m := range metas {
		if err := readSnapshot(snaps, m.ID); err != nil {
			bad = append(bad, fmt.Sprintf("%s (%v)", m.ID, err))
			continue
		}
		snapIndex = m.Index
		break
	}
	if len(metas) > 0 && len(bad) == len(metas) {
		return n.damaged(filepath.Join(n.cfg.DataDir, "snapshots"), "no snapshot reads back whole: %s", strings.Join(bad, "; "))
	}
	if len(bad) > 0 {
		n.log.Warn("a damaged snapshot is skipped; an older one is used", "damaged", strings.Join(bad, "; "), "used_index", snapIndex)
	}
	snapDirs, _ := filepath.Glob(filepath.Join(n.cfg.DataDir, "snapshots", "*"))
	if err := n.checkStores(dbPath, logPath, first, last, term, snapIndex, snapDirs); err != nil {
		return err
	}
	if last == 0 {
		return nil
	}
	// Every entry the log still holds: those after the snapshot, which
	// Raft will apply, and the trailing ones the snapshot covers, which
	// the leader sends to a lagging follower. Entries at or below the
	// snapshot may be gone (raft-boltdb deletes a compacted range with
	// a cursor that can step over a key, so one may also be left
	// behind): a missing one there is no damage.
	var l raft.Log
	for i := first; i <= last; i++ {
		if err := logs.GetLog(i, &l); err != nil {
			if i <= snapIndex && errors.Is(err, raft.ErrLogNotFound) {
				continue
			}
			return n.damaged(logPath, "log entry %d of [%d, %d] cannot be read: %v", i, first, last, err)
		}
		if l.Type != raft.LogCommand {
			continue
		}
		if _, err := fsm.Decode(l.Data); err != nil {
			var newer *fsm.NewerVersionError
			if errors.As(err, &newer) {
				return fmt.Errorf("log entry %d: %w", i, &DataNewerError{File: logPath, Version: newer.Version})
			}
			return n.damaged(logPath, "%v", &fsm.CorruptEntryError{Index: i, Err: err})
		}
	}
	return nil
}

// checkStores refuses stores that Raft would panic on or misuse, once
// they are open: a log that starts after entry 1 with no usable snapshot
// of the entries before it (the newest snapshot's meta.json or state.bin
// lost: Raft would panic "log not found"), and a raft.db that lost its
// stable store (current term and vote) while snapshots remain (the node
// could vote twice in one term).
func (n *Node) checkStores(dbPath, logPath string, first, last, term uint64, snapIndex uint64, snapDirs []string) error {
	if term == 0 && last == 0 && len(snapDirs) > 0 {
		return n.damaged(dbPath, "it holds no term, vote or log, but %d snapshot(s) remain in %s: the file was lost or replaced, "+
			"and with it the node's term and vote (it could vote twice in a term)", len(snapDirs), snapDirs[0])
	}
	if term == 0 && last > 0 && logPath != dbPath {
		// Raft stores a term before any entry of it: a log without one
		// means raft.db, the stable store, was lost or replaced.
		return n.damaged(dbPath, "it holds no term or vote, but the log in %s holds entries up to %d: the file was lost or replaced, "+
			"and with it the node's term and vote (it could vote twice in a term)", logPath, last)
	}
	if first > 1 && snapIndex+1 < first {
		return n.damaged(logPath, "its log starts at entry %d, but no snapshot covers the entries before it (the newest usable snapshot ends at %d; "+
			"a snapshot whose meta.json or state.bin is missing or damaged is skipped)", first, snapIndex)
	}
	return nil
}

// readSnapshot reads snapshot id whole, which checks its CRC (hashicorp/raft
// verifies it as the reader is closed).
func readSnapshot(snaps *raft.FileSnapshotStore, id string) error {
	_, rc, err := snaps.Open(id)
	if err != nil {
		return err
	}
	if _, err := io.Copy(io.Discard, rc); err != nil {
		rc.Close()
		return err
	}
	return rc.Close()
}
