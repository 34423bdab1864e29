package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/cmd/internal/proccluster"
	"github.com/raftlock/raftlock/transport/client"
)

// smallDisk mounts a tmpfs of size bytes for the test (root only: the
// test is skipped elsewhere, and fails in CI, where .ci/run runs as root).
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI must run the full-disk test, but mounting a tmpfs failed: %v %s", err, out)
		}
		t.Skipf("SKIPPING: mounting a tmpfs needs root: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

// smallExt4 mounts a loop-mounted ext4 filesystem of sizeMiB for the
// test (root only, like smallDisk): unlike tmpfs, ext4 really preallocates
// (fallocate), as raft-wal does for its segments.
func smallExt4(t *testing.T, sizeMiB int) string {
	t.Helper()
	img := filepath.Join(t.TempDir(), "disk.img")
	dir := t.TempDir()
	for _, args := range [][]string{
		{"truncate", "-s", fmt.Sprintf("%dM", sizeMiB), img},
		{"mkfs.ext4", "-q", "-F", "-m", "0", img},
		{"mount", "-o", "loop", img, dir},
	} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("CI must run the full-disk tests, but %v failed: %v %s", args, err, out)
			}
			t.Skipf("SKIPPING: a loop-mounted ext4 needs root and e2fsprogs: %v: %v %s", args, err, out)
		}
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	// lost+found is not the node's.
	return filepath.Join(dir, "disk")
}

// fill writes a file into dir until the disk is full and returns it.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if strings.Contains(err.Error(), "no space left") {
				return path
			}
			t.Fatal(err)
		}
	}
}

// A follower whose disk is full says so and stops: its log says "disk
// full (ENOSPC)" naming raft.db and the error, once, and it exits with
// status 3 (exitDiskFull), never a panic, while the cluster keeps
// committing; restarted on the full disk it refuses to start (3 again),
// and once space is freed it starts (as its supervisor restarts it),
// catches up and is healthy.
func TestFullDiskStopsAFollowerUntilSpaceIsBack(t *testing.T) {
	disk := smallDisk(t, "8m")
	bin := proccluster.BuildDaemon(t)
	// The boltdb log store: raft.db grows with the log, so the full disk
	// fails the next write. (raft-wal preallocates its 64 MiB segments: a
	// full disk meets it when it starts a segment, handled alike.)
	c := proccluster.StartEach(t, bin, 3, func(i int) []string {
		if i == 2 {
			return []string{"--log-store", "boltdb", "--data-dir", filepath.Join(disk, "n3")}
		}
		return []string{"--log-store", "boltdb"}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	health := nodeHealth(ctx, t, c.Nodes[2].HTTPAddr)
	proccluster.Eventually(t, time.Minute, "n3 healthy", func() error {
		if h := health(); !h.OK {
			return fmt.Errorf("%+v", h)
		}
		return nil
	})
	filler := fill(t, disk)
	cl := c.Client()
	s, err := cl.OpenSession(ctx, api.OpenRequest{Name: "work", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	work := func() error {
		i++
		name := fmt.Sprintf("disk/%d", i)
		if _, err := cl.Acquire(ctx, api.AcquireRequest{Name: name, Session: s.ID, Holder: "h", Value: strings.Repeat("v", 2048)}); err != nil {
			return err
		}
		return cl.Release(ctx, api.ReleaseRequest{Name: name, Session: s.ID, Holder: "h"})
	}
	proccluster.Eventually(t, time.Minute, "n3 stops on the full disk", func() error {
		if err := work(); err != nil {
			return err
		}
		if code, exited := c.Exited(2); !exited || code != 3 {
			return fmt.Errorf("n3 exited %v, status %d (want 3)", exited, code)
		}
		return nil
	})
	log := c.Nodes[2].Log()
	if strings.Contains(log, "panic:") {
		t.Fatalf("n3 panicked:\n%s", log)
	}
	for _, want := range []string{"disk full (ENOSPC)", "raft.db", "no space left on device", "disk-reserve"} {
		if !strings.Contains(log, want) {
			t.Errorf("n3's log does not say %q:\n%s", want, log)
		}
	}
	if n := strings.Count(log, "Raft store write failed"); n > 2 {
		t.Errorf("the write failures were logged %d times in well under a minute:\n%s", n, log)
	}
	for range 5 {
		if err := work(); err != nil {
			t.Fatalf("the cluster without n3: %v", err)
		}
	}
	c.Restart(2)
	if code, err := c.Wait(2, time.Minute); err != nil || code != 3 {
		t.Fatalf("n3 restarted on the full disk: exit %d, %v; want 3\n%s", code, err, c.Nodes[2].Log())
	}
	if log := c.Nodes[2].Log(); !strings.Contains(log[len(log)/2:], "has no room for the 1 MiB reserve") {
		t.Errorf("n3's refusal does not name the reserve:\n%s", log)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	c.Restart(2)
	proccluster.Eventually(t, time.Minute, "n3 healthy again", func() error {
		if err := work(); err != nil {
			return err
		}
		if h := health(); !h.OK {
			return fmt.Errorf("health %+v", h)
		}
		return nil
	})
}

// metric reads one unlabelled sample of node addr's /metrics (-1 if it
// is missing).
func metric(t *testing.T, addr, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)`).FindSubmatch(body)
	if m == nil {
		return -1
	}
	var v float64
	fmt.Sscan(string(m[1]), &v)
	return v
}

// tmpSnapshots counts the unfinished snapshot directories in dataDir.
func tmpSnapshots(dataDir string) int {
	ents, _ := os.ReadDir(filepath.Join(dataDir, "snapshots"))
	n := 0
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") {
			n++
		}
	}
	return n
}

// A full disk is visible even while the log store's writes succeed (the
// wal log store writes into a preallocated segment): every failed
// snapshot counts as failing storage until a snapshot succeeds, health
// says the disk is below its free-space margin, failed snapshots leave no
// .tmp directories behind, and once space is freed the node is healthy
// again with no action.
func TestFullDiskFailsSnapshotsVisiblyAndRecovers(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs raftlockd processes")
	}
	// 64 MiB of it go to the wal's first segment; the node needs another
	// 64 MiB + 4 MiB + two snapshots free (DESIGN, "Disks").
	disk := smallDisk(t, "160m")
	bin := proccluster.BuildDaemon(t)
	dir := filepath.Join(disk, "n3")
	c := proccluster.StartEach(t, bin, 3, func(i int) []string {
		if i == 2 {
			return []string{"--data-dir", dir}
		}
		return nil
	}, "--log-store", "wal", "--snapshot-threshold", "32", "--snapshot-interval", "100ms", "--snapshot-trailing-logs", "8")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	health := nodeHealth(ctx, t, c.Nodes[2].HTTPAddr)
	cl := c.Client()
	s, err := cl.OpenSession(ctx, api.OpenRequest{Name: "work", TTL: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	work := func() error {
		for range 8 {
			i++
			if _, err := cl.Acquire(ctx, api.AcquireRequest{Name: fmt.Sprintf("disk/%d", i), Session: s.ID, Holder: "h", Value: strings.Repeat("v", 2048)}); err != nil {
				return err
			}
		}
		return nil
	}
	proccluster.Eventually(t, time.Minute, "n3 healthy", func() error {
		if h := health(); !h.OK {
			return fmt.Errorf("%+v", h)
		}
		return nil
	})
	filler := fill(t, disk)
	proccluster.Eventually(t, time.Minute, "n3 reports the full disk and the failing snapshots", func() error {
		if err := work(); err != nil {
			return err
		}
		if h := health(); h.OK || !strings.Contains(h.Reason, "no space left") && !strings.Contains(h.Reason, "disk nearly full") {
			return fmt.Errorf("health %+v", h)
		}
		if v := metric(t, c.Nodes[2].HTTPAddr, "raftlock_storage_failing"); v != 1 {
			return fmt.Errorf("raftlock_storage_failing %v", v)
		}
		if v := metric(t, c.Nodes[2].HTTPAddr, "raftlock_disk_free_bytes"); v < 0 || v >= metric(t, c.Nodes[2].HTTPAddr, "raftlock_disk_free_margin_bytes") {
			return fmt.Errorf("raftlock_disk_free_bytes %v, not below the margin", v)
		}
		return nil
	})
	// Failed snapshots go on (every 100-200 ms); none leaves its .tmp.
	failed := metric(t, c.Nodes[2].HTTPAddr, "raftlock_storage_errors_total")
	proccluster.Eventually(t, time.Minute, "more failed snapshots", func() error {
		if err := work(); err != nil {
			return err
		}
		if v := metric(t, c.Nodes[2].HTTPAddr, "raftlock_storage_errors_total"); v < failed+5 {
			return fmt.Errorf("raftlock_storage_errors_total %v (was %v)", v, failed)
		}
		return nil
	})
	if n := tmpSnapshots(dir); n > 1 {
		t.Errorf("%d unfinished snapshot directories left in n3's snapshots/ (at most the one being written)", n)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	proccluster.Eventually(t, time.Minute, "n3 healthy again", func() error {
		if err := work(); err != nil {
			return err
		}
		if h := health(); !h.OK {
			return fmt.Errorf("health %+v", h)
		}
		if v := metric(t, c.Nodes[2].HTTPAddr, "raftlock_storage_failing"); v != 0 {
			return fmt.Errorf("raftlock_storage_failing %v", v)
		}
		return nil
	})
	if n := tmpSnapshots(dir); n > 1 {
		t.Errorf("%d unfinished snapshot directories left after recovery", n)
	}
}

// nodeHealth returns a probe of one node's health (its answer, or the zero
// value when it does not answer within a second), for tests that watch
// that node's disk.
func nodeHealth(ctx context.Context, t *testing.T, addr string) func() api.HealthInfo {
	t.Helper()
	cl, err := client.NewClient([]string{addr}, client.WithFailFast(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return func() api.HealthInfo {
		h, _ := cl.Health(ctx)
		return h
	}
}

// A leader whose disk fills up (boltdb: its append fails, it steps down,
// and the next election's vote request asks it to store a new term, on
// which hashicorp/raft panics if the write fails) stops cleanly: its
// disk reserve gives the term write room, it logs "disk full (ENOSPC)",
// never panics, and exits with status 3 (exitDiskFull). The cluster goes
// on under another leader with every acknowledged grant; restarted with
// the disk still full it refuses to start, exit 3 again, and once space
// is freed it starts (as its supervisor restarts it) and is healthy.
func TestFullDiskStopsTheLeaderWithDiskFullNotAPanic(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs raftlockd processes on a loop-mounted ext4")
	}
	disk := smallExt4(t, 32)
	if err := os.Mkdir(disk, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := proccluster.BuildDaemon(t)
	c := proccluster.StartEach(t, bin, 3, func(i int) []string {
		if i == 0 {
			return []string{"--data-dir", filepath.Join(disk, "n1")}
		}
		return nil
	}, "--log-store", "boltdb")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	l, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cl := c.Client(client.WithRequestTimeout(10 * time.Second))
	if l != 0 {
		if _, err := cl.TransferLeadership(ctx, "n1"); err != nil {
			t.Fatal(err)
		}
	}
	proccluster.Eventually(t, time.Minute, "n1 leads", func() error {
		if l, err := c.Leader(ctx); err != nil || l != 0 {
			return fmt.Errorf("leader n%d (%v)", l+1, err)
		}
		return nil
	})
	// Sessions of up to 500 grants each (a session holds at most 1000).
	acked := map[string][]string{}
	var s api.Info
	filler := fill(t, disk)
	i := 0
	proccluster.Eventually(t, 2*time.Minute, "n1 stopped", func() error {
		if code, exited := c.Exited(0); exited {
			if code != 3 {
				return fmt.Errorf("exit status %d, want 3 (disk full)", code)
			}
			return nil
		}
		for range 8 {
			i++
			if len(acked[s.ID]) >= 500 || s.ID == "" {
				var err error
				if s, err = cl.OpenSession(ctx, api.OpenRequest{Name: "work", TTL: 5 * time.Minute}); err != nil {
					return err
				}
			}
			name := fmt.Sprintf("disk/%d", i)
			if _, err := cl.Acquire(ctx, api.AcquireRequest{Name: name, Session: s.ID, Holder: "h", Value: strings.Repeat("v", 2048)}); err == nil {
				acked[s.ID] = append(acked[s.ID], name)
			}
		}
		return fmt.Errorf("n1 runs; %d grants acknowledged", i)
	})
	log := c.Nodes[0].Log()
	if strings.Contains(log, "panic:") {
		t.Fatalf("n1 panicked:\n%s", log)
	}
	if !strings.Contains(log, "disk full (ENOSPC)") || !strings.Contains(log, "no space left on device") {
		t.Errorf("n1's log does not say disk full (ENOSPC):\n%s", log)
	}
	if code, _ := c.Exited(0); code != 3 {
		t.Fatalf("n1 exited %d, want 3 (disk full):\n%s", code, log)
	}
	for id, names := range acked {
		info, err := cl.SessionInfo(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		held := map[string]bool{}
		for _, name := range info.Locks {
			held[name] = true
		}
		for _, name := range names {
			if !held[name] {
				t.Errorf("%s, acknowledged before n1 stopped, is not held any more", name)
			}
		}
	}
	c.Restart(0)
	if code, err := c.Wait(0, time.Minute); err != nil || code != 3 {
		t.Fatalf("n1 restarted on the full disk: exit %d, %v; want 3\n%s", code, err, c.Nodes[0].Log())
	}
	if log := c.Nodes[0].Log(); !strings.Contains(log[len(log)/2:], "has no room for the 1 MiB reserve") {
		t.Errorf("n1's refusal does not name the reserve:\n%s", log)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	c.Restart(0)
	health := nodeHealth(ctx, t, c.Nodes[0].HTTPAddr)
	proccluster.Eventually(t, time.Minute, "n1 healthy once space is back", func() error {
		if h := health(); !h.OK {
			return fmt.Errorf("health %+v", h)
		}
		return nil
	})
}
