package node

import (
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// roomOfReserve is a stable store on a disk whose only free room is the
// disk reserve: its writes fail with ENOSPC while the reserve exists.
type roomOfReserve struct {
	raft.StableStore
	reserve string
	writes  atomic.Int64
}

func (s *roomOfReserve) SetUint64(k []byte, v uint64) error {
	if _, err := os.Stat(s.reserve); err == nil {
		return &os.PathError{Op: "write", Path: "raft.db", Err: syscall.ENOSPC}
	}
	s.writes.Add(1)
	return nil
}

// A term write that fails for want of space (on which hashicorp/raft
// panics) succeeds once the node released its disk reserve; the node is
// told to stop (ErrDiskFull, once), and no log entry is stored after it,
// so that the room stays for terms and votes.
func TestDiskReserveGivesTheTermWriteRoomAndStopsTheNode(t *testing.T) {
	dir := t.TempDir()
	res, err := setDiskReserve("n1", dir)
	if err != nil {
		t.Fatal(err)
	}
	if !allocated(filepath.Join(dir, diskReserveName), diskReserveSize) {
		t.Fatalf("the reserve is not a %d-byte file with its blocks allocated", diskReserveSize)
	}
	var stops []string
	w := &storeWatch{log: hclog.NewNullLogger(), reserve: res, onFull: func(file string, err error) {
		if !noSpace(err) {
			t.Errorf("onFull(%s, %v): not a disk-full error", file, err)
		}
		stops = append(stops, file)
	}}
	stable := &roomOfReserve{reserve: filepath.Join(dir, diskReserveName)}
	ws := &watchedStable{StableStore: stable, file: filepath.Join(dir, "raft.db"), w: w}
	if err := ws.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatalf("the term write on a disk whose only room is the reserve: %v", err)
	}
	if stable.writes.Load() != 1 {
		t.Fatalf("%d term writes stored, want 1", stable.writes.Load())
	}
	if _, err := os.Stat(filepath.Join(dir, diskReserveName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the reserve is still there: %v", err)
	}
	if err := ws.SetUint64([]byte("CurrentTerm"), 8); err != nil {
		t.Fatalf("a second term write: %v", err)
	}
	if len(stops) != 1 {
		t.Fatalf("onFull called %d times, want once", len(stops))
	}
	wl := &watchedLog{store: raft.NewInmemStore(), file: filepath.Join(dir, "wal"), w: w}
	if err := wl.StoreLogs([]*raft.Log{{Index: 1, Term: 8}}); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("an append after the disk filled up: %v, want ErrDiskFull", err)
	}
}
