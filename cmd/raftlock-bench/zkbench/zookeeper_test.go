package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/raftlock/raftlock/cmd/raftlock-bench/internal/bench"
)

// testZKAddr is the standalone server of the tests (the benchmark's
// ensemble uses 127.0.0.51-53).
const testZKAddr = "127.0.0.54:2181"

// startZooKeeper starts a standalone ZooKeeper server (Debian's zookeeperd
// jar) on testZKAddr for the test and waits until it serves. The test is
// skipped where the package is not installed, and with -short.
func startZooKeeper(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a ZooKeeper server (a JVM)")
	}
	const jar = "/usr/share/java/zookeeper.jar"
	if _, err := os.Stat(jar); err != nil {
		t.Skipf("ZooKeeper not installed (%v): apt-get install zookeeperd", err)
	}
	java, err := exec.LookPath("java")
	if err != nil {
		t.Skip("no java")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "zoo.cfg")
	conf := fmt.Sprintf("tickTime=2000\ndataDir=%s\nclientPortAddress=127.0.0.54\nclientPort=2181\nmaxClientCnxns=0\n"+
		"admin.enableServer=false\n4lw.commands.whitelist=srvr,conf\n", filepath.Join(dir, "data"))
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "zookeeper.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(java, "-cp", jar, "-Xmx256m", "org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		out, err := fourLetter(ctx, testZKAddr, "srvr")
		if err == nil {
			if _, err = parseSrvr(out); err == nil {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("ZooKeeper on %s not serving: %v", testZKAddr, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestZooKeeperRecipeAgainstARealServer runs the lock recipe, the system
// and the session load against a standalone server: the recipe excludes
// (never two holders), a child left by a failed release or by a create
// whose outcome was unknown does not block the session's next acquire,
// the leader is found with srvr, and the session load sees its pings
// acknowledged.
func TestZooKeeperRecipeAgainstARealServer(t *testing.T) {
	startZooKeeper(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	sys, err := newSystem(ctx, []string{testZKAddr}, 4*time.Second, true)
	if err != nil {
		t.Fatal(err)
	}
	if id, _, err := sys.Leader(ctx); err != nil || id != sys.ids[testZKAddr] {
		t.Fatalf("Leader = %q, %v; want %q", id, err, sys.ids[testZKAddr])
	}

	t.Run("one holder at a time", func(t *testing.T) {
		const clients, pairs = 4, 15
		var holders, overlaps atomic.Int32
		var wg sync.WaitGroup
		for i := range clients {
			w, err := sys.NewWorker(ctx, i, "test/excl")
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close(ctx)
			l := w.(*worker).l
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range pairs {
					if _, err := l.acquire(ctx); err != nil {
						t.Error(err)
						return
					}
					if holders.Add(1) > 1 {
						overlaps.Add(1)
					}
					time.Sleep(time.Millisecond) // hold it a moment: overlap would show
					holders.Add(-1)
					if err := l.release(); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if overlaps.Load() != 0 {
			t.Fatalf("%d acquires while another client held the lock", overlaps.Load())
		}
	})

	t.Run("a left-behind child does not block the next acquire", func(t *testing.T) {
		w, err := sys.NewWorker(ctx, 0, "test/orphan")
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close(ctx)
		l := w.(*worker).l
		// A release that failed: the child is still there.
		if _, err := l.acquire(ctx); err != nil {
			t.Fatal(err)
		}
		l.stale, l.held = []string{l.held}, ""
		// A create whose answer was lost: a child with the remembered guid.
		guid, _ := newGUID()
		if _, err := l.c.Create(l.path+"/"+protectedPrefix+guid+"-"+lockPrefix, nil,
			zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		l.staleGUID = guid
		actx, acancel := context.WithTimeout(ctx, 5*time.Second)
		defer acancel()
		if _, err := l.acquire(actx); err != nil {
			t.Fatalf("acquire after a failed release and a lost create: %v", err)
		}
		children, _, err := l.c.Children(l.path)
		if err != nil || len(children) != 1 {
			t.Fatalf("children %v, %v: want only the holder's", children, err)
		}
		if err := l.release(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("sessions are kept alive by acknowledged pings", func(t *testing.T) {
		o := &bench.Options{TTL: 4 * time.Second, Workers: 4}
		sl := sys.NewSessionLoad(o, "test/c")
		defer sl.Close(ctx)
		var lat bench.Latencies
		if _, err := sl.Open(ctx, 5, &lat); err != nil {
			t.Fatal(err)
		}
		if err := sl.Hold(ctx, 5); err != nil {
			t.Fatal(err)
		}
		for sl.Stats().Acked < 5 { // one ping each, every TTL/3
			select {
			case <-ctx.Done():
				t.Fatalf("pings acknowledged: %+v", sl.Stats())
			case <-time.After(50 * time.Millisecond):
			}
		}
		if st := sl.Stats(); st.Spurious != 0 || st.Lapsed != 0 || st.Latency.Len() == 0 {
			t.Fatalf("stats %+v", st)
		}
	})
}
