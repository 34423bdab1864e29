package node

import (
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/api/apitest"
)

// TestRaftLoggerDemotesHeartbeatFailuresAndRateLimitsElections: the
// logger given to hashicorp/raft writes its per-heartbeat failures at
// DEBUG only, lets one "failed to make requestVote RPC" per peer and one
// "entering candidate state" through per minute (then the next with the
// count it held back), and passes everything else through, through Named
// and With loggers alike.
func TestRaftLoggerDemotesHeartbeatFailuresAndRateLimitsElections(t *testing.T) {
	var logs apitest.LogBuffer
	now := time.Unix(1000, 0)
	l := &raftLogger{Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: &logs}),
		lim: &logLimiter{now: func() time.Time { return now }, every: time.Minute}}
	r := l.Named("raft").With("x", 1)
	for range 100 {
		r.Error("failed to heartbeat to", "peer", "127.0.0.1:1", "backoff time", time.Second, "error", "refused")
		r.Error("failed to appendEntries to", "peer", "{Voter n3 127.0.0.1:1}", "error", "refused")
		r.Warn("failed to contact", "server-id", "n3", "time", time.Second)
		r.Error("failed to decode incoming command", "error", "read: connection reset by peer")
		r.Error("failed to make requestVote RPC", "target", "n2", "error", "refused", "term", 3)
		r.Error("failed to make requestVote RPC", "target", "n3", "error", "refused", "term", 3)
		r.Info("entering candidate state", "node", "n1", "term", 3)
	}
	now = now.Add(time.Minute)
	r.Error("failed to make requestVote RPC", "target", "n2", "error", "refused", "term", 4)
	r.Error("failed to commit logs", "error", "disk full")
	lines := logs.Lines()
	want := []string{
		"[ERROR] raft: failed to make requestVote RPC: x=1 target=n2 error=refused term=3",
		"[ERROR] raft: failed to make requestVote RPC: x=1 target=n3 error=refused term=3",
		"[INFO]  raft: entering candidate state: x=1 node=n1 term=3",
		"[ERROR] raft: failed to make requestVote RPC: x=1 target=n2 error=refused term=4 suppressed=99",
		"[ERROR] raft: failed to commit logs: x=1 error=\"disk full\"",
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), strings.Join(lines, "\n"))
	}
	for i, w := range want {
		if !strings.HasSuffix(lines[i], w) {
			t.Errorf("line %d: %q, want it to end in %q", i, lines[i], w)
		}
	}
}

// TestPeerDownLoggedOnceThenOnceAMinuteThenBack: the peer tracker logs a
// peer whose heartbeats fail when they start failing, then at most once a
// minute with the failures since, and once when they resume; the leader's
// health counts the peer unreached meanwhile.
func TestPeerDownLoggedOnceThenOnceAMinuteThenBack(t *testing.T) {
	var logs apitest.LogBuffer
	now := time.Unix(1000, 0)
	w := newRaftWatch(hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: &logs}), "n1")
	w.now = func() time.Time { return now }
	term := func() uint64 { return 7 }
	w.observe(raft.LeaderObservation{LeaderID: "n1", LeaderAddr: "127.0.0.1:1"}, term)
	for i := range 10 * 60 * 4 { // 10 min of 4 failures a second
		now = time.Unix(1000, 0).Add(time.Duration(i) * 250 * time.Millisecond)
		w.observe(raft.FailedHeartbeatObservation{PeerID: "n3"}, term)
	}
	if !w.isDown("n3") || w.isDown("n2") {
		t.Errorf("isDown n3 %v n2 %v, want true false", w.isDown("n3"), w.isDown("n2"))
	}
	now = time.Unix(1000, 0).Add(10 * time.Minute)
	w.observe(raft.ResumedHeartbeatObservation{PeerID: "n3"}, term)
	if w.isDown("n3") {
		t.Error("n3 still down after resuming")
	}
	var leader, down, still, back int
	for _, l := range logs.Lines() {
		switch {
		case strings.Contains(l, "leader changed: leader=n1 leader_addr=127.0.0.1:1 term=7 self=true"):
			leader++
		case strings.Contains(l, "[WARN]  peer unreachable: heartbeats fail: peer=n3"):
			down++
		case strings.Contains(l, "[WARN]  peer still unreachable: peer=n3"):
			still++
		case strings.Contains(l, "[INFO]  peer reachable again: peer=n3 down_for=10m0s"):
			back++
		default:
			t.Errorf("unexpected line %q", l)
		}
	}
	if leader != 1 || down != 1 || still != 9 || back != 1 {
		t.Errorf("leader %d, down %d, still %d, back %d lines; want 1, 1, 9, 1:\n%s", leader, down, still, back, logs.String())
	}
}

// TestPeerRepairedUnderItsOldIDIsNotLeftDown: a member removed while its
// heartbeats failed, and added again under the same id (the repair of a
// damaged member), never gets a resumed heartbeat (its old replication
// ended, the new one never failed): the leader's health must not count it
// unreached for good. Raft's peer observations, on removal and on
// addition, clear it.
func TestPeerRepairedUnderItsOldIDIsNotLeftDown(t *testing.T) {
	var logs apitest.LogBuffer
	w := newRaftWatch(hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: &logs}), "n1")
	term := func() uint64 { return 7 }
	w.observe(raft.LeaderObservation{LeaderID: "n1", LeaderAddr: "127.0.0.1:1"}, term)
	for _, removed := range []bool{true, false} {
		w.observe(raft.FailedHeartbeatObservation{PeerID: "n3"}, term)
		if !w.isDown("n3") {
			t.Fatal("n3 not down after a failed heartbeat")
		}
		w.observe(raft.PeerObservation{Peer: raft.Server{ID: "n3", Address: "127.0.0.3:1"}, Removed: removed}, term)
		if w.isDown("n3") {
			t.Errorf("n3 still down after Raft %s replicating to it", map[bool]string{true: "stopped", false: "started"}[removed])
		}
	}
}
