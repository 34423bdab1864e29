package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// Free space a node needs on its data dir's filesystem, beyond what it
// holds (see DESIGN, "Disks"): room for the next raft-wal segment (with
// the wal log store; raft-wal preallocates each), for two snapshots of
// the newest one's size (a new one is written before the oldest of the
// two kept is removed), and diskFreeSlack for raft.db, meta files and the
// log's growth between snapshots.
const (
	walSegmentSize = 64 << 20 // raft-wal's default segment size
	diskFreeSlack  = 4 << 20
)

// DiskSpace is the free space on the filesystem of a node's data dir and
// the margin the node needs (DESIGN, "Disks").
type DiskSpace struct {
	Free   uint64 // bytes available to the node (statfs f_bavail)
	Margin uint64 // bytes it must keep free
}

// Low reports whether the free space is below the margin.
func (d DiskSpace) Low() bool { return d.Free < d.Margin }

// DiskSpace reads the free space of the data dir's filesystem.
func (n *Node) DiskSpace() (DiskSpace, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(n.cfg.DataDir, &st); err != nil {
		return DiskSpace{}, fmt.Errorf("statfs %s: %w", n.cfg.DataDir, err)
	}
	d := DiskSpace{Free: st.Bavail * uint64(st.Bsize), Margin: diskFreeSlack}
	if n.snaps != nil {
		d.Margin += 2 * uint64(max(n.snaps.newest.Load(), 0))
	}
	if n.walLog != nil {
		d.Margin += walSegmentSize
	}
	return d, nil
}

// A full disk must not crash a node: hashicorp/raft panics when it cannot
// store a new term (setCurrentTerm), from its own goroutine, where no
// panic can be recovered. So a node sets aside diskReserveSize bytes in
// its data dir (diskReserveName, allocated for real). When a write to a
// Raft store (the log, or raft.db's term and vote) fails for want of
// space, the node deletes the reserve, refuses every later append of log
// entries (so that the room stays for terms and votes), and stops with
// ErrDiskFull (DESIGN, "Disks"); a term or vote write that failed so is
// written again, and then succeeds. A term or
// vote is one bbolt transaction of a few 4 KiB pages (raft.db keeps no
// freelist on disk): 1 MiB holds dozens, far more than a stopping node
// writes. A node starts only once it could set the reserve aside again.
const (
	diskReserveName = "disk-reserve"
	diskReserveSize = 1 << 20
)

// ErrDiskFull is wrapped by the error of a node that stopped, or refused
// to start, because the filesystem of its data dir is full (ENOSPC).
var ErrDiskFull = errors.New("disk full (ENOSPC)")

// noSpace reports whether err is a write that failed for want of space.
func noSpace(err error) bool {
	return err != nil && (errors.Is(err, syscall.ENOSPC) || strings.Contains(err.Error(), "no space left on device"))
}

// diskFullRepair ends every disk-full error: what to do.
const diskFullRepair = "free space on that filesystem; a supervisor (the systemd unit, the Kubernetes pod) restarts the node, " +
	"and it starts once it can set its reserve aside again (docs/OPERATIONS.md, \"A full disk\")"

// diskReserve is a data dir's reserve file.
type diskReserve struct {
	path string
	mu   sync.Mutex
	gone bool // released
}

// setDiskReserve makes sure dir holds its reserve file, allocated in
// full, with at least diskReserveSize more free beside it (a node that
// stopped on a full disk released its reserve: that room alone is not
// room to run), and returns it; a filesystem without that room is
// ErrDiskFull.
func setDiskReserve(id, dir string) (*diskReserve, error) {
	path := filepath.Join(dir, diskReserveName)
	full := func(what string) error {
		return fmt.Errorf("node %s: %w: %s has no room for the %d MiB reserve %s (the room for its term and vote when the disk fills up) "+
			"and %d MiB more: %s; %s", id, ErrDiskFull, dir, diskReserveSize>>20, path, diskReserveSize>>20, what, diskFullRepair)
	}
	if !allocated(path, diskReserveSize) {
		err := allocate(path, diskReserveSize)
		if noSpace(err) {
			os.Remove(path)
			return nil, full(err.Error())
		}
		if err != nil {
			return nil, fmt.Errorf("node %s: set aside the disk reserve %s: %w", id, path, err)
		}
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err == nil && st.Bavail*uint64(st.Bsize) < diskReserveSize {
		return nil, full(fmt.Sprintf("%d KiB free beside it", st.Bavail*uint64(st.Bsize)>>10))
	}
	return &diskReserve{path: path}, nil
}

// allocated reports whether path is a file of size bytes, all of them
// allocated.
func allocated(path string, size int64) bool {
	st, err := os.Stat(path)
	if err != nil || st.Size() != size {
		return false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && sys.Blocks*512 >= size
}

// allocate makes path a file of size bytes whose blocks are allocated
// (fallocate, or zeros where the filesystem has none), synced.
func allocate(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	err = syscall.Fallocate(int(f.Fd()), 0, 0, size)
	if errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) {
		_, err = f.WriteAt(make([]byte, size), 0)
	}
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// release deletes the reserve, once; it reports whether this call did.
func (r *diskReserve) release() bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gone {
		return false
	}
	r.gone = true
	return os.Remove(r.path) == nil
}
