package node

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/prometheus/client_golang/prometheus"
)

// storageLogEvery is how often a storage error that goes on is logged.
const storageLogEvery = 30 * time.Second

// storeWatch watches the writes of a node's storage: the Raft stores
// (the log store, raft.db or wal/, and the stable store, raft.db) and the
// snapshot store (snapshots/). A failed write (a full disk, an I/O error)
// is counted, logged (at most once per storageLogEvery while they go on,
// with the number suppressed) and kept as a storage error of its store
// until a write to the same store succeeds again (for snapshots/: until a
// snapshot completes), so that /v1/health and the metrics say a node
// cannot write, which Raft alone only logs. A success elsewhere does not
// clear it: with raft-wal, log writes into a preallocated segment go on
// succeeding on a full disk while every snapshot fails, and a write to
// wal-meta.db or to a key of raft.db succeeds while every append of
// entries fails. With the boltdb log store the log and the stable store
// are one file, raft.db, watched as two stores.
type storeWatch struct {
	log hclog.Logger
	// latency, if set, observes every write's duration (fsync included)
	// by store ("log", "stable").
	latency *prometheus.HistogramVec
	// logEWMA is the moving average of the log store's write latency
	// (µs; weight 1/4 per write), which the leader compares with its
	// followers' (slowdisk.go).
	logEWMA atomic.Int64
	// probes test a failing store (while it fails, every diskProbeEvery)
	// by writing to that store: a success clears its error, so that the
	// flag does not stay up on a node that writes nothing more once its
	// disk works again. Only the stable store has one (a key of its own
	// in raft.db); the log store's error clears on the next append that
	// succeeds (Raft sends a follower the entries it failed to store
	// again, and a leader whose append failed steps down and is sent them
	// by the next), since no probe write can prove that appends work.
	probes map[string]func() error
	slowAt time.Time // when the last slow write was logged

	// reserve is the data dir's disk reserve (disk.go); full is set once
	// a write failed for want of space and the reserve was released, and
	// onFull is then called once.
	reserve *diskReserve
	full    atomic.Bool
	onFull  func(file string, err error)

	errors atomic.Uint64 // failed writes, ever
	mu     sync.Mutex
	// failing holds, per store (storeLog, storeStable, storeSnapshots),
	// the error of its last write while that failed, naming the file.
	failing map[string]error
	logged  time.Time // when the last error line was written
	quiet   int       // errors not logged since
}

// The stores a storeWatch tells apart.
const (
	storeLog       = "log"
	storeStable    = "stable"
	storeSnapshots = "snapshots"
)

// note records the outcome of a write to store, held in file.
func (s *storeWatch) note(store, file string, err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		if _, ok := s.failing[store]; ok {
			delete(s.failing, store)
			s.log.Info("storage writes succeed again", "store", store, "file", file, "failed_meanwhile", s.quiet)
			if len(s.failing) == 0 {
				s.quiet = 0
			}
		}
		return nil
	}
	s.errors.Add(1)
	if s.failing == nil {
		s.failing = make(map[string]error)
	}
	s.failing[store] = fmt.Errorf("%s: %w", file, err)
	if now := time.Now(); now.Sub(s.logged) >= storageLogEvery {
		what := "Raft store write failed: this node cannot store log entries or its term and vote"
		if store == storeSnapshots {
			what = "snapshot failed: this node cannot compact its log (it counts as failing storage until a snapshot succeeds)"
		}
		s.log.Error(what, "store", store, "file", file, "error", err, "suppressed", s.quiet)
		s.logged, s.quiet = now, 0
	} else {
		s.quiet++
	}
	return err
}

// observe records a write to store ("log", "stable") that took d, and
// logs one slower than slowWrite (at most once per storageLogEvery).
func (s *storeWatch) observe(store, file string, d time.Duration) {
	if s.latency != nil {
		s.latency.WithLabelValues(store).Observe(d.Seconds())
	}
	if store == "log" {
		us := d.Microseconds()
		for {
			old := s.logEWMA.Load()
			next := us
			if old != 0 {
				next = old + (us-old)/4
			}
			if s.logEWMA.CompareAndSwap(old, next) {
				break
			}
		}
	}
	if d < slowWrite {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if now := time.Now(); now.Sub(s.slowAt) >= storageLogEvery {
		s.slowAt = now
		s.log.Warn("slow disk: a Raft store write (fsync included) took longer than "+slowWrite.String(), "file", file, "took", d.Round(time.Millisecond))
	}
}

// slowWrite is the write (fsync included) latency logged as slow.
const slowWrite = 500 * time.Millisecond

// diskProbeEvery is how often a failing file is probed.
const diskProbeEvery = time.Second

// diskFull handles a write to a Raft store, in file, that failed for
// want of space (err): it releases the disk reserve, refuses every later
// append (watchedLog), calls onFull the first time (the node stops), and
// reports whether a retry of the write may succeed (the reserve was set).
func (s *storeWatch) diskFull(file string, err error) bool {
	first := s.full.CompareAndSwap(false, true)
	s.reserve.release()
	if first && s.onFull != nil {
		s.onFull(file, err)
	}
	return s.reserve != nil
}

// probe tries every failing store's probe once; a success clears it.
func (s *storeWatch) probe() {
	s.mu.Lock()
	var todo []string
	for store := range s.failing {
		if _, ok := s.probes[store]; ok {
			todo = append(todo, store)
		}
	}
	s.mu.Unlock()
	for _, store := range todo {
		if err := s.probes[store](); err == nil {
			s.note(store, "", nil)
		}
	}
}

// StorageError is the error of every store whose last write failed
// (naming the file; in the order of the stores' names), nil if none.
func (s *storeWatch) StorageError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.failing) == 0 {
		return nil
	}
	files := make([]string, 0, len(s.failing))
	for f := range s.failing {
		files = append(files, f)
	}
	sort.Strings(files)
	if len(files) == 1 {
		return s.failing[files[0]]
	}
	msgs := make([]string, len(files))
	for i, f := range files {
		msgs[i] = s.failing[f].Error()
	}
	return errors.New(strings.Join(msgs, "; "))
}

// watchedLog is a raft.LogStore with its writes watched. With the wal
// log store it also repairs raft-wal when it can no longer append (see
// rebuild): the store it wraps may then be replaced, so every call takes
// mu.
type watchedLog struct {
	file string
	w    *storeWatch

	mu    sync.RWMutex
	store raft.LogStore
	// rebuild, if set, makes a new store holding the same entries when
	// the store answers wal.ErrSealed (walrebuild.go); it is tried at most
	// once per rebuildEvery.
	rebuild     func(old raft.LogStore) (raft.LogStore, error)
	lastRebuild time.Time
}

// rebuildEvery is how often a stuck raft-wal is rebuilt at most (each try
// needs a segment's worth of free space).
const rebuildEvery = 5 * time.Second

// FirstIndex implements raft.LogStore.
func (s *watchedLog) FirstIndex() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.store.FirstIndex()
}

// LastIndex implements raft.LogStore.
func (s *watchedLog) LastIndex() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.store.LastIndex()
}

// GetLog implements raft.LogStore.
func (s *watchedLog) GetLog(index uint64, l *raft.Log) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.store.GetLog(index, l)
}

// StoreLog implements raft.LogStore.
func (s *watchedLog) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs implements raft.LogStore.
func (s *watchedLog) StoreLogs(ls []*raft.Log) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w.full.Load() {
		return s.w.note(storeLog, s.file, fmt.Errorf("%w: no more log entries are stored, the room left is kept for the term and vote", ErrDiskFull))
	}
	start := time.Now()
	err := s.store.StoreLogs(ls)
	s.w.observe("log", s.file, time.Since(start))
	if errors.Is(err, wal.ErrSealed) && s.rebuild != nil && time.Since(s.lastRebuild) >= rebuildEvery {
		s.lastRebuild = time.Now()
		if fresh, rerr := s.rebuild(s.store); rerr != nil {
			s.w.log.Warn("raft-wal cannot append (segment is sealed) and rebuilding it failed; retrying", "error", rerr, "every", rebuildEvery)
		} else {
			s.store = fresh
			err = s.store.StoreLogs(ls)
		}
	}
	if noSpace(err) {
		s.w.diskFull(s.file, err)
	}
	return s.w.note(storeLog, s.file, err)
}

// DeleteRange implements raft.LogStore.
func (s *watchedLog) DeleteRange(min, max uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.store.DeleteRange(min, max)
	if noSpace(err) {
		s.w.diskFull(s.file, err)
	}
	return s.w.note(storeLog, s.file, err)
}

// IsMonotonic implements raft.MonotonicLogStore for a store that does
// (raft-wal: it takes no gap in the indexes, so Raft removes the whole
// log after restoring a snapshot rather than leaving a gap).
func (s *watchedLog) IsMonotonic() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m, ok := s.store.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// Close closes the store it wraps (the current one, after a rebuild).
func (s *watchedLog) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.store.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// watchedStable is a raft.StableStore with its writes watched.
type watchedStable struct {
	raft.StableStore
	file string
	w    *storeWatch
}

// Set implements raft.StableStore.
func (s *watchedStable) Set(k, v []byte) error {
	return s.write(func() error { return s.StableStore.Set(k, v) })
}

// SetUint64 implements raft.StableStore.
func (s *watchedStable) SetUint64(k []byte, v uint64) error {
	return s.write(func() error { return s.StableStore.SetUint64(k, v) })
}

// write runs set, watched; one that fails for want of space runs again
// with the disk reserve released (storeWatch.diskFull), so that Raft
// stores its term and vote on a full disk rather than panic.
func (s *watchedStable) write(set func() error) error {
	start := time.Now()
	err := set()
	if noSpace(err) && s.w.diskFull(s.file, err) {
		err = set()
	}
	s.w.observe("stable", s.file, time.Since(start))
	return s.w.note(storeStable, s.file, err)
}

// StorageError is why this node cannot write its Raft stores (raft.db,
// and wal/ with the wal log store), nil if its last write succeeded.
func (n *Node) StorageError() error {
	if n.watched == nil {
		return nil
	}
	return n.watched.StorageError()
}
