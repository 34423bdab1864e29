package node

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
)

// BenchmarkRestartAfter100kEntries measures how long a node that applied
// 100k entries takes to start again (from New until its state machine
// has applied its last entry), and how many entries it replays from its
// log, with the snapshot interval raftlockd uses by default and with
// hashicorp/raft's default (2 min, which the 100k entries never reach
// here, so no snapshot is taken). It logs its figures (b.Log) and reports
// restart-ms and replayed-entries; it asserts nothing about time. Run it
// with:
//
//	go test ./node -run '^$' -bench RestartAfter100k -benchtime 1x -v
func BenchmarkRestartAfter100kEntries(b *testing.B) {
	for _, interval := range []time.Duration{DefaultSnapshotInterval, 2 * time.Minute} {
		b.Run("snapshot-interval="+interval.String(), func(b *testing.B) {
			for range b.N {
				restart, replayed, took := restartAfter(b, 100_000, interval)
				b.ReportMetric(float64(restart.Milliseconds()), "restart-ms")
				b.ReportMetric(float64(replayed), "replayed-entries")
				b.Logf("snapshot interval %v: wrote 100k entries in %v; restart took %v, replaying %d entries",
					interval, took.Round(time.Millisecond), restart.Round(time.Millisecond), replayed)
			}
		})
	}
}

// restartAfter writes about entries log entries (acquires and releases of
// 64 sessions) into a one-node cluster with the given snapshot interval,
// waits one interval (so the node had its chance to snapshot), stops it,
// and times its restart.
func restartAfter(b *testing.B, entries int, interval time.Duration) (restart time.Duration, replayed uint64, took time.Duration) {
	b.StopTimer()
	c := newTestCluster(b, 1, func(cfg *Config) {
		cfg.SnapshotInterval = interval
	})
	n, _ := c.leader()
	ctx := context.Background()
	const workers = 64
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			info, err := n.OpenSession(ctx, api.OpenRequest{TTL: time.Minute})
			if err != nil {
				errs <- err
				return
			}
			lock := "bench/" + strconv.Itoa(w)
			for range entries / workers / 2 {
				if _, err := n.Acquire(ctx, api.AcquireRequest{Name: lock, Session: info.ID, Holder: "h"}); err != nil {
					errs <- err
					return
				}
				if err := n.Release(ctx, api.ReleaseRequest{Name: lock, Session: info.ID, Holder: "h"}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	took = time.Since(start)
	// Give the node the snapshot interval's chance to snapshot (Raft
	// waits 1x to 2x of it): wait for a snapshot with the short interval;
	// with the long one, none comes before it (that is the point).
	if interval < time.Minute {
		deadline := time.Now().Add(3 * interval)
		for time.Now().Before(deadline) && lastSnapshot(n) == 0 {
			time.Sleep(100 * time.Millisecond)
		}
	}
	last := n.fsm.AppliedIndex()
	replayed = last - lastSnapshot(n)
	c.stop(0)
	b.StartTimer()
	t0 := time.Now()
	c.start(0)
	c.mu.Lock()
	n = c.nodes[0]
	c.mu.Unlock()
	for n.fsm.AppliedIndex() < last {
		time.Sleep(time.Millisecond)
	}
	restart = time.Since(t0)
	b.StopTimer()
	c.stopAll()
	return restart, replayed, took
}

func lastSnapshot(n *Node) uint64 {
	v, _ := strconv.ParseUint(n.raft.Stats()["last_snapshot_index"], 10, 64)
	return v
}
