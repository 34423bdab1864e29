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

// A follower whose disk is full says so: its /v1/health is 503 naming
// raft.db and the error, a metric counts the failed writes, and its log
// says so at most once every 30 s; once space is freed it catches up and
// is healthy again. The cluster keeps committing meanwhile.
func TestFullDiskTurnsHealthTo503AndBack(t *testing.T) {
	disk := smallDisk(t, "8m")
	bin := proccluster.BuildDaemon(t)
	// The boltdb log store: raft.db grows with the log, so the full disk
	// fails the next write. (raft-wal preallocates its 64 MiB segments: a
	// full disk meets it when it starts a segment, watched alike.)
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
		_, err := cl.Acquire(ctx, api.AcquireRequest{Name: fmt.Sprintf("disk/%d", i), Session: s.ID, Holder: "h", Value: strings.Repeat("v", 2048)})
		return err
	}
	proccluster.Eventually(t, time.Minute, "n3 reports the full disk", func() error {
		if err := work(); err != nil {
			return err
		}
		if h := health(); h.OK || !strings.Contains(h.Reason, "raft.db") || !strings.Contains(h.Reason, "no space left") {
			return fmt.Errorf("health %+v", h)
		}
		return nil
	})
	if log := c.Nodes[2].Log(); strings.Count(log, "Raft store write failed") > 2 {
		t.Errorf("the write failures were logged %d times in well under a minute:\n%s", strings.Count(log, "Raft store write failed"), log)
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
		return nil
	})
	resp, err := http.Get("http://" + c.Nodes[2].HTTPAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if m := regexp.MustCompile(`(?m)^raftlock_storage_errors_total (\d+)`).FindSubmatch(body); m == nil || string(m[1]) == "0" {
		t.Errorf("n3's raftlock_storage_errors_total: %q, want the failed writes counted", m)
	}
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
