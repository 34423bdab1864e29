package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/api/apitest"
	"github.com/raftlock/raftlock/sequencer"
	"github.com/raftlock/raftlock/transport/client"
)

// logTo sends every node's log, at level and above, to logs.
func logTo(logs *apitest.LogBuffer, level hclog.Level) func(*Config) {
	return func(cfg *Config) {
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: cfg.ID, Level: level, Output: logs})
	}
}

// awaitLine waits until a line of logs from offset on matches re, and
// returns it.
func awaitLine(t *testing.T, logs *apitest.LogBuffer, from int, re *regexp.Regexp, timeout time.Duration) string {
	t.Helper()
	var line string
	eventually(t, timeout, "a log line matching "+re.String(), func() error {
		for _, l := range logs.Lines()[min(from, len(logs.Lines())):] {
			if re.MatchString(l) {
				line = l
				return nil
			}
		}
		return errors.New("none yet")
	})
	return line
}

// TestDeadPeerLoggedFewerThan5TimesIn60s: with one follower dead for 60 s,
// the live nodes log it fewer than 5 times (hashicorp/raft alone logs
// "failed to heartbeat" several times a second): once when it goes down,
// at most once a minute while it stays down; and once when it comes back.
// It runs for a minute: -short skips it.
func TestDeadPeerLoggedFewerThan5TimesIn60s(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for 60 s")
	}
	var logs apitest.LogBuffer
	// Slow Raft timeouts: an election under load (the leader starved of
	// CPU) would log the dead peer on its own, which is not what this
	// test judges.
	c := newTestCluster(t, 3, func(cfg *Config) { slowRaft(cfg); logTo(&logs, hclog.Info)(cfg) })
	_, li := c.leader()
	victim := (li + 1) % 3
	vid := c.id(victim)
	c.stop(victim)
	from := len(logs.Lines())
	down := time.Now()
	awaitLine(t, &logs, from, regexp.MustCompile(`peer unreachable.*peer=`+vid+`\b`), 10*time.Second)
	// The observation window: the test asserts what a minute of a dead
	// peer writes, so it waits out that minute.
	time.Sleep(time.Until(down.Add(60 * time.Second)))
	var about, raftErrors []string
	for _, l := range logs.Lines()[from:] {
		if strings.Contains(l, " "+vid+".") { // the dead node's own lines
			continue
		}
		if strings.Contains(l, vid) || strings.Contains(l, c.addrs[victim]) {
			about = append(about, l)
		}
		if strings.Contains(l, "[ERROR]") {
			raftErrors = append(raftErrors, l)
		}
	}
	t.Logf("%d lines name the dead peer in 60 s; %d ERROR lines:\n%s", len(about), len(raftErrors), strings.Join(about, "\n"))
	if len(about) >= 5 {
		t.Errorf("the dead peer is logged %d times in 60 s, want fewer than 5", len(about))
	}
	if len(raftErrors) > 0 {
		t.Errorf("%d ERROR lines, want none:\n%s", len(raftErrors), strings.Join(raftErrors, "\n"))
	}
	from = len(logs.Lines())
	c.start(victim)
	awaitLine(t, &logs, from, regexp.MustCompile(`peer reachable again.*peer=`+vid+`\b`), 20*time.Second)
}

// TestCancelledWatchLogsNothingAtWarn: a client that cancels a watch
// (through a follower, which forwards it to the leader) leaves no line at
// WARN or above on either node.
func TestCancelledWatchLogsNothingAtWarn(t *testing.T) {
	var logs apitest.LogBuffer
	c := newTestCluster(t, 3, func(cfg *Config) { slowRaft(cfg); logTo(&logs, hclog.Trace)(cfg) }, withHTTP)
	_, li := c.leader()
	follower := (li + 1) % 3
	cl, err := client.NewClient([]string{c.httpAddrs[follower]})
	if err != nil {
		t.Fatal(err)
	}
	// A watch of a free lock answers once the applied index moves: wait
	// until every member has registered its HTTP address (the last
	// entries a quiet cluster appends) before taking the index.
	ld, _ := c.leader()
	eventually(t, 20*time.Second, "every member registered", func() error {
		if m := ld.fsm.Members(); len(m) < 3 {
			return fmt.Errorf("%d member records", len(m))
		}
		return nil
	})
	st, err := cl.LockState(ctxT(t), "watched")
	if err != nil {
		t.Fatal(err)
	}
	from := len(logs.Lines())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := cl.WatchLock(ctx, "watched", st.Index, time.Minute)
		done <- err
	}()
	awaitLine(t, &logs, from, regexp.MustCompile(c.id(follower)+`\.http: forwarding to the leader: method=GET path=/v1/lock`), 10*time.Second)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("watch: %v, want context.Canceled", err)
	}
	// The follower logs the ended request at DEBUG; the leader has
	// answered it once its request metrics count it (the LockState
	// above was the first).
	awaitLine(t, &logs, from, regexp.MustCompile(`\[DEBUG\] `+c.id(follower)+`\.http: request refused: method=GET path=/v1/lock`), 10*time.Second)
	eventually(t, 10*time.Second, "the leader ends the watch", func() error {
		mf, _, err := scrape(ctxT(t), c.httpAddrs[li], "")
		if err != nil {
			return err
		}
		var n float64
		for _, m := range mf["raftlock_http_request_duration_seconds"].GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "route" && lp.GetValue() == "GET /v1/lock" {
					n += float64(m.GetHistogram().GetSampleCount())
				}
			}
		}
		if n < 2 {
			return fmt.Errorf("%v GET /v1/lock answered", n)
		}
		return nil
	})
	for _, l := range logs.Lines()[from:] {
		if strings.Contains(l, "[WARN]") || strings.Contains(l, "[ERROR]") {
			t.Errorf("a cancelled watch logged: %s", l)
		}
	}
}

// TestExpiryLineNamesTheSessionAndItsLocks: the leader's line for an
// expired session names the session, the locks it held and when their
// lock-delay ends.
func TestExpiryLineNamesTheSessionAndItsLocks(t *testing.T) {
	var logs apitest.LogBuffer
	c := newTestCluster(t, 1, logTo(&logs, hclog.Info))
	info := mustOpen(t, c, api.OpenRequest{Name: "worker-7", TTL: time.Second, LockDelay: 30 * time.Second})
	for _, name := range []string{"jobs/b", "jobs/a"} {
		mustAcquire(t, c, api.AcquireRequest{Name: name, Session: info.ID, Holder: "w", Mode: sequencer.Exclusive})
	}
	line := awaitLine(t, &logs, 0, regexp.MustCompile(`session expired`), 20*time.Second)
	t.Logf("%s", line)
	for _, want := range []string{"session=worker-7", "session_handle=" + api.SessionHandle(info.ID),
		`locks=["jobs/a", "jobs/b"]`, "lock_delay_until=" + fmt.Sprint(time.Now().UTC().Year())} {
		if !strings.Contains(line, want) {
			t.Errorf("expiry line lacks %s: %s", want, line)
		}
	}
}

// TestRestoreLogsNoError: a restore into a running cluster, taken in by
// every member, logs no line at ERROR. hashicorp/raft's leader asks for the
// entries the restore compacted away once or twice before it sends the
// followers the snapshot ("failed to get log"): expected then, so DEBUG.
func TestRestoreLogsNoError(t *testing.T) {
	var logs apitest.LogBuffer
	c := newTestCluster(t, 3, func(cfg *Config) { slowRaft(cfg); logTo(&logs, hclog.Info)(cfg) }, withHTTP)
	ctx := ctxT(t)
	n, _ := c.leader()
	s := mustOpen(t, c, api.OpenRequest{TTL: time.Minute})
	mustAcquire(t, c, api.AcquireRequest{Name: "before", Session: s.ID, Holder: "h"})
	var backup bytes.Buffer
	if _, err := n.Snapshot(ctx, &backup); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		mustAcquire(t, c, api.AcquireRequest{Name: fmt.Sprintf("after/%d", i), Session: s.ID, Holder: "h"})
	}
	from := len(logs.Lines())
	info, err := n.Restore(ctx, backup.Bytes(), 0)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "every member took the restore in", func() error {
		for i, m := range c.nodes {
			if got := m.fsm.AppliedIndex(); got < info.Index-1 {
				return fmt.Errorf("%s applied %d, want %d", c.id(i), got, info.Index-1)
			}
		}
		return nil
	})
	awaitLine(t, &logs, from, regexp.MustCompile(`state restored from a backup`), 10*time.Second)
	for _, l := range logs.Lines()[from:] {
		if strings.Contains(l, "[ERROR]") {
			t.Errorf("the restore logged: %s", l)
		}
	}
}
