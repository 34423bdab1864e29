package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/cmd/internal/proccluster"
	"github.com/raftlock/raftlock/transport/client"
)

// awaitVoters waits until the cluster's members are exactly ids, all
// voters with an HTTP address.
func awaitVoters(t *testing.T, cl *client.Client, ids ...string) {
	t.Helper()
	sort.Strings(ids)
	proccluster.Eventually(t, 60*time.Second, fmt.Sprintf("voters %v", ids), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		ms, err := cl.Members(ctx)
		if err != nil {
			return err
		}
		var got []string
		for _, m := range ms {
			if !m.Voter || m.HTTPAddr == "" {
				return fmt.Errorf("member %+v", m)
			}
			got = append(got, m.ID)
		}
		sort.Strings(got)
		if fmt.Sprint(got) != fmt.Sprint(ids) {
			return fmt.Errorf("members %v", got)
		}
		return nil
	})
}

// configAt1 describes the entry at index 1 of the Raft log in dataDir (""
// if the log no longer has it).
func configAt1(t *testing.T, dataDir string) string {
	t.Helper()
	var store interface {
		raft.LogStore
		Close() error
	}
	var err error
	if _, serr := os.Stat(filepath.Join(dataDir, "wal")); serr == nil {
		store, err = wal.Open(filepath.Join(dataDir, "wal"))
	} else {
		store, err = raftboltdb.NewBoltStore(filepath.Join(dataDir, "raft.db"))
	}
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var l raft.Log
	if err := store.GetLog(1, &l); err != nil {
		if errors.Is(err, raft.ErrLogNotFound) {
			return ""
		}
		t.Fatal(err)
	}
	if l.Type != raft.LogConfiguration {
		t.Fatalf("%s: index 1 is a %v entry", dataDir, l.Type)
	}
	return fmt.Sprintf("term %d %v", l.Term, raft.DecodeConfiguration(l.Data).Servers)
}

// A wiped member restarted with its old command line does not bootstrap a
// second configuration: it exits, naming the fix (members remove, then
// --join); with the fix it rejoins; locks, sessions and tokens are
// unchanged, and every node's log holds one and the same configuration at
// index 1.
func TestWipedMemberRestartedWithOldCommandLineRefusesThenRejoins(t *testing.T) {
	if testing.Short() {
		t.Skip("starts raftlockd processes")
	}
	bin := proccluster.BuildDaemon(t)
	c := proccluster.Start(t, bin, 3)
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := cl.OpenSession(ctx, api.OpenRequest{Name: "keeper", TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	g, err := cl.Acquire(ctx, api.AcquireRequest{Name: "x", Session: s.ID, Holder: "h"})
	if err != nil {
		t.Fatal(err)
	}
	awaitVoters(t, cl, "n1", "n2", "n3")
	lead, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := (lead + 1) % 3
	id := c.Nodes[w].ID
	c.Kill(w)
	if err := os.RemoveAll(c.Flag(w, "--data-dir")); err != nil {
		t.Fatal(err)
	}
	c.Restart(w)
	code, err := c.Wait(w, 60*time.Second)
	if err != nil || code != 1 {
		t.Fatalf("wiped %s with its old command line: exit %d, %v\n%s", id, code, err, c.Nodes[w].Log())
	}
	for _, want := range []string{"refusing to bootstrap a second one", "raftlock members remove " + id, "--join"} {
		if !strings.Contains(c.Nodes[w].Log(), want) {
			t.Errorf("its log lacks %q:\n%s", want, c.Nodes[w].Log())
		}
	}
	// The fix it names.
	if err := cl.RemoveMember(ctx, id, false); err != nil {
		t.Fatal(err)
	}
	var others []string
	for i, n := range c.Nodes {
		if i != w {
			others = append(others, n.HTTPAddr)
		}
	}
	var args []string
	old := c.Args(w)
	for j := 0; j < len(old); j++ {
		if old[j] == "--peers" {
			args = append(args, "--join", strings.Join(others, ","))
			j++
			continue
		}
		args = append(args, old[j])
	}
	c.SetArgs(w, args)
	c.Restart(w)
	awaitVoters(t, cl, "n1", "n2", "n3")
	st, err := cl.LockState(ctx, "x")
	if err != nil || len(st.Holders) != 1 || st.Holders[0].Token != g.Token || st.Holders[0].Holder != "h" {
		t.Fatalf("lock x: %+v, %v; want h with token %d", st, err, g.Token)
	}
	if _, err := cl.KeepAlive(ctx, s.ID); err != nil {
		t.Fatalf("session: %v", err)
	}
	for i := range c.Nodes {
		c.Kill(i)
	}
	var first string
	for i := range c.Nodes {
		got := configAt1(t, c.Flag(i, "--data-dir"))
		switch {
		case got == "":
		case first == "":
			first = got
		case got != first:
			t.Errorf("%s has %s at index 1, another node %s", c.Nodes[i].ID, got, first)
		}
	}
	if first == "" {
		t.Error("no node has index 1")
	}
}

// A rolling restart by SIGTERM, the leader first each time, under load:
// every leader hands leadership over before it exits, no session expires,
// no request fails, and the longest gap between two grants is measured.
func TestRollingRestartBySIGTERMHandsLeadershipOverUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts raftlockd processes")
	}
	bin := proccluster.BuildDaemon(t)
	// INFO: a leader logs the transfer it makes before it exits.
	c := proccluster.Start(t, bin, 3, "--log-level", "info")
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	awaitVoters(t, cl, "n1", "n2", "n3")

	var sessions []string
	for i := 0; i < 3; i++ {
		s, err := cl.OpenSession(ctx, api.OpenRequest{TTL: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, s.ID)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []error
	var grants []time.Time
	fail := func(err error) {
		mu.Lock()
		failures = append(failures, err)
		mu.Unlock()
	}
	for _, id := range sessions {
		wg.Add(1)
		go func(id string) {
			defer wg.Done()
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				kctx, kcancel := context.WithTimeout(ctx, 2*time.Second)
				_, err := cl.KeepAlive(kctx, id)
				kcancel()
				if err != nil {
					fail(fmt.Errorf("keepalive: %w", err))
				}
			}
		}(id)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			h := fmt.Sprintf("h%d", i)
			_, err := cl.Acquire(ctx, api.AcquireRequest{Name: "roll", Session: sessions[0], Holder: h})
			if err == nil {
				mu.Lock()
				grants = append(grants, time.Now())
				mu.Unlock()
				err = cl.Release(ctx, api.ReleaseRequest{Name: "roll", Session: sessions[0], Holder: h})
			}
			if err != nil {
				fail(fmt.Errorf("acquire/release: %w", err))
			}
		}
	}()

	// awaitGrants waits for n more grants.
	awaitGrants := func(n int) {
		mu.Lock()
		want := len(grants) + n
		mu.Unlock()
		proccluster.Eventually(t, 30*time.Second, fmt.Sprintf("%d more grants", n), func() error {
			mu.Lock()
			defer mu.Unlock()
			if len(grants) < want {
				return fmt.Errorf("%d grants of %d", len(grants), want)
			}
			return nil
		})
	}
	type window struct {
		id         string
		from, to   time.Time
		wasLeading bool
	}
	var windows []window
	restarted := map[int]bool{}
	for len(restarted) < len(c.Nodes) {
		lead, err := c.Leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		i := lead
		if restarted[i] {
			for j := range c.Nodes {
				if !restarted[j] {
					i = j
					break
				}
			}
		}
		restarted[i] = true
		from := time.Now()
		code, err := c.Stop(i, 20*time.Second)
		if err != nil || code != 0 {
			t.Fatalf("SIGTERM %s: exit %d, %v\n%s", c.Nodes[i].ID, code, err, c.Nodes[i].Log())
		}
		// The load runs on the two others (50 grants) before the node
		// comes back: the window measured.
		awaitGrants(50)
		windows = append(windows, window{id: c.Nodes[i].ID, from: from, to: time.Now(), wasLeading: i == lead})
		c.Restart(i)
		awaitVoters(t, cl, "n1", "n2", "n3")
	}
	awaitGrants(50) // load after the last restart
	close(stop)
	wg.Wait()

	for _, err := range failures {
		t.Errorf("request failed: %v", err)
	}
	if len(grants) == 0 {
		t.Fatal("no grant")
	}
	var leaderGaps []time.Duration
	for _, w := range windows {
		// The longest interval between consecutive grants that ends after
		// the SIGTERM and starts before the window's end.
		var longest time.Duration
		for k := 1; k < len(grants); k++ {
			if grants[k].After(w.from) && grants[k-1].Before(w.to) && grants[k].Sub(grants[k-1]) > longest {
				longest = grants[k].Sub(grants[k-1])
			}
		}
		t.Logf("SIGTERM of %s (leader: %t): longest gap between grants %v", w.id, w.wasLeading, longest)
		if w.wasLeading {
			leaderGaps = append(leaderGaps, longest)
			if longest > 3*time.Second {
				t.Errorf("SIGTERM of leader %s: grants stopped for %v", w.id, longest)
			}
		}
	}
	sort.Slice(leaderGaps, func(i, j int) bool { return leaderGaps[i] < leaderGaps[j] })
	if len(leaderGaps) > 0 {
		t.Logf("leader SIGTERMs: %d, longest gap p50 %v, max %v; %d grants in all", len(leaderGaps),
			leaderGaps[len(leaderGaps)/2], leaderGaps[len(leaderGaps)-1], len(grants))
	}
	for i, n := range c.Nodes {
		if strings.Contains(n.Log(), "handed leadership over") {
			continue
		}
		for _, w := range windows {
			if w.id == n.ID && w.wasLeading {
				t.Errorf("%s (node %d) was SIGTERMed as leader but did not log the transfer:\n%s", n.ID, i, n.Log())
			}
		}
	}
}

// --peers that names this node at another address than its --raft-addr is
// refused (exit 1, naming both), and --join excludes --peers (exit 2).
func TestWrongOwnAddressInPeersAndJoinWithPeersAreRefused(t *testing.T) {
	raftAddr := proccluster.FreeAddr(t)
	var stderr strings.Builder
	code := run([]string{"--id", "n1", "--data-dir", t.TempDir(), "--raft-addr", raftAddr, "--http-addr", "127.0.0.1:0",
		"--peers", "n1=127.0.0.1:1,n2=127.0.0.1:2"}, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "at 127.0.0.1:1, but its Raft address is "+raftAddr) {
		t.Errorf("wrong own address: exit %d, %q", code, stderr.String())
	}
	stderr.Reset()
	code = run([]string{"--id", "n1", "--data-dir", t.TempDir(), "--raft-addr", raftAddr, "--http-addr", "127.0.0.1:0",
		"--peers", "n1=" + raftAddr, "--join", "127.0.0.1:7001"}, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "--join and --peers exclude each other") {
		t.Errorf("--join with --peers: exit %d, %q", code, stderr.String())
	}
}
