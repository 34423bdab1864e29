package main

import (
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// runDisks runs the checker with cfg, whose faults include disk faults:
// where the nodes' disks cannot be mounted (not root, no /dev/fuse) the
// test is skipped, except in CI (CI set), where .ci/run provides both and
// it fails.
func runDisks(t *testing.T, cfg Config) *Report {
	t.Helper()
	rep, err := Run(context.Background(), cfg, testWriter{t})
	if errors.Is(err, errNoDisks) {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI must run the disk faults: %v", err)
		}
		t.Skipf("SKIPPING: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	rep.print(&sb)
	t.Log("\n" + sb.String())
	return rep
}

// TestDiskFaults runs the disk faults against a correct three-node
// cluster, each node's data dir on a disk of its own (crashfs over a
// tmpfs): power loss of all nodes, of the leader and of a follower (every
// write not fsynced lost), the leader's fsyncs 1-2 s slow for seconds, a
// disk filled until writes fail and then freed. No check may fail: no
// acknowledged grant lost, tokens higher after a power loss, and every
// node the faults hit healthy again with no action (node-starts). The
// kinds in awaitingFix (slow-disk) are left out.
func TestDiskFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real cluster and client processes for 75 s")
	}
	cfg := testConfig(t, "")
	cfg.Faults = slices.DeleteFunc([]string{faultPowerLoss, faultSlowDisk, faultFillDisk},
		func(k string) bool { return slices.Contains(awaitingFix, k) })
	cfg.Clients, cfg.Locks, cfg.Seed = 5, 2, 3
	// A TTL of 5 s lets the slow disk's fsyncs take 1-1.7 s (TTL/3 at
	// most: slowDiskDelay).
	cfg.TTL = 5 * time.Second
	cfg.Duration = 75 * time.Second
	cfg.GapMin, cfg.GapMax = time.Second, 2*time.Second
	// Snapshots every 64 entries (checked every 200 ms), so that power
	// losses come shortly after one: a snapshot not yet durable while
	// the log it replaces is compacted leaves a node unable to start.
	cfg.NodeFlags = []string{"--snapshot-threshold", "64", "--snapshot-interval", "200ms", "--snapshot-trailing-logs", "16"}
	rep := runDisks(t, cfg)
	requireClean(t, rep, cfg.Out)
	for _, k := range cfg.Faults {
		if rep.Faults[k] == 0 {
			t.Errorf("fault %s was never injected", k)
		}
	}
	if rep.NodeStartsJudged != rep.Faults[faultPowerLoss]+rep.Faults[faultSlowDisk]+rep.Faults[faultFillDisk] {
		t.Errorf("node-starts judged %d faults, want every disk fault", rep.NodeStartsJudged)
	}
	if rep.Accepted == 0 || rep.OpCounts[kindAcquire][resOK] == 0 || rep.GrantReads == 0 {
		t.Errorf("no work done: %d writes accepted, %d grants, %d reads judged by %s",
			rep.Accepted, rep.OpCounts[kindAcquire][resOK], rep.GrantReads, checkGrantKept)
	}
}

// TestNodeThatCannotStartIsAViolation pins the node-starts check: a node
// whose process exits when a disk fault restarts it (here a binary that
// exits at once) is reported as a violation naming the node and the
// fault, not skipped.
func TestNodeThatCannotStartIsAViolation(t *testing.T) {
	dir := t.TempDir()
	cl, err := newCluster("/bin/false", dir, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := cl.nodes[0]
	if err := cl.start(n); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = cl.awaitHealthy(ctx, n, 20*time.Second)
	if err == nil || !strings.Contains(err.Error(), "exited") {
		t.Fatalf("awaitHealthy of a process that exits: %v, want an error saying it exited", err)
	}
	in := &injector{cl: cl, progress: io.Discard, start: monoNow()}
	in.nodeFailed(n, faultPowerLoss, err)
	if len(in.failures) != 1 || in.failures[0].Check != checkNodeStarts ||
		!strings.Contains(in.failures[0].What, "n1 did not come back after power-loss") {
		t.Fatalf("failures: %+v, want one %s violation about n1", in.failures, checkNodeStarts)
	}
	cl.stopAll(time.Second)
}

// TestDiskFaultsParse pins the names of the disk fault kinds in --faults,
// and that "all" includes them, left out where the disks cannot be
// mounted unless they are named.
func TestDiskFaultsParse(t *testing.T) {
	kinds, err := parseFaults("power-loss, slow-disk,fill-disk")
	if err != nil || !slices.Equal(kinds, []string{faultPowerLoss, faultSlowDisk, faultFillDisk}) {
		t.Fatalf("parseFaults: %v, %v", kinds, err)
	}
	for _, k := range kinds {
		if !isDiskFault(k) {
			t.Errorf("%s is not a disk fault", k)
		}
	}
	// "all" includes them, where the machine can mount the disks.
	for _, s := range []string{"all", "", "all,kill-leader"} {
		all, err := parseFaults(s)
		if err != nil || !slices.Equal(all, knownFaults) {
			t.Fatalf("--faults %q: %v, %v: want every kind, the disk faults included", s, all, err)
		}
		if !disksFromAll(s) {
			t.Errorf("--faults %q: the disk faults came with all, and may be left out", s)
		}
	}
	// Named, they must run.
	for _, s := range []string{"all,fill-disk", "power-loss", "kill-leader"} {
		if disksFromAll(s) {
			t.Errorf("--faults %q: the disk faults are named (or not asked for): they must not be left out", s)
		}
	}
	cfg, err := parseFlags(nil, io.Discard)
	if err != nil || !cfg.DisksIfAble || !slices.Equal(cfg.Faults, knownFaults) {
		t.Fatalf("default flags: %v, DisksIfAble %v, faults %v", err, cfg.DisksIfAble, cfg.Faults)
	}
}
