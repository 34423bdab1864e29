package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/migrate"
	"golang.org/x/sys/unix"
)

// A raft-wal whose disk filled up while it rotated to a new segment can
// never append again: the full segment is sealed (its index block is
// written) but the rotation failed (the meta commit or the new segment's
// preallocation: no space), and raft-wal rotates only after the append
// that seals, so every later append answers "segment is sealed", also
// after space is freed and after a restart (raft-wal reopens the sealed
// tail as its tail). The node repairs it by rebuilding wal/: the same
// entries copied into a fresh raft-wal beside it, which then takes wal/'s
// place in one atomic exchange.
//
// Crash safety: until the exchange wal/ is the old log and the copy is
// wal.rebuilt/ (or, unfinished, wal.rebuilding/); after it wal/ is the copy
// and wal.rebuilt/ the old log. Both hold every entry, so a node that
// starts removes whichever leftover it finds (removeWALRebuilds).
const (
	walRebuildingDir = walDirName + ".rebuilding"
	walRebuiltDir    = walDirName + ".rebuilt"
)

// removeWALRebuilds removes what an interrupted rebuild left in dir.
func removeWALRebuilds(dir string) error {
	removed := false
	for _, name := range []string{walRebuildingDir, walRebuiltDir} {
		p := filepath.Join(dir, name)
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("remove the leftover %s: %w", p, err)
		}
		removed = true
	}
	if removed {
		return syncDir(dir)
	}
	return nil
}

// rebuildWAL copies the entries of old (the node's raft-wal, stuck) into
// a new raft-wal and puts it in wal/'s place; it returns the new one,
// open. On failure old stays the node's log, open. It needs a segment's
// worth of free space (64 MiB) plus the log's size.
func (n *Node) rebuildWAL(old raft.LogStore) (raft.LogStore, error) {
	dir := n.cfg.DataDir
	walPath := filepath.Join(dir, walDirName)
	tmp, ready := filepath.Join(dir, walRebuildingDir), filepath.Join(dir, walRebuiltDir)
	first, _ := old.FirstIndex()
	last, _ := old.LastIndex()
	n.log.Warn("raft-wal cannot append (segment is sealed): rebuilding wal/", "first", first, "last", last)
	if err := removeWALRebuilds(dir); err != nil {
		return nil, err
	}
	if err := os.Mkdir(tmp, 0o750); err != nil {
		return nil, fmt.Errorf("rebuild %s: %w", walPath, err)
	}
	fail := func(err error) (raft.LogStore, error) {
		_ = os.RemoveAll(tmp)
		_ = os.RemoveAll(ready)
		return nil, fmt.Errorf("rebuild %s: %w", walPath, err)
	}
	w, err := openWALQuiet(tmp, n.cfg.Logger)
	if err != nil {
		return fail(err)
	}
	if err := migrate.CopyLogs(context.Background(), w, old, migrateBatchBytes, nil); err != nil {
		w.Close()
		return fail(fmt.Errorf("copy the log: %w", err))
	}
	if err := w.Close(); err != nil {
		return fail(err)
	}
	// The copy is complete and durable (raft-wal fsyncs what it appends
	// and its directory); its name in the data dir is made so too.
	if err := os.Rename(tmp, ready); err != nil {
		return fail(err)
	}
	if err := syncDir(dir); err != nil {
		return fail(err)
	}
	oldWAL, ok := old.(*wal.WAL)
	if !ok {
		return fail(fmt.Errorf("the log store is %T, not raft-wal", old))
	}
	if err := oldWAL.Close(); err != nil {
		return fail(fmt.Errorf("close the old log: %w", err))
	}
	reopenOld := func(cause error) (raft.LogStore, error) {
		_ = os.RemoveAll(ready)
		back, err := openWALQuiet(walPath, n.cfg.Logger)
		if err != nil {
			// Neither log is open: appends fail (health says so) until a
			// restart opens wal/ again.
			n.log.Error("rebuilding wal/ failed and the old log does not reopen: restart this node", "error", cause, "reopen_error", err)
			return nil, err
		}
		n.log.Error("rebuilding wal/ failed; the old log stays", "error", cause)
		return back, nil
	}
	if err := unix.Renameat2(unix.AT_FDCWD, ready, unix.AT_FDCWD, walPath, unix.RENAME_EXCHANGE); err != nil {
		return reopenOld(fmt.Errorf("exchange %s and %s: %w", ready, walPath, err))
	}
	if err := syncDir(dir); err != nil {
		return reopenOld(err)
	}
	fresh, err := openWALQuiet(walPath, n.cfg.Logger)
	if err != nil {
		n.log.Error("wal/ was rebuilt but does not open: restart this node", "error", err)
		return nil, err
	}
	if err := removeWALRebuilds(dir); err != nil {
		n.log.Warn("cannot remove the old log after rebuilding wal/", "error", err)
	}
	n.log.Info("wal/ rebuilt: the log appends again", "first", first, "last", last)
	return fresh, nil
}
