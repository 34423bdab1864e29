package node

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// A failing store's flag clears only on a successful write to that same
// store: with the boltdb log store the log and the stable store are one
// file (raft.db), and with raft-wal a probe write to wal-meta.db
// succeeds while every append of entries fails; neither may clear the
// log store's flag (a health that flips to ok between failed appends).
func TestStorageFailingClearsOnlyOnAWriteToTheSameStore(t *testing.T) {
	probed := 0
	w := &storeWatch{log: hclog.NewNullLogger(), probes: map[string]func() error{
		storeStable: func() error { probed++; return nil },
	}}
	full := syscall.ENOSPC
	w.note(storeLog, "/d/raft.db", full)
	w.note(storeStable, "/d/raft.db", nil)
	w.probe()
	if err := w.StorageError(); !errors.Is(err, full) || !strings.Contains(err.Error(), "/d/raft.db") {
		t.Fatalf("after a stable write and a probe: %v, want the log store's failure", err)
	}
	if probed != 0 {
		t.Errorf("the stable store was probed %d times while only the log store failed", probed)
	}
	w.note(storeSnapshots, "/d/snapshots", nil)
	if w.StorageError() == nil {
		t.Fatal("a snapshot cleared the log store's failure")
	}
	w.note(storeLog, "/d/raft.db", nil)
	if err := w.StorageError(); err != nil {
		t.Fatalf("after an append succeeded: %v", err)
	}

	w.note(storeStable, "/d/raft.db", full)
	w.note(storeLog, "/d/wal", full)
	w.probe()
	if err := w.StorageError(); err == nil || !strings.Contains(err.Error(), "/d/wal") || strings.Contains(err.Error(), "raft.db") {
		t.Fatalf("after the stable store's probe succeeded: %v, want the wal's failure alone", err)
	}
	if probed != 1 {
		t.Errorf("probes: %d, want the stable store's one", probed)
	}
}

// On a node with the wal log store, a failed append of entries keeps its
// health not ok through every disk probe: the probe of old wrote
// wal-meta.db, which succeeds while the segments cannot be written, and
// cleared the flag between failed appends (a health that said ok on 53
// of 72 polls while every append failed).
func TestWALAppendFailureOutlivesTheDiskProbe(t *testing.T) {
	c := newTestCluster(t, 1, func(cfg *Config) { cfg.LogStore = LogStoreWAL })
	n := c.nodes[0]
	n.watched.note(storeLog, n.LogPath(), syscall.ENOSPC)
	for range 3 {
		n.watched.probe()
	}
	if err := n.StorageError(); err == nil {
		t.Fatal("the disk probes cleared the failed append")
	}
	if h := n.Health(); h.Healthy || !strings.Contains(h.Reason, n.LogPath()) || !strings.Contains(h.Reason, "no space left") {
		t.Fatalf("health after the probes: %+v, want the failed append named", h)
	}
}
