package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/cmd/internal/crashfs"
	"github.com/raftlock/raftlock/cmd/internal/proccluster"
	"github.com/raftlock/raftlock/transport/client"
)

// followerOn starts a 3-node cluster whose n3 keeps its data on disk and
// makes sure n3 follows; it returns the cluster and a client of n3 alone.
func followerOn(t *testing.T, ctx context.Context, disk *crashfs.FS, extra ...string) (*proccluster.Cluster, *client.Client) {
	t.Helper()
	bin := proccluster.BuildDaemon(t)
	c := proccluster.StartEach(t, bin, 3, func(i int) []string {
		if i == 2 {
			return []string{"--data-dir", disk.Dir()}
		}
		return nil
	}, extra...)
	l, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l == 2 {
		if _, err := c.Client().TransferLeadership(ctx, "n1"); err != nil {
			t.Fatal(err)
		}
	}
	n3, err := client.NewClient([]string{c.Nodes[2].HTTPAddr}, client.WithFailFast(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	proccluster.Eventually(t, time.Minute, "n3 a healthy follower", func() error {
		h, err := n3.Health(ctx)
		if err != nil || !h.OK || h.IsLeader {
			return fmt.Errorf("%+v %v", h, err)
		}
		return nil
	})
	return c, n3
}

// A follower whose fsyncs failed for a while under load says so (health
// 503, raftlock_storage_failing 1), and says it no more once its disk
// works again: it is sent the entries it failed to store again and
// catches up. (hashicorp/raft's pipeline replication used to deadlock
// when a follower failed an append with more appends in flight: the
// leader then sent it nothing more but heartbeats, and its flag stayed
// up for good; the node drains the pipeline, pipeline.go.) The log's
// flag clears on the first append that succeeds: Raft sends n3 again
// the entries it failed to store, even once nothing more is written.
func TestStorageFailingClearsOnceTheDiskWorksAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs raftlockd processes on a FUSE disk")
	}
	disk, err := crashfs.MountT(t)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, n3 := followerOn(t, ctx, disk)
	cl := c.Client(client.WithRequestTimeout(10 * time.Second))
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := cl.OpenSession(wctx, api.OpenRequest{Name: fmt.Sprintf("w%d", w), TTL: 5 * time.Minute})
			if err != nil {
				return
			}
			name := fmt.Sprintf("f/%d", w)
			for wctx.Err() == nil {
				if _, err := cl.Acquire(wctx, api.AcquireRequest{Name: name, Session: s.ID, Holder: "h", Value: strings.Repeat("v", 1024)}); err == nil {
					_ = cl.Release(wctx, api.ReleaseRequest{Name: name, Session: s.ID, Holder: "h"})
				}
			}
		}()
	}
	defer func() { stop(); wg.Wait() }()
	time.Sleep(500 * time.Millisecond) // load, not synchronisation: appends in flight when the disk fails
	disk.SetSyncError(syscall.EIO)
	proccluster.Eventually(t, time.Minute, "n3 says its disk fails", func() error {
		h, _ := n3.Health(ctx)
		if h.OK || !strings.Contains(h.Reason, "input/output error") {
			return fmt.Errorf("health %+v", h)
		}
		return nil
	})
	time.Sleep(time.Second) // load, not synchronisation: more failed appends
	disk.SetSyncError(0)
	time.Sleep(time.Second) // load, not synchronisation: appends after the disk works again
	stop()
	wg.Wait()
	// Nothing is written from here on.
	proccluster.Eventually(t, 30*time.Second, "n3 healthy and caught up once its disk works", func() error {
		h, _ := n3.Health(ctx)
		if !h.OK {
			return fmt.Errorf("health %+v", h)
		}
		if v := metric(t, c.Nodes[2].HTTPAddr, "raftlock_storage_failing"); v != 0 {
			return fmt.Errorf("raftlock_storage_failing %v", v)
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
		if h.AppliedIndex < lh.AppliedIndex {
			return fmt.Errorf("n3 applied %d, the leader %d", h.AppliedIndex, lh.AppliedIndex)
		}
		return nil
	})
}

// A leader whose fsyncs take 2 s while its followers' take well under a
// millisecond hands leadership to a follower (its moving average of
// write latency is over 200 ms and over 10 times the follower's, three
// checks in a row), and the slow writes show in
// raftlock_storage_write_seconds.
func TestSlowLeaderDiskHandsLeadershipToAHealthyVoter(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs raftlockd processes on FUSE disks")
	}
	disks := powerLossDisks(t, 3)
	bin := proccluster.BuildDaemon(t)
	c := proccluster.StartEach(t, bin, 3, func(i int) []string {
		return []string{"--data-dir", disks[i].Dir()}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	slow, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cl := c.Client(client.WithRequestTimeout(10 * time.Second))
	s, err := cl.OpenSession(ctx, api.OpenRequest{Name: "work", TTL: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	disks[slow].SetSyncDelay(2 * time.Second)
	defer disks[slow].SetSyncDelay(0)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; wctx.Err() == nil; i++ {
			_, _ = cl.Acquire(wctx, api.AcquireRequest{Name: fmt.Sprintf("slow/%d", i), Session: s.ID, Holder: "h"})
		}
	}()
	defer func() { stop(); <-done }()
	began := time.Now()
	proccluster.Eventually(t, 90*time.Second, "leadership leaves the slow disk", func() error {
		l, err := c.Leader(ctx)
		if err != nil {
			return err
		}
		if l == slow {
			return fmt.Errorf("n%d, whose fsyncs take 2 s, still leads", slow+1)
		}
		return nil
	})
	t.Logf("leadership left n%d %v after its disk slowed", slow+1, time.Since(began).Round(100*time.Millisecond))
	if !strings.Contains(c.Nodes[slow].Log(), "much slower than a follower's") {
		t.Errorf("n%d did not say why it handed leadership over:\n%s", slow+1, c.Nodes[slow].Log())
	}
	if v := metric(t, c.Nodes[slow].HTTPAddr, `raftlock_storage_write_seconds_bucket{store="log",le="1"}`); v < 0 {
		t.Errorf("raftlock_storage_write_seconds missing on n%d", slow+1)
	} else if total := metric(t, c.Nodes[slow].HTTPAddr, `raftlock_storage_write_seconds_count{store="log"}`); total <= v {
		t.Errorf("n%d's raftlock_storage_write_seconds shows no write over 1 s (%v of %v)", slow+1, v, total)
	}
}

// A follower that falls far behind its leader (its fsyncs take a second
// while the others' take well under a millisecond) answers /v1/health
// not ok, naming its lag and the bound, though it hears from its leader
// on time (heartbeats touch no disk); once its disk is fast again it
// catches up and is healthy.
func TestFollowerFarBehindItsLeaderIsNotHealthy(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs raftlockd processes on a FUSE disk")
	}
	disk, err := crashfs.MountT(t)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, n3 := followerOn(t, ctx, disk)
	cl := c.Client(client.WithRequestTimeout(10 * time.Second))
	disk.SetSyncDelay(time.Second)
	defer disk.SetSyncDelay(0)
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := cl.OpenSession(wctx, api.OpenRequest{Name: fmt.Sprintf("w%d", w), TTL: 5 * time.Minute})
			if err != nil {
				return
			}
			name := fmt.Sprintf("lag/%d", w)
			for wctx.Err() == nil {
				if _, err := cl.Acquire(wctx, api.AcquireRequest{Name: name, Session: s.ID, Holder: "h"}); err == nil {
					_ = cl.Release(wctx, api.ReleaseRequest{Name: name, Session: s.ID, Holder: "h"})
				}
			}
		}()
	}
	defer func() { stop(); wg.Wait() }()
	proccluster.Eventually(t, 90*time.Second, "n3 says it is behind its leader", func() error {
		h, _ := n3.Health(ctx)
		if h.OK || !strings.Contains(h.Reason, "behind its leader") || !strings.Contains(h.Reason, "the bound is") {
			return fmt.Errorf("health %+v", h)
		}
		if h.Leader == "" || h.LastContactMillis > 1000 {
			return fmt.Errorf("n3 lost its leader, not only fell behind: %+v", h)
		}
		return nil
	})
	stop()
	wg.Wait()
	disk.SetSyncDelay(0)
	proccluster.Eventually(t, time.Minute, "n3 healthy once it caught up", func() error {
		if h, _ := n3.Health(ctx); !h.OK {
			return fmt.Errorf("health %+v", h)
		}
		return nil
	})
}
