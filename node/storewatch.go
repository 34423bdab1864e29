package node

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// storageLogEvery is how often a storage error that goes on is logged.
const storageLogEvery = 30 * time.Second

// storeWatch watches the writes of a node's Raft stores (the log store,
// raft.db or wal/, and the stable store, raft.db): a failed write (a full
// disk, an I/O error) is counted, logged (at most once per
// storageLogEvery while they go on, with the number suppressed) and kept
// as the node's storage error until a write succeeds again, so that
// /v1/health and the metrics say a node cannot write, which Raft alone
// only logs.
type storeWatch struct {
	log hclog.Logger

	errors atomic.Uint64 // failed writes, ever
	mu     sync.Mutex
	last   error     // the last write's error, nil once one succeeds
	logged time.Time // when the last error line was written
	quiet  int       // errors not logged since
}

// note records the outcome of a write to file.
func (s *storeWatch) note(file string, err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		if s.last != nil {
			s.log.Info("Raft store writes succeed again", "file", file, "failed_meanwhile", s.quiet)
			s.quiet = 0
		}
		s.last = nil
		return nil
	}
	s.errors.Add(1)
	s.last = fmt.Errorf("%s: %w", file, err)
	if now := time.Now(); now.Sub(s.logged) >= storageLogEvery {
		s.log.Error("Raft store write failed: this node cannot store log entries or its term and vote", "file", file, "error", err, "suppressed", s.quiet)
		s.logged, s.quiet = now, 0
	} else {
		s.quiet++
	}
	return err
}

// StorageError is the error of the last write to a Raft store (naming
// its file), nil if it succeeded (or none failed).
func (s *storeWatch) StorageError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// watchedLog is a raft.LogStore with its writes watched.
type watchedLog struct {
	raft.LogStore
	file string
	w    *storeWatch
}

// StoreLog implements raft.LogStore.
func (s *watchedLog) StoreLog(l *raft.Log) error { return s.w.note(s.file, s.LogStore.StoreLog(l)) }

// StoreLogs implements raft.LogStore.
func (s *watchedLog) StoreLogs(ls []*raft.Log) error {
	return s.w.note(s.file, s.LogStore.StoreLogs(ls))
}

// DeleteRange implements raft.LogStore.
func (s *watchedLog) DeleteRange(min, max uint64) error {
	return s.w.note(s.file, s.LogStore.DeleteRange(min, max))
}

// IsMonotonic implements raft.MonotonicLogStore for a store that does
// (raft-wal: it takes no gap in the indexes, so Raft removes the whole
// log after restoring a snapshot rather than leaving a gap).
func (s *watchedLog) IsMonotonic() bool {
	m, ok := s.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// watchedStable is a raft.StableStore with its writes watched.
type watchedStable struct {
	raft.StableStore
	file string
	w    *storeWatch
}

// Set implements raft.StableStore.
func (s *watchedStable) Set(k, v []byte) error { return s.w.note(s.file, s.StableStore.Set(k, v)) }

// SetUint64 implements raft.StableStore.
func (s *watchedStable) SetUint64(k []byte, v uint64) error {
	return s.w.note(s.file, s.StableStore.SetUint64(k, v))
}

// StorageError is why this node cannot write its Raft stores (raft.db,
// and wal/ with the wal log store), nil if its last write succeeded.
func (n *Node) StorageError() error {
	if n.watched == nil {
		return nil
	}
	return n.watched.StorageError()
}
