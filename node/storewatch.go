package node

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// storageLogEvery is how often a storage error that goes on is logged.
const storageLogEvery = 30 * time.Second

// watchedStore is the node's log and stable store (raft.db) with its
// writes watched: a failed write (a full disk, an I/O error) is counted,
// logged (at most once per storageLogEvery while they go on, with the
// number suppressed) and kept as the node's storage error until a write
// succeeds again, so that /v1/health and the metrics say a node cannot
// write, which Raft alone only logs.
type watchedStore struct {
	*raftboltdb.BoltStore
	log hclog.Logger

	errors atomic.Uint64 // failed writes, ever
	mu     sync.Mutex
	last   error     // the last write's error, nil once one succeeds
	logged time.Time // when the last error line was written
	quiet  int       // errors not logged since
}

func (s *watchedStore) note(err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		if s.last != nil {
			s.log.Info("raft.db writes succeed again", "failed_meanwhile", s.quiet)
			s.quiet = 0
		}
		s.last = nil
		return nil
	}
	s.errors.Add(1)
	s.last = err
	if now := time.Now(); now.Sub(s.logged) >= storageLogEvery {
		s.log.Error("raft.db write failed: this node cannot store log entries or its term and vote", "error", err, "suppressed", s.quiet)
		s.logged, s.quiet = now, 0
	} else {
		s.quiet++
	}
	return err
}

// StorageError is the error of the last write to raft.db, nil if it
// succeeded (or none failed).
func (s *watchedStore) StorageError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// StoreLog implements raft.LogStore.
func (s *watchedStore) StoreLog(l *raft.Log) error { return s.note(s.BoltStore.StoreLog(l)) }

// StoreLogs implements raft.LogStore.
func (s *watchedStore) StoreLogs(ls []*raft.Log) error { return s.note(s.BoltStore.StoreLogs(ls)) }

// DeleteRange implements raft.LogStore.
func (s *watchedStore) DeleteRange(min, max uint64) error {
	return s.note(s.BoltStore.DeleteRange(min, max))
}

// Set implements raft.StableStore.
func (s *watchedStore) Set(k, v []byte) error { return s.note(s.BoltStore.Set(k, v)) }

// SetUint64 implements raft.StableStore.
func (s *watchedStore) SetUint64(k []byte, v uint64) error {
	return s.note(s.BoltStore.SetUint64(k, v))
}

// StorageError is why this node cannot write its raft.db (nil if its
// last write succeeded).
func (n *Node) StorageError() error {
	if n.watched == nil {
		return nil
	}
	return n.watched.StorageError()
}
