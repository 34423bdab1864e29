package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/raftlock/raftlock/cmd/internal/crashfs"
)

// The disk faults (issue 27) need every node's data dir on a disk of its
// own (nodeDisk): a tmpfs of diskSize, holding the backing tree of a
// crashfs mount (cmd/internal/crashfs) that serves the data dir.
const (
	// power-loss: every node, or one, killed with SIGKILL and its disk
	// crashed (everything not fsynced dropped), then restarted.
	faultPowerLoss = "power-loss"
	// slow-disk: the leader's fsyncs made slowDiskDelay slower for a few
	// seconds.
	faultSlowDisk = "slow-disk"
	// fill-disk: a node's disk filled until writes fail, held, then freed.
	faultFillDisk = "fill-disk"
)

// isDiskFault reports whether a fault kind needs the nodes' data dirs on
// disks of their own.
func isDiskFault(kind string) bool {
	return kind == faultPowerLoss || kind == faultSlowDisk || kind == faultFillDisk
}

// diskSize is each node's disk (tmpfs size=): the first 64 MiB raft-wal
// segment (preallocated), the node's free-space margin (64 MiB, twice the
// newest snapshot and 4 MiB), and room for the log's growth in a run.
// tmpfs takes memory only for what is written.
const diskSize = "256m"

// slowDiskDelayMin..slowDiskDelayMax is added to every fsync of the
// leader's disk during a slow-disk fault, like a disk that fails slowly;
// but at most the clients' TTL/3 (slowDiskDelay).
const slowDiskDelayMin, slowDiskDelayMax = time.Second, 2 * time.Second

// slowDiskDelay picks the fsync delay of a slow-disk fault. A commit waits
// for the leader's fsync, and a keepalive may wait for the one in flight
// before its own: with fsyncs slower than TTL/2 no keepalive can be
// acknowledged within the TTL, and the contract lets the leader expire a
// session from R + ttl (docs/DESIGN.md, the session timeline), which the
// live-sessions check (4) would count against a client that did its part.
// So the delay is capped at TTL/3.
func (in *injector) slowDiskDelay() time.Duration {
	d := in.between(slowDiskDelayMin, slowDiskDelayMax)
	if d > in.cfg.TTL/3 {
		d = in.cfg.TTL / 3
	}
	return d.Round(100 * time.Millisecond)
}

// nodeStartTimeout bounds how long a node restarted after a power loss,
// or whose disk came back, may take to answer its health ok; past it the
// node-starts check fails.
const nodeStartTimeout = 90 * time.Second

// errNoDisks marks a run that asks for disk faults where the nodes' disks
// cannot be mounted (not root, no /dev/fuse).
var errNoDisks = errors.New("the disk faults (" + faultPowerLoss + ", " + faultSlowDisk + ", " + faultFillDisk +
	") need root and /dev/fuse: each node's data dir is a crashfs (FUSE) mount over a tmpfs")

// canMountDisks says why the nodes' disks cannot be mounted here (nil if
// they may be): crashfs needs root and /dev/fuse. The mount itself may
// still fail.
func canMountDisks() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: not root", errNoDisks)
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("%w: %v", errNoDisks, err)
	}
	return nil
}

// nodeDisk is one node's disk: a tmpfs at tmp, holding crashfs's backing
// tree (tmp/base) and, during a fill-disk fault, the filler (tmp/filler);
// the node's data dir is a directory in the crashfs mount.
type nodeDisk struct {
	tmp string
	fs  *crashfs.FS
}

// filler is the file that fills the disk, beside the backing tree (not
// in it: crashfs does not know it, and a crash leaves it alone).
func (d *nodeDisk) filler() string { return filepath.Join(d.tmp, "filler") }

// mountDisks gives every node (spares included) a disk under dir and
// moves its data dir onto it. On error, what was mounted is unmounted.
func (c *cluster) mountDisks(dir string) error {
	for _, n := range c.all() {
		d, err := mountDisk(filepath.Join(dir, n.id))
		if err != nil {
			c.unmountDisks()
			return fmt.Errorf("%w: %s: %v", errNoDisks, n.id, err)
		}
		n.disk = d
		n.dataDir = filepath.Join(d.fs.Dir(), "data")
	}
	return nil
}

// mountDisk mounts a tmpfs at dir/tmp and a crashfs at dir/mnt backed by
// dir/tmp/base.
func mountDisk(dir string) (*nodeDisk, error) {
	d := &nodeDisk{tmp: filepath.Join(dir, "tmp")}
	mnt := filepath.Join(dir, "mnt")
	for _, p := range []string{d.tmp, mnt} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return nil, err
		}
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+diskSize, "tmpfs", d.tmp).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("mount tmpfs: %v: %s", err, strings.TrimSpace(string(out)))
	}
	fs, err := crashfs.Mount(filepath.Join(d.tmp, "base"), mnt)
	if err != nil {
		_ = syscall.Unmount(d.tmp, syscall.MNT_DETACH)
		return nil, err
	}
	d.fs = fs
	return d, nil
}

// unmountDisks unmounts every node's disk (the nodes must be stopped).
// It may be called again.
func (c *cluster) unmountDisks() []error {
	var errs []error
	for _, n := range c.all() {
		d := n.disk
		if d == nil {
			continue
		}
		n.disk = nil
		if err := d.fs.Unmount(); err != nil {
			errs = append(errs, fmt.Errorf("disk of %s: %w", n.id, err))
		}
		if err := syscall.Unmount(d.tmp, syscall.MNT_DETACH); err != nil {
			errs = append(errs, fmt.Errorf("disk of %s: unmount %s: %w", n.id, d.tmp, err))
		}
	}
	return errs
}

// awaitHealthy waits until n answers its health ok. It fails when n's
// process exits meanwhile (it refused to start, or died), or after
// timeout.
func (c *cluster) awaitHealthy(ctx context.Context, n *nodeProc, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	n.mu.Lock()
	exited := n.exited
	running := n.cmd != nil
	n.mu.Unlock()
	if !running {
		return errors.New("not running")
	}
	last := "no answer"
	for {
		select {
		case <-exited:
			n.take() // reaped already
			return fmt.Errorf("its process exited (log: %s): %s", n.logPath, lastLine(n.logPath))
		default:
		}
		for _, v := range c.views(ctx) {
			switch {
			case v.node != n:
			case v.err != nil:
				last = v.err.Error()
			case v.info.OK:
				return nil
			default:
				last = "health: " + v.info.Reason
			}
		}
		if !sleep(ctx, 200*time.Millisecond) {
			return fmt.Errorf("not healthy within %v (last: %s)", timeout, last)
		}
	}
}

// lastLine returns the last non-empty line of the file at p (a node's
// log), cut to 300 bytes.
func lastLine(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	s := lines[len(lines)-1]
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// nodeFailed records that node n did not come back after a fault: a
// violation of the node-starts check. A node that exited is started
// again, so that the run goes on.
func (in *injector) nodeFailed(n *nodeProc, kind string, err error) {
	in.failures = append(in.failures, Violation{Check: checkNodeStarts, At: monoNow(), Client: -1,
		What: fmt.Sprintf("%s did not come back after %s: %v", n.id, kind, err)})
	in.logf("VIOLATION: %s did not come back after %s: %v", n.id, kind, err)
	if !n.running() {
		in.restart(n)
	}
}

// powerLoss kills every node, or one (the leader or a follower), with
// SIGKILL, crashes their disks (every write and directory change not
// fsynced is lost), and starts them again: in turn all nodes, the
// leader, a follower. Every node must start and be healthy again within
// nodeStartTimeout (node-starts check); no acknowledged grant may be lost
// (checks 1 and 3) and later tokens stay higher (check 2).
func (in *injector) powerLoss(ctx context.Context) (FaultRec, error) {
	ld, err := in.findLeader(ctx)
	if err != nil {
		return FaultRec{}, err
	}
	var targets []*nodeProc
	what := ""
	switch in.powerLosses % 3 {
	case 0:
		targets, what = append(targets, in.cl.nodes...), "all nodes"
	case 1:
		targets, what = []*nodeProc{ld}, "the leader"
	default:
		for _, i := range in.rng.Perm(len(in.cl.nodes)) {
			if n := in.cl.nodes[i]; n != ld && n.serving() {
				targets = []*nodeProc{n}
				break
			}
		}
		what = "a follower"
		if targets == nil {
			return FaultRec{}, fmt.Errorf("%w: no follower up", errSkipped)
		}
	}
	for _, n := range targets {
		if n.disk == nil {
			return FaultRec{}, fmt.Errorf("%w: %s has no disk of its own", errSkipped, n.id)
		}
	}
	in.powerLosses++
	rec := FaultRec{Kind: faultPowerLoss, Target: ids(targets), Start: monoNow(), LeaderLoss: targets[0] == ld || len(targets) > 1}
	for _, n := range targets {
		in.cl.kill(n)
	}
	var crashErrs []string
	for _, n := range targets {
		if err := n.disk.fs.Crash(); err != nil {
			crashErrs = append(crashErrs, fmt.Sprintf("%s: %v", n.id, err))
		}
	}
	sleep(ctx, in.between(500*time.Millisecond, 1500*time.Millisecond))
	for _, n := range targets {
		in.restart(n)
	}
	rec.Note = "(" + what + ")"
	if len(crashErrs) > 0 {
		rec.Note += ", crash failed: " + strings.Join(crashErrs, "; ")
	}
	wctx, cancel := waitCtx(nodeStartTimeout + 10*time.Second)
	defer cancel()
	for _, n := range targets {
		if err := in.cl.awaitHealthy(wctx, n, nodeStartTimeout); err != nil {
			in.nodeFailed(n, faultPowerLoss, err)
		}
	}
	rec.End = monoNow()
	return rec, nil
}

// slowDisk makes every fsync of the leader's disk 1-2 s slower (at most
// TTL/3: slowDiskDelay) for 5-8 s,
// then fast again (the leader hands leadership to a faster voter if it
// notices: see docs/DESIGN.md, "Slow or failing fsync"). The node must be
// healthy again afterwards (node-starts check).
func (in *injector) slowDisk(ctx context.Context) (FaultRec, error) {
	ld, err := in.findLeader(ctx)
	if err != nil {
		return FaultRec{}, err
	}
	if ld.disk == nil {
		return FaultRec{}, fmt.Errorf("%w: %s has no disk of its own", errSkipped, ld.id)
	}
	delay := in.slowDiskDelay()
	rec := FaultRec{Kind: faultSlowDisk, Target: ld.id, Start: monoNow(), LeaderLoss: true,
		Note: fmt.Sprintf("(the leader; fsync %v slower)", delay)}
	fs := ld.disk.fs
	fs.SetSyncDelay(delay)
	sleep(ctx, in.between(5*time.Second, 8*time.Second))
	fs.SetSyncDelay(0)
	wctx, cancel := waitCtx(nodeStartTimeout + 10*time.Second)
	defer cancel()
	if err := in.cl.awaitHealthy(wctx, ld, nodeStartTimeout); err != nil {
		in.nodeFailed(ld, faultSlowDisk, err)
	}
	rec.End = monoNow()
	return rec, nil
}

// fillDisk fills a node's disk (in turn the leader's, a follower's) with
// a file until a write fails for want of space, holds it full for 4-7 s,
// and removes the file. The node must be healthy again within
// nodeStartTimeout with no action (node-starts check).
func (in *injector) fillDisk(ctx context.Context) (FaultRec, error) {
	ld, err := in.findLeader(ctx)
	if err != nil {
		return FaultRec{}, err
	}
	target, role := ld, "the leader"
	if in.fills%2 == 1 {
		for _, i := range in.rng.Perm(len(in.cl.nodes)) {
			if n := in.cl.nodes[i]; n != ld && n.serving() {
				target, role = n, "a follower"
				break
			}
		}
	}
	if target.disk == nil {
		return FaultRec{}, fmt.Errorf("%w: %s has no disk of its own", errSkipped, target.id)
	}
	in.fills++
	rec := FaultRec{Kind: faultFillDisk, Target: target.id, Start: monoNow(), LeaderLoss: target == ld}
	filled, err := fillFile(target.disk.filler())
	if err != nil {
		_ = os.Remove(target.disk.filler())
		return FaultRec{}, fmt.Errorf("%w: fill the disk of %s: %v", errSkipped, target.id, err)
	}
	sleep(ctx, in.between(4*time.Second, 7*time.Second))
	full := "no answer"
	for _, v := range in.cl.views(ctx) {
		if v.node == target && v.err == nil {
			full = "ok"
			if !v.info.OK {
				full = "unhealthy"
			}
		}
	}
	if err := os.Remove(target.disk.filler()); err != nil {
		in.logf("fill-disk: remove the filler of %s: %v", target.id, err)
	}
	// A node that cannot write stops with "disk full", exit status 3
	// (docs/OPERATIONS.md), and its supervisor (the systemd unit, the
	// chart) starts it again: the checker is that supervisor once the
	// filler is gone. Any other exit is a violation.
	if code, exited := in.cl.reapExited(target); exited {
		full += fmt.Sprintf(", then stopped with status %d", code)
		if code != diskFullExit {
			in.nodeFailed(target, faultFillDisk, fmt.Errorf("it exited with status %d, not %d (disk full)", code, diskFullExit))
		} else {
			in.restart(target)
		}
	}
	rec.Note = fmt.Sprintf("(%s; %d MiB filler; its health while full: %s)", role, filled>>20, full)
	wctx, cancel := waitCtx(nodeStartTimeout + 10*time.Second)
	defer cancel()
	if err := in.cl.awaitHealthy(wctx, target, nodeStartTimeout); err != nil {
		in.nodeFailed(target, faultFillDisk, err)
	}
	rec.End = monoNow()
	return rec, nil
}

// diskFullExit is raftlockd's exit status when its disk is full (node.ErrDiskFull).
const diskFullExit = 3

// fillFile writes zeros to a new file at p until the filesystem is full
// (ENOSPC), and returns how many bytes it wrote.
func fillFile(p string) (int64, error) {
	f, err := os.Create(p)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	var n int64
	for {
		w, err := f.Write(buf)
		n += int64(w)
		if errors.Is(err, syscall.ENOSPC) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}
