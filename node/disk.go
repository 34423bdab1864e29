package node

import (
	"fmt"
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
