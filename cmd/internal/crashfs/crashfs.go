// Package crashfs is a FUSE filesystem for power-loss tests: it passes
// every operation through to a backing directory, and keeps track of what
// a disk would still hold after a power loss, which is only what was
// fsynced. Crash then throws away everything else, as a power loss of a
// strict (but POSIX-conforming) filesystem would:
//
//   - a file's content and size are those of its last fsync (or
//     fdatasync); a file never fsynced is empty;
//   - a directory holds the entries it held at its last fsync (a file
//     created, renamed or removed since is not there, or back, again),
//     and a directory never fsynced is empty.
//
// The model is per inode (of the backing filesystem), as a real
// filesystem's is: renaming a directory does not make its entries
// durable, and an fsynced file whose name was never fsynced into its
// directory is lost with the name. Removed files and directories are kept
// in a graveyard beside the backing tree until the next crash, so that a
// removal that was not made durable can be undone.
//
// It is for tests: it mounts directly (as root, without fusermount), keeps
// the bytes a write overwrites in memory until the file is fsynced, and
// does not fsync the backing filesystem at all.
package crashfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// FS is a mounted crash-simulating filesystem.
type FS struct {
	base string // holds root/ (the backing tree) and grave/
	mnt  string

	mu     sync.Mutex
	server *fuse.Server
	files  map[uint64]*fileState
	dirs   map[uint64]*dirState
	// syncDelay is added to every fsync (a slow disk); syncErr, if set,
	// is what every fsync answers (a failing disk).
	syncDelay time.Duration
	syncErr   syscall.Errno
	syncs     uint64
}

// fileState is what a power loss would leave of a regular file: its
// size at the last fsync, and the bytes overwritten since (oldest first).
type fileState struct {
	durable int64
	undo    []undoRec
}

type undoRec struct {
	off int64
	old []byte
}

// dirState is what a power loss would leave of a directory: its entries
// at its last fsync.
type dirState struct {
	durable map[string]uint64 // name -> inode
}

// Mount mounts a crash-simulating filesystem at mnt (an existing empty
// directory), backed by base (created if missing; it must not be under
// mnt). Whatever base's tree holds already counts as durable.
func Mount(base, mnt string) (*FS, error) {
	for _, d := range []string{filepath.Join(base, "root"), filepath.Join(base, "grave")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("crashfs: %w", err)
		}
	}
	c := &FS{base: base, mnt: mnt}
	if err := c.mount(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *FS) root() string  { return filepath.Join(c.base, "root") }
func (c *FS) grave() string { return filepath.Join(c.base, "grave") }

// Dir is the mount point.
func (c *FS) Dir() string { return c.mnt }

// mount records the backing tree as durable and serves it at c.mnt.
func (c *FS) mount() error {
	c.mu.Lock()
	c.files = make(map[uint64]*fileState)
	c.dirs = make(map[uint64]*dirState)
	err := c.recordTree(c.root())
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("crashfs: %w", err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(c.root(), &st); err != nil {
		return fmt.Errorf("crashfs: %w", err)
	}
	lr := &fs.LoopbackRoot{Path: c.root(), Dev: uint64(st.Dev)}
	//lint:ignore SA1019 NewNode still works in go-fuse v2.12.1; moving crashfs to NodeWrapChilder changes how every node is wrapped, a rewrite left for its own commit.
	lr.NewNode = func(r *fs.LoopbackRoot, _ *fs.Inode, _ string, _ *syscall.Stat_t) fs.InodeEmbedder {
		return &node{LoopbackNode: fs.LoopbackNode{RootData: r}, c: c}
	}
	rootNode := lr.NewNode(lr, nil, "", &st) //lint:ignore SA1019 see above
	lr.RootNode = rootNode
	zero := time.Duration(0)
	server, err := fs.Mount(c.mnt, rootNode, &fs.Options{
		EntryTimeout: &zero, AttrTimeout: &zero, NegativeTimeout: &zero,
		MountOptions: fuse.MountOptions{
			DirectMountStrict: true, FsName: "crashfs", Name: "crashfs",
			// Every write reaches the server as it is made (no
			// writeback cache), so that what is dropped is exact.
		},
	})
	if err != nil {
		return fmt.Errorf("crashfs: mount %s: %w", c.mnt, err)
	}
	c.mu.Lock()
	c.server = server
	c.mu.Unlock()
	return nil
}

// recordTree records every file and directory under dir as durable as
// it is.
func (c *FS) recordTree(dir string) error {
	return filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.IsDir() {
			ents, err := dirEntries(p)
			if err != nil {
				return err
			}
			c.dirs[st.Ino] = &dirState{durable: ents}
			return nil
		}
		c.files[st.Ino] = &fileState{durable: st.Size}
		return nil
	})
}

// dirEntries reads directory p's entries with their inodes.
func dirEntries(p string) (map[string]uint64, error) {
	ents, err := os.ReadDir(p)
	if err != nil {
		return nil, err
	}
	out := make(map[string]uint64, len(ents))
	for _, e := range ents {
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(p, e.Name()), &st); err != nil {
			return nil, err
		}
		out[e.Name()] = st.Ino
	}
	return out, nil
}

// Unmount unmounts the filesystem, keeping everything written (as a clean
// shutdown would). Nothing may have files open in it.
func (c *FS) Unmount() error {
	c.mu.Lock()
	s := c.server
	c.server = nil
	c.mu.Unlock()
	if s == nil {
		return nil
	}
	var err error
	for range 50 { // a process just killed may still hold the mount for a moment
		if err = s.Unmount(); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Something still has a file open in it. Abort the connection and
	// detach the mount: a process that exits with a file open in a FUSE
	// mount it serves itself would hang in the kernel forever.
	c.abort()
	_ = syscall.Unmount(c.mnt, syscall.MNT_DETACH)
	return fmt.Errorf("crashfs: unmount %s (aborted it): %w", c.mnt, err)
}

// abort aborts the mount's FUSE connection (through fusectl).
func (c *FS) abort() {
	var st syscall.Stat_t
	if err := syscall.Stat(c.mnt, &st); err != nil {
		return
	}
	const ctl = "/sys/fs/fuse/connections"
	if ents, _ := os.ReadDir(ctl); len(ents) == 0 {
		_ = syscall.Mount("none", ctl, "fusectl", 0, "")
	}
	_ = os.WriteFile(filepath.Join(ctl, strconv.FormatUint(uint64(unix.Minor(st.Dev)), 10), "abort"), []byte("1"), 0o200)
}

// Crash simulates a power loss: it unmounts the filesystem (every process
// writing to it must be dead), drops every write and directory change
// that was not fsynced, and mounts what is left again.
func (c *FS) Crash() error {
	if err := c.Unmount(); err != nil {
		return err
	}
	if err := c.drop(); err != nil {
		return fmt.Errorf("crashfs: crash: %w", err)
	}
	return c.mount()
}

// Sync makes everything the filesystem holds durable, as sync(2) and a
// fsync of every directory would: a later Crash keeps it all. The
// graveyard of removed files is emptied, so that the space they held is
// free again (on a real filesystem a removal frees its blocks at once;
// here they stay buried until a crash, or until Sync).
func (c *FS) Sync() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	files, dirs := c.files, c.dirs
	c.files = make(map[uint64]*fileState)
	c.dirs = make(map[uint64]*dirState)
	if err := c.recordTree(c.root()); err != nil {
		c.files, c.dirs = files, dirs
		return fmt.Errorf("crashfs: sync: %w", err)
	}
	if err := os.RemoveAll(c.grave()); err != nil {
		return fmt.Errorf("crashfs: sync: %w", err)
	}
	if err := os.Mkdir(c.grave(), 0o755); err != nil {
		return fmt.Errorf("crashfs: sync: %w", err)
	}
	return nil
}

// SetSyncDelay makes every fsync take d longer (0: as fast as it can).
func (c *FS) SetSyncDelay(d time.Duration) {
	c.mu.Lock()
	c.syncDelay = d
	c.mu.Unlock()
}

// SetSyncError makes every fsync fail with errno (0: succeed again). A
// failed fsync makes nothing durable.
func (c *FS) SetSyncError(errno syscall.Errno) {
	c.mu.Lock()
	c.syncErr = errno
	c.mu.Unlock()
}

// Syncs is how many fsyncs (of files and directories) succeeded.
func (c *FS) Syncs() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.syncs
}

// drop rewrites the backing tree to what is durable.
func (c *FS) drop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	// Where each inode is now (in the tree or the graveyard).
	where := make(map[uint64]string)
	for _, d := range []string{c.root(), c.grave()} {
		err := filepath.Walk(d, func(p string, fi os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			if _, ok := where[fi.Sys().(*syscall.Stat_t).Ino]; !ok {
				where[fi.Sys().(*syscall.Stat_t).Ino] = p
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	// Files back to their fsynced content, in place.
	for ino, st := range c.files {
		p, ok := where[ino]
		if !ok || (len(st.undo) == 0 && !c.sizeDiffers(p, st.durable)) {
			continue
		}
		if err := restoreFile(p, st); err != nil {
			return err
		}
	}
	var st syscall.Stat_t
	if err := syscall.Stat(c.root(), &st); err != nil {
		return err
	}
	next := filepath.Join(c.base, "next")
	if err := os.RemoveAll(next); err != nil {
		return err
	}
	if err := c.build(next, st.Ino, where, 0); err != nil {
		return err
	}
	for _, d := range []string{c.root(), c.grave()} {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
	}
	if err := os.Rename(next, c.root()); err != nil {
		return err
	}
	return os.Mkdir(c.grave(), 0o755)
}

func (c *FS) sizeDiffers(p string, size int64) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Size() != size
}

// restoreFile undoes the writes since the last fsync and truncates the
// file to its fsynced size.
func restoreFile(p string, st *fileState) error {
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	for i := len(st.undo) - 1; i >= 0; i-- {
		if _, err := f.WriteAt(st.undo[i].old, st.undo[i].off); err != nil {
			return err
		}
	}
	return f.Truncate(st.durable)
}

// build makes directory dir hold what the durable entries of inode ino
// name: files are hard links to their (restored) inodes.
func (c *FS) build(dir string, ino uint64, where map[uint64]string, depth int) error {
	if depth > 64 {
		return errors.New("directory tree too deep")
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	ds := c.dirs[ino]
	if ds == nil {
		return nil
	}
	names := make([]string, 0, len(ds.durable))
	for name := range ds.durable {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		child := ds.durable[name]
		p := filepath.Join(dir, name)
		if _, isDir := c.dirs[child]; isDir {
			if err := c.build(p, child, where, depth+1); err != nil {
				return err
			}
			continue
		}
		src, ok := where[child]
		if !ok {
			// Cannot happen (removed inodes are kept); an empty file is
			// what a disk could show.
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				return err
			}
			continue
		}
		if err := os.Link(src, p); err != nil {
			return err
		}
	}
	return nil
}

// file returns the state of the regular file with inode ino, recording
// one not seen yet with durable size size.
func (c *FS) file(ino uint64, size int64) *fileState {
	st := c.files[ino]
	if st == nil {
		st = &fileState{durable: size}
		c.files[ino] = st
	}
	return st
}

// capture keeps the bytes of [off, off+n) of f that a write or a
// truncation is about to change, as far as they are durable.
func (c *FS) capture(f io.ReaderAt, st *fileState, off, n int64) error {
	if off >= st.durable || n <= 0 {
		return nil
	}
	end := min(off+n, st.durable)
	buf := make([]byte, end-off)
	got, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if got > 0 {
		st.undo = append(st.undo, undoRec{off: off, old: buf[:got]})
	}
	return nil
}

// syncWait applies the sync delay (outside the lock) and answers the
// sync error.
func (c *FS) syncWait() syscall.Errno {
	c.mu.Lock()
	d, e := c.syncDelay, c.syncErr
	c.mu.Unlock()
	if d > 0 {
		time.Sleep(d)
	}
	return e
}

// syncFile makes f's content and size durable.
func (c *FS) syncFile(f interface{ Fd() uintptr }) syscall.Errno {
	if e := c.syncWait(); e != 0 {
		return e
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return fs.ToErrno(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	fst := c.file(st.Ino, 0)
	fst.durable, fst.undo = st.Size, nil
	c.syncs++
	return 0
}

// syncDir makes directory p's entries durable.
func (c *FS) syncDir(p string) syscall.Errno {
	if e := c.syncWait(); e != 0 {
		return e
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		return fs.ToErrno(err)
	}
	ents, err := dirEntries(p)
	if err != nil {
		return fs.ToErrno(err)
	}
	c.dirs[st.Ino] = &dirState{durable: ents}
	c.syncs++
	c.freeBuried()
	return 0
}

// freeBuried deletes the buried files and directories that no durable
// directory entry names any more: their removal is durable, so no crash
// can bring them back, and a real disk would have freed their space
// already. (Without it, a long run on a small disk filled it with the
// raft-wal segments and snapshots its node had removed.) c.mu is held.
func (c *FS) freeBuried() {
	ents, err := os.ReadDir(c.grave())
	if err != nil || len(ents) == 0 {
		return
	}
	named := make(map[uint64]bool)
	for _, d := range c.dirs {
		for _, ino := range d.durable {
			named[ino] = true
		}
	}
	for _, e := range ents {
		ino, err := strconv.ParseUint(e.Name(), 10, 64)
		if err != nil || named[ino] {
			continue
		}
		if err := os.RemoveAll(filepath.Join(c.grave(), e.Name())); err == nil {
			delete(c.files, ino)
			delete(c.dirs, ino)
		}
	}
}

// bury moves p (a file, or an empty directory) into the graveyard rather
// than removing it, so that its inode lives on for a crash to bring back.
func (c *FS) bury(p string) error {
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		return err
	}
	dst := filepath.Join(c.grave(), strconv.FormatUint(st.Ino, 10))
	if _, err := os.Lstat(dst); err == nil {
		// Another name of the same inode is buried already.
		return os.Remove(p)
	}
	return os.Rename(p, dst)
}

// node is a directory or file of the mount.
type node struct {
	fs.LoopbackNode
	c *FS
}

var (
	_ fs.NodeCreater         = (*node)(nil)
	_ fs.NodeOpener          = (*node)(nil)
	_ fs.NodeMkdirer         = (*node)(nil)
	_ fs.NodeRmdirer         = (*node)(nil)
	_ fs.NodeUnlinker        = (*node)(nil)
	_ fs.NodeRenamer         = (*node)(nil)
	_ fs.NodeSetattrer       = (*node)(nil)
	_ fs.NodeFsyncer         = (*node)(nil)
	_ fs.NodeOpendirHandler  = (*node)(nil)
	_ fs.NodeCopyFileRanger  = (*node)(nil)
	_ fs.FileWriter          = (*handle)(nil)
	_ fs.FileWritever        = (*handle)(nil)
	_ fs.FileAllocater       = (*handle)(nil)
	_ fs.FilePassthroughFder = (*handle)(nil)
)

// bpath is the node's path in the backing tree.
func (n *node) bpath() string { return filepath.Join(n.c.root(), n.Path(nil)) }

// Create implements fs.NodeCreater.
func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	// Record the file (and what O_TRUNC drops) first, then let the
	// loopback create the node and open it (the file exists by then).
	f, errno := n.c.open(filepath.Join(n.bpath(), name), int(flags)|os.O_CREATE, mode)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	f.Close()
	ch, fh, fuseFlags, errno := n.LoopbackNode.Create(ctx, name, uint32(readWrite(int(flags)))&^(syscall.O_TRUNC|syscall.O_EXCL), mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	return ch, newHandle(fh.(*fs.LoopbackFile), n.c), fuseFlags, 0
}

// open opens backing file p, recording a new file as empty on disk and
// keeping what O_TRUNC throws away.
func (c *FS) open(p string, flags int, mode uint32) (*os.File, syscall.Errno) {
	flags = readWrite(flags)
	trunc := flags&syscall.O_TRUNC != 0
	c.mu.Lock()
	defer c.mu.Unlock()
	_, statErr := os.Lstat(p)
	f, err := os.OpenFile(p, flags&^syscall.O_TRUNC, os.FileMode(mode))
	if err != nil {
		return nil, fs.ToErrno(err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, fs.ToErrno(err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return f, 0
	}
	size := st.Size
	if statErr != nil {
		size = 0 // created now: nothing of it is on disk yet
	}
	fst := c.file(st.Ino, size)
	if trunc {
		if err := c.capture(f, fst, 0, fst.durable); err != nil {
			f.Close()
			return nil, fs.ToErrno(err)
		}
		if err := f.Truncate(0); err != nil {
			f.Close()
			return nil, fs.ToErrno(err)
		}
	}
	return f, 0
}

// readWrite is flags for the backing file: read-write whatever the
// caller asked (the bytes a write overwrites are read first), without
// O_APPEND (the kernel gives every write its offset).
func readWrite(flags int) int {
	flags &^= syscall.O_APPEND | fuse.FMODE_EXEC
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		flags = flags&^syscall.O_ACCMODE | syscall.O_RDWR
	}
	return flags
}

// Open implements fs.NodeOpener.
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	f, errno := n.c.open(n.bpath(), int(flags), 0)
	if errno != 0 {
		return nil, 0, errno
	}
	return newHandle(fs.NewLoopbackFileFromOS(f), n.c), 0, 0
}

// Mkdir implements fs.NodeMkdirer: a new directory is empty on disk.
func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	ch, errno := n.LoopbackNode.Mkdir(ctx, name, mode, out)
	if errno != 0 {
		return ch, errno
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(n.bpath(), name), &st); err == nil {
		n.c.dirs[st.Ino] = &dirState{durable: map[string]uint64{}}
	}
	return ch, 0
}

// Rmdir implements fs.NodeRmdirer.
func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	p := filepath.Join(n.bpath(), name)
	ents, err := os.ReadDir(p)
	if err != nil {
		return fs.ToErrno(err)
	}
	if len(ents) > 0 {
		return syscall.ENOTEMPTY
	}
	return fs.ToErrno(n.c.bury(p))
}

// Unlink implements fs.NodeUnlinker.
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	return fs.ToErrno(n.c.bury(filepath.Join(n.bpath(), name)))
}

// Rename implements fs.NodeRenamer (RENAME_NOREPLACE included; not
// RENAME_EXCHANGE).
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	if flags&^unix.RENAME_NOREPLACE != 0 {
		return syscall.ENOTSUP
	}
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	src, dst := filepath.Join(n.bpath(), name), filepath.Join(np.bpath(), newName)
	if _, err := os.Lstat(src); err != nil {
		return fs.ToErrno(err)
	}
	if fi, err := os.Lstat(dst); err == nil {
		if flags&unix.RENAME_NOREPLACE != 0 {
			return syscall.EEXIST
		}
		if fi.IsDir() {
			ents, err := os.ReadDir(dst)
			if err != nil {
				return fs.ToErrno(err)
			}
			if len(ents) > 0 {
				return syscall.ENOTEMPTY
			}
		}
		if err := n.c.bury(dst); err != nil {
			return fs.ToErrno(err)
		}
	}
	return fs.ToErrno(os.Rename(src, dst))
}

// Setattr implements fs.NodeSetattrer, keeping what a truncation throws
// away.
func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if sz, ok := in.GetSize(); ok {
		c := n.c
		c.mu.Lock()
		file, err := os.Open(n.bpath())
		if err == nil {
			var st syscall.Stat_t
			if err = syscall.Fstat(int(file.Fd()), &st); err == nil {
				fst := c.file(st.Ino, st.Size)
				err = c.capture(file, fst, int64(sz), fst.durable-int64(sz))
			}
			file.Close()
		}
		if err == nil {
			err = os.Truncate(n.bpath(), int64(sz))
		}
		c.mu.Unlock()
		if err != nil {
			return fs.ToErrno(err)
		}
		in.Valid &^= fuse.FATTR_SIZE
	}
	return n.LoopbackNode.Setattr(ctx, f, in, out)
}

// Fsync implements fs.NodeFsyncer, for files and directories.
func (n *node) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	if h, ok := f.(*handle); ok {
		return n.c.syncFile(h.f)
	}
	if n.StableAttr().Mode&syscall.S_IFMT == syscall.S_IFDIR {
		return n.c.syncDir(n.bpath())
	}
	file, err := os.Open(n.bpath())
	if err != nil {
		return fs.ToErrno(err)
	}
	defer file.Close()
	return n.c.syncFile(file)
}

// OpendirHandle implements fs.NodeOpendirHandler: its handle's fsync
// goes through the model.
func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	ds, errno := fs.NewLoopbackDirStream(n.bpath())
	if errno != 0 {
		return nil, 0, errno
	}
	return &dirHandle{DirStream: ds, n: n}, 0, 0
}

// CopyFileRange implements fs.NodeCopyFileRanger: not supported (the
// copy would bypass the model), so the kernel falls back to writes.
func (n *node) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode, fhOut fs.FileHandle, offOut uint64, len uint64, flags uint64) (uint32, syscall.Errno) {
	return 0, syscall.ENOTSUP
}

// dirHandle is an open directory.
type dirHandle struct {
	fs.DirStream
	n *node
}

// Readdirent implements fs.FileReaddirenter.
func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	return d.DirStream.(fs.FileReaddirenter).Readdirent(ctx)
}

// Seekdir implements fs.FileSeekdirer.
func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	return d.DirStream.(fs.FileSeekdirer).Seekdir(ctx, off)
}

// Releasedir implements fs.FileReleasedirer.
func (d *dirHandle) Releasedir(ctx context.Context, flags uint32) {
	d.DirStream.(fs.FileReleasedirer).Releasedir(ctx, flags)
}

// Fsyncdir implements fs.FileFsyncdirer.
func (d *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	return d.n.c.syncDir(d.n.bpath())
}

// handle is an open regular file.
type handle struct {
	*fs.LoopbackFile
	f fdFile // the LoopbackFile's descriptor, which it owns
	c *FS
}

func newHandle(lf *fs.LoopbackFile, c *FS) *handle {
	fd, _ := lf.PassthroughFd()
	return &handle{LoopbackFile: lf, f: fdFile(fd), c: c}
}

// fdFile is a file descriptor owned by someone else.
type fdFile int

// ReadAt implements io.ReaderAt.
func (f fdFile) ReadAt(b []byte, off int64) (int, error) {
	n, err := syscall.Pread(int(f), b, off)
	if err == nil && n < len(b) {
		return max(n, 0), io.EOF
	}
	return max(n, 0), err
}

// WriteAt implements io.WriterAt.
func (f fdFile) WriteAt(b []byte, off int64) (int, error) {
	n, err := syscall.Pwrite(int(f), b, off)
	if err == nil && n < len(b) {
		return max(n, 0), io.ErrShortWrite
	}
	return max(n, 0), err
}

// Fd returns the descriptor.
func (f fdFile) Fd() uintptr { return uintptr(f) }

// PassthroughFd implements fs.FilePassthroughFder: never (the kernel
// would write to the backing file without the model seeing it).
func (h *handle) PassthroughFd() (int, bool) { return 0, false }

// Write implements fs.FileWriter.
func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	return h.Writev(ctx, [][]byte{data}, off)
}

// Writev implements fs.FileWritever.
func (h *handle) Writev(ctx context.Context, data [][]byte, off int64) (uint32, syscall.Errno) {
	var n int64
	for _, d := range data {
		n += int64(len(d))
	}
	c := h.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if errno := c.captureFd(h.f, off, n); errno != 0 {
		return 0, errno
	}
	var written uint32
	for _, d := range data {
		w, err := h.f.WriteAt(d, off)
		written += uint32(w)
		off += int64(w)
		if err != nil {
			return written, fs.ToErrno(err)
		}
	}
	return written, 0
}

func (c *FS) captureFd(f fdFile, off, n int64) syscall.Errno {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return fs.ToErrno(err)
	}
	if err := c.capture(f, c.file(st.Ino, st.Size), off, n); err != nil {
		return fs.ToErrno(err)
	}
	return 0
}

// Allocate implements fs.FileAllocater: modes that change content keep
// what they overwrite; the ones that move it are not supported.
func (h *handle) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	if mode&(unix.FALLOC_FL_COLLAPSE_RANGE|unix.FALLOC_FL_INSERT_RANGE) != 0 {
		return syscall.ENOTSUP
	}
	c := h.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if mode&(unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_ZERO_RANGE) != 0 {
		if errno := c.captureFd(h.f, int64(off), int64(size)); errno != 0 {
			return errno
		}
	}
	return h.LoopbackFile.Allocate(ctx, off, size, mode)
}

// Fsync implements fs.FileFsyncer.
func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno { return h.c.syncFile(h.f) }

// TB is the part of testing.TB MountT uses.
type TB interface {
	Helper()
	TempDir() string
	Cleanup(func())
	Skipf(format string, args ...any)
	Logf(format string, args ...any)
}

// MountT mounts a crashfs in temp dirs of t and unmounts it when the test
// ends. Where FUSE cannot be mounted (no /dev/fuse, not root) the test is
// skipped, unless the CI variable is set: there it is an error.
func MountT(t TB) (*FS, error) {
	t.Helper()
	base, mnt := t.TempDir(), t.TempDir()
	c, err := Mount(base, mnt)
	if err != nil {
		if os.Getenv("CI") != "" {
			return nil, fmt.Errorf("CI must run the power-loss tests, but FUSE could not be mounted: %w", err)
		}
		t.Skipf("SKIPPING: cannot mount FUSE here (needs root and /dev/fuse): %v", err)
		return nil, err
	}
	t.Cleanup(func() {
		if err := c.Unmount(); err != nil {
			t.Logf("crashfs: %v", err)
		}
	})
	return c, nil
}

// Backing is the backing tree's directory: what the mount shows, for a
// test to read without going through the mount it serves itself.
func (c *FS) Backing() string { return c.root() }
