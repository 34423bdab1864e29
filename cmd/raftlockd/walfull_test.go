package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/cmd/internal/proccluster"
	"github.com/raftlock/raftlock/transport/client"
)

// A follower whose disk fills up while raft-wal rotates to a new segment
// (raft-wal then keeps answering "segment is sealed" to every append,
// even after space is freed and after a restart) recovers by itself once
// space is back: the node rebuilds its wal/ (the same entries, in a
// fresh segment) and catches up, with no action.
func TestWALFullAtSegmentRotationRecoversWhenSpaceReturns(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs raftlockd processes, writes 64 MiB of log")
	}
	bin := proccluster.BuildDaemon(t)
	t.Run("running", func(t *testing.T) { walFullAtRotation(t, bin, false) })
	t.Run("restarted", func(t *testing.T) { walFullAtRotation(t, bin, true) })
}

// walFullAtRotation fills n3's disk until its raft-wal is stuck at a
// segment rotation, frees the space (restarting n3 meanwhile if restart
// is set), and awaits n3 healthy and caught up.
func walFullAtRotation(t *testing.T, bin string, restart bool) {
	// The first 64 MiB segment and the node's free-space margin (68 MiB),
	// with room for the rebuild: a copy of the ~64 MiB log in two fresh
	// segments.
	disk := smallExt4(t, 230)
	if err := os.Mkdir(disk, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := disk + "/n3"
	c := proccluster.StartEach(t, bin, 3, func(i int) []string {
		if i == 2 {
			return []string{"--data-dir", dir}
		}
		return nil
	}, "--log-store", "wal", "--snapshot-trailing-logs", "100000")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
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
	cl := c.Client()
	value := strings.Repeat("v", api.MaxValueBytes)
	var written atomic.Int64
	work := func(ctx context.Context, workers int) {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := cl.OpenSession(ctx, api.OpenRequest{Name: fmt.Sprintf("w%d", w), TTL: 5 * time.Minute})
				if err != nil {
					return
				}
				name := fmt.Sprintf("wal/%d", w)
				for ctx.Err() == nil {
					if _, err := cl.Acquire(ctx, api.AcquireRequest{Name: name, Session: s.ID, Holder: "h", Value: value}); err != nil {
						continue
					}
					_ = cl.Release(ctx, api.ReleaseRequest{Name: name, Session: s.ID, Holder: "h"})
					written.Add(1)
				}
			}()
		}
		wg.Wait()
	}
	filler := fill(t, disk)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); work(wctx, 16) }()
	proccluster.Eventually(t, 40*time.Second, "n3 stuck at a segment rotation", func() error {
		if h := health(); h.OK || !strings.Contains(h.Reason, "/wal:") {
			out, _ := exec.Command("sh", "-c", "df -k "+disk+"; ls -la "+dir+"/wal "+dir+"/snapshots").CombinedOutput()
			return fmt.Errorf("health %+v after %d grants\n%s", h, written.Load(), out)
		}
		return nil
	})
	stop()
	<-done
	t.Logf("n3 stuck after %d grants of %d-byte values", written.Load(), len(value))
	if restart {
		c.Kill(2)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if restart {
		c.Restart(2)
	}
	wctx, stop = context.WithCancel(ctx)
	done = make(chan struct{})
	go func() { defer close(done); work(wctx, 2) }()
	defer func() { stop(); <-done }()
	proccluster.Eventually(t, time.Minute, "n3 healthy and caught up once space is back", func() error {
		h := health()
		if !h.OK {
			return fmt.Errorf("health %+v", h)
		}
		l, err := c.Leader(ctx)
		if err != nil {
			return err
		}
		ld, err := client.NewClient([]string{c.Nodes[l].HTTPAddr}, client.WithFailFast(time.Second))
		if err != nil {
			return err
		}
		lh, err := ld.Health(ctx)
		ld.CloseIdleConnections()
		if err != nil {
			return err
		}
		if h.AppliedIndex+100 < lh.AppliedIndex {
			return fmt.Errorf("n3 applied %d, the leader %d", h.AppliedIndex, lh.AppliedIndex)
		}
		return nil
	})
	if !strings.Contains(c.Nodes[2].Log(), "rebuilding wal/") {
		t.Errorf("n3 recovered without rebuilding wal/: the test did not reach the stuck rotation\n%s", c.Nodes[2].Log())
	}
}
