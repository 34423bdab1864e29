package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// testConfig is a run of the checker from a test: raftlockd built from
// this module (with unsafeFault set, the build with --unsafe-fault, which
// is passed that value), clients started from the test binary, logs in a
// temp dir.
func testConfig(t *testing.T, unsafeFault string) Config {
	t.Helper()
	bin, err := buildDaemon(context.Background(), t.TempDir(), unsafeFault != "")
	if err != nil {
		t.Fatal(err)
	}
	cfg := defaultConfig()
	cfg.Raftlockd = bin
	cfg.Out = keptOnFailure(t)
	cfg.ClientCommand = []string{os.Args[0]}
	cfg.ClientEnv = []string{clientEnv}
	cfg.CheckTimeout = time.Minute
	cfg.LogLevel = "warn"
	cfg.UnsafeFault = unsafeFault
	return cfg
}

// keptOnFailure returns a new directory for a run's logs and history that
// outlives a failed test (its path is logged), unlike t.TempDir: a
// violation found once under load must be readable afterwards. A passing
// test removes it.
func keptOnFailure(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "raftlock-check-"+strings.ReplaceAll(t.Name(), "/", "_")+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the run's logs and history are kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	return dir
}

// dropPartitions removes the partition faults from cfg when iptables
// cannot be used here (not root, no iptables). In CI (CI set), where
// .ci/run installs iptables, that is a failure instead: the partition
// faults must not be skipped silently there.
func dropPartitions(t *testing.T, cfg *Config) {
	t.Helper()
	fw, err := newFirewall(context.Background())
	if err == nil {
		fw.close()
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("CI must run the partition faults, but iptables is unusable: %v", err)
	}
	t.Logf("SKIPPING the partition faults: %v", err)
	var kept []string
	for _, k := range cfg.Faults {
		if !isPartition(k) {
			kept = append(kept, k)
		}
	}
	cfg.Faults = kept
}

// dropDisks removes the disk faults from cfg when the nodes' disks cannot
// be mounted here (not root, no /dev/fuse). In CI (CI set), where .ci/run
// makes sure of /dev/fuse, that is a failure instead.
func dropDisks(t *testing.T, cfg *Config) {
	t.Helper()
	err := canMountDisks()
	if err == nil || !slices.ContainsFunc(cfg.Faults, isDiskFault) {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("CI must run the disk faults, but: %v", err)
	}
	t.Logf("SKIPPING the disk faults: %v", err)
	cfg.Faults = slices.DeleteFunc(cfg.Faults, isDiskFault)
}

// diskFaultTime is how much longer TestMixedFaults runs for each disk
// fault kind it injects (a power loss restarts every node, or the leader,
// or a follower; a disk is filled for 4-7 s; a slow disk lasts 5-8 s).
const diskFaultTime = 10 * time.Second

// runLogged runs the checker with cfg and logs its summary. The run's
// directory is logged first, so that a run the test's timeout kills
// names it too.
func runLogged(t *testing.T, cfg Config) *Report {
	t.Helper()
	t.Logf("the run's directory: %s (seed %d)", cfg.Out, cfg.Seed)
	rep, err := Run(context.Background(), cfg, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	rep.print(&sb)
	t.Log("\n" + sb.String())
	return rep
}

// requireClean fails the test unless rep is a clean run, saying whether
// checks found violations or the linearizability check was inconclusive
// (porcupine gave up: no violation found, nor a linearization), with the
// seed and the directory that keeps the run's history and logs.
func requireClean(t *testing.T, rep *Report, dir string) {
	t.Helper()
	if !requireNoViolations(t, rep, dir) {
		return
	}
	if rep.Lin.Result != porcupine.Ok {
		t.Errorf("INCONCLUSIVE, not a violation: porcupine gave up after %v on %d operations (%d of unknown outcome) "+
			"without finding a linearization or a violation; every other check passed; seed %d; history in %s",
			rep.Lin.Elapsed.Round(time.Millisecond), rep.Lin.Ops, rep.Lin.Unknown, rep.Seed, dir)
	}
}

// requireNoViolations fails the test if a check found violations, with
// their count per check, the seed and the directory that keeps the run's
// history and logs (keptOnFailure); the report runLogged printed holds
// the violations, porcupine's explanation and the history around the
// first one. It reports whether there were none.
func requireNoViolations(t *testing.T, rep *Report, dir string) bool {
	t.Helper()
	if len(rep.Violations) == 0 {
		return true
	}
	var counts []string
	for _, c := range []string{checkLinearizable, checkFencing, checkGrantKept, checkSessionKept, checkLostRegrant,
		checkQueueFIFO, checkNoGhost, checkNodeStarts, checkPrefixWatchName, checkSlotBound} {
		if n := rep.count(c); n > 0 {
			counts = append(counts, fmt.Sprintf("%s %d", c, n))
		}
	}
	t.Errorf("checks failed: %d violations (%s); seed %d; history and logs in %s", len(rep.Violations), strings.Join(counts, ", "), rep.Seed, dir)
	return false
}

// awaitingFix are the fault kinds that today's build does not survive yet.
// TestMixedFaults and TestDiskFaults leave them out; a new kind that
// catches a bug goes here until the commit that makes the build survive
// it, which removes it. (slow-disk was here until keepalives whose callers
// gave up went on to extend their leases: docs/DESIGN.md, "Slow or
// failing fsync".)
var awaitingFix = []string{}

// operatorFaultTime is how much longer TestMixedFaults runs for each
// operator action it injects (a restore or a token deletion watches the
// revoked holder for up to ttl + lock-delay + 4 s; a rotation of three
// members takes some 7-10 s, and then ttl + grace + 2-4 s).
const operatorFaultTime = 30 * time.Second

// operatorFaults is how many of the operator actions (restore,
// delete-token, rotate-members, revoke-grant, and late-answer, which
// revokes the grant whose answer it holds) cfg injects, as a count of
// durations.
func operatorFaults(cfg Config) time.Duration {
	var n time.Duration
	for _, k := range []string{faultRestore, faultDeleteToken, faultRotateMembers, faultRevokeGrant, faultLateAnswer} {
		if slices.Contains(cfg.Faults, k) {
			n++
		}
	}
	return n
}

// TestMixedFaults runs a mixed schedule of every fault kind (the
// membership faults included: leadership transferred, a follower replaced
// by a spare, the leader removed and brought back; the operator actions,
// restore, delete-token, revoke-grant and rotate-members; the disk faults,
// power-loss, slow-disk and fill-disk; but those of awaitingFix) against a correct three-node cluster: no check may fail,
// no session of a client that kept it alive may expire (a node frozen
// past the clients' ttl + grace included, which must meet clients that
// talk to it), and queues of two waiters or more must form for the
// queue-order check to judge.
func TestMixedFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real cluster and client processes for two minutes")
	}
	cfg := testConfig(t, "")
	// The protected resource is a real PostgreSQL written through the SQL
	// fence (issue 33), where one is installed (always in CI).
	postgresResource(t, &cfg)
	cfg.Faults = slices.DeleteFunc(cfg.Faults, func(k string) bool { return slices.Contains(awaitingFix, k) })
	dropDisks(t, &cfg)
	cfg.Duration = 120*time.Second + operatorFaults(cfg)*operatorFaultTime +
		time.Duration(len(slices.DeleteFunc(slices.Clone(cfg.Faults), func(k string) bool { return !isDiskFault(k) })))*diskFaultTime
	cfg.Clients, cfg.Locks, cfg.Seed = 5, 2, 4
	cfg.GapMin, cfg.GapMax = time.Second, 2*time.Second
	// Two of the five clients are the Python client's (issue 30), through
	// its conformance worker: every fault kind exercises it too.
	if cfg.Worker = pythonWorker(t); cfg.Worker != nil {
		cfg.WorkerClients = 2
	}
	dropPartitions(t, &cfg)
	if !cfg.TLS || !cfg.ACL {
		t.Fatalf("the mixed run must run with TLS and ACLs on (TLS %v, ACL %v)", cfg.TLS, cfg.ACL)
	}
	rep := runLogged(t, cfg)
	requireClean(t, rep, cfg.Out)
	for _, k := range cfg.Faults {
		if rep.Faults[k] == 0 {
			t.Errorf("fault %s was never injected", k)
		}
	}
	if rep.ExpiredUnpaused != 0 {
		t.Errorf("%d sessions expired though their client kept them alive (never paused, cut off or closed)", rep.ExpiredUnpaused)
	}
	if rep.Faults[faultFreezeNode] > 0 && rep.FrozenClients() == 0 {
		t.Errorf("no client talked to a node when it froze (%d freezes): the freezes prove nothing", rep.Faults[faultFreezeNode])
	}
	if rep.Accepted == 0 || rep.OpCounts[kindAcquire][resOK] == 0 {
		t.Errorf("no work done: %d writes accepted, %d grants", rep.Accepted, rep.OpCounts[kindAcquire][resOK])
	}
	if rep.QueueReads == 0 || rep.QueueJudged == 0 {
		t.Errorf("no queue to judge: %d reads showed two waiters or more, %d waiter pairs judged by %s",
			rep.QueueReads, rep.QueueJudged, checkQueueFIFO)
	}
	if w := rep.Worker; cfg.WorkerClients > 0 && (w == nil || w.Accepted == 0 || w.Ops[kindAcquire][resOK] == 0 || w.Ops[kindKeepAlive][resOK] == 0) {
		t.Errorf("the Python clients did no work: %+v", w)
	}
}

// pythonWorker returns the command line of the Python client's
// conformance worker (clients/python/conformance-worker), or nil, with a
// note, where no Python 3.10 or later is installed. In CI (CI set), where
// .ci/run installs python3, that is a failure instead.
func pythonWorker(t *testing.T) []string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err == nil {
		err = exec.Command(py, "-c", "import sys; sys.exit(sys.version_info < (3, 10))").Run()
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI must run the Python client's workers, but python3 (3.10 or later) is not there: %v", err)
		}
		t.Logf("SKIPPING the Python client's workers: no python3 3.10 or later: %v", err)
		return nil
	}
	worker, err := filepath.Abs(filepath.Join("..", "..", "clients", "python", "conformance-worker"))
	if err != nil {
		t.Fatal(err)
	}
	return []string{py, worker}
}

// TestNaiveWaitersLeaveNoGhosts runs the naive waiter (one request per
// acquire, no retries, no_leader taken at its word: see naiveWait) through
// leader pauses and partitions. A waiting request whose node stops leading
// must be answered unknown_outcome, never no_leader (which promises that
// nothing was appended), so a waiter that walks away on no_leader leaves
// no place behind. A cluster that answers no_leader to a wait it has
// queued grants the lock later to a ghost nobody will release: the
// no-ghost-grant check (and linearizability) fail it.
func TestNaiveWaitersLeaveNoGhosts(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real cluster and client processes")
	}
	cfg := testConfig(t, "")
	cfg.Faults = []string{faultPauseLeader, faultPartitionLeader}
	dropPartitions(t, &cfg)
	cfg.Duration = 45 * time.Second
	cfg.Clients, cfg.Locks, cfg.Seed = 5, 2, 1
	cfg.NaiveShare = 0.5
	cfg.GapMin, cfg.GapMax = time.Second, 2*time.Second
	rep := runLogged(t, cfg)
	requireClean(t, rep, cfg.Out)
	if met := rep.Naive[resUnknown] + rep.Naive[resNoLeader]; met == 0 || rep.Ghost.Judged == 0 {
		t.Errorf("the run proves little: %d naive waits met a leader loss, %d holders judged by %s", met, rep.Ghost.Judged, checkNoGhost)
	}
}

// TestCatchesSkippedLockDelay shows that the checker fails a broken
// build: raftlockd --unsafe-fault skip-lock-delay frees an expired
// holder's lock at once, so a holder paused past its TTL wakes up and
// writes inside the next holder's tenure. The fencing check must see it.
func TestCatchesSkippedLockDelay(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real cluster and client processes")
	}
	cfg := testConfig(t, "skip-lock-delay")
	cfg.Faults = []string{faultPauseClient}
	cfg.Duration = time.Minute
	cfg.Clients, cfg.Locks, cfg.Seed = 4, 1, 7
	cfg.GapMin, cfg.GapMax = 500*time.Millisecond, time.Second
	cfg.StopOnViolation = true
	rep := runLogged(t, cfg)
	if rep.count(checkFencing) == 0 {
		t.Errorf("the checker passed a build that skips the lock-delay (%d client pauses)", rep.Faults[faultPauseClient])
	}
}

// TestSemaphoresUnderFaults is the semaphore workload (--permits 2):
// five clients take slots of one semaphore and write through the
// slot-aware fence while leaders are killed, paused, cut off and moved,
// clients paused and cut off, and slot grants revoked by an operator
// (revoke-grant: the slot must stay unavailable until the revoked
// holder's Lost() closed): each slot judged as a lock (fencing, grants
// kept, Lost() before re-grant) and at most two writers at once, the
// whole history linearizable to the semaphore model (model_sem.go) and
// grants in queue order (queuechecks_sem.go), with no violation; both
// slots must be used, writes accepted, re-grants and waiter pairs judged
// and a slot grant revoked.
func TestSemaphoresUnderFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real cluster and client processes for a minute")
	}
	cfg := testConfig(t, "")
	cfg.Permits = 2
	// Over HTTP/2 (TestRevokedGrantsUnderFaults runs over the stream
	// protocol, the others over HTTP/1.1): CI runs each protocol.
	cfg.ClientProto = protoHTTP2
	cfg.Faults = []string{faultKillLeader, faultPauseLeader, faultPauseClient, faultPartitionLeader, faultPartitionClient,
		faultRestartAll, faultTransferLeader, faultRevokeGrant}
	dropPartitions(t, &cfg)
	cfg.Duration = time.Minute + operatorFaults(cfg)*operatorFaultTime/2
	cfg.Clients, cfg.Locks, cfg.Seed = 5, 1, 3
	cfg.GapMin, cfg.GapMax = time.Second, 2*time.Second
	rep := runLogged(t, cfg)
	requireClean(t, rep, cfg.Out)
	if rep.SlotsUsed != cfg.Permits || rep.SlotWrites == 0 || rep.LostJudged == 0 || rep.GrantReads == 0 || rep.QueueJudged == 0 {
		t.Errorf("the run proves little: %d slots granted, %d accepted writes, %d re-grants, %d reads and %d waiter pairs judged",
			rep.SlotsUsed, rep.SlotWrites, rep.LostJudged, rep.GrantReads, rep.QueueJudged)
	}
	if rep.Lin.NotRun != "" || rep.Lin.Ops == 0 {
		t.Errorf("the semaphore model judged nothing: %s (%d operations)", rep.Lin.NotRun, rep.Lin.Ops)
	}
	if rep.Faults[faultRevokeGrant] == 0 {
		t.Errorf("no slot grant was revoked: %+v", rep.Faults)
	}
}

// TestMixedKindsUnderFaults is the mixed-kinds workload (--mixed-kinds):
// every acquire picks exclusive, shared or a semaphore of 1 to 3 permits,
// so a name's kind changes between tenures (an acquire of another kind
// while it is held or waited for is refused, invalid_argument), and the
// resource keeps one fence per name across them, under leader kills,
// pauses and restarts, paused, cut-off and late writers, revocations and
// late answers. No check may fail (every write judged by its grant's
// kind: checkTenures); exclusive, shared and semaphores of two sizes at
// least must be granted, some acquires refused for their kind, and writes
// judged.
func TestMixedKindsUnderFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real cluster and client processes for two minutes")
	}
	cfg := testConfig(t, "")
	cfg.MixedKinds = true
	cfg.Faults = []string{faultKillLeader, faultPauseLeader, faultPauseClient, faultLateWrite, faultPartitionLeader,
		faultPartitionClient, faultRestartAll, faultTransferLeader, faultRevokeGrant, faultLateAnswer}
	dropPartitions(t, &cfg)
	cfg.Duration = 60*time.Second + operatorFaults(cfg)*operatorFaultTime/2
	cfg.Clients, cfg.Locks, cfg.Seed = 5, 2, 5
	cfg.GapMin, cfg.GapMax = time.Second, 2*time.Second
	rep := runLogged(t, cfg)
	requireNoViolations(t, rep, cfg.Out)
	sizes := 0
	for n := 1; n <= maxMixedPermits; n++ {
		if rep.KindsGranted[fmt.Sprintf("semaphore of %d", n)] > 0 {
			sizes++
		}
	}
	if rep.KindsGranted["exclusive"] == 0 || rep.KindsGranted["shared"] == 0 || sizes < 2 {
		t.Errorf("the kinds did not meet: grants %v; want exclusive, shared and semaphores of two sizes at least", rep.KindsGranted)
	}
	if rep.OpCounts[kindAcquire][resInvalid] == 0 || rep.TenureWrites == 0 || rep.LostJudged == 0 {
		t.Errorf("the run proves little: %d acquires refused for their kind, %d accepted writes and %d re-grants judged",
			rep.OpCounts[kindAcquire][resInvalid], rep.TenureWrites, rep.LostJudged)
	}
}

// TestCatchesSkippedSlotDelay: the build that skips the lock-delay
// frees an expired holder's slot at once; a holder paused past its TTL
// wakes up and writes inside its slot's next tenure. The fencing check,
// judging the slot as a lock, must see it.
func TestCatchesSkippedSlotDelay(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real cluster and client processes")
	}
	cfg := testConfig(t, "skip-lock-delay")
	cfg.Permits = 2
	cfg.Faults = []string{faultPauseClient}
	cfg.Duration = time.Minute
	cfg.Clients, cfg.Locks, cfg.Seed = 4, 1, 7
	cfg.GapMin, cfg.GapMax = 500*time.Millisecond, time.Second
	cfg.StopOnViolation = true
	rep := runLogged(t, cfg)
	if rep.count(checkFencing) == 0 {
		t.Errorf("the checker passed a build that skips a slot's lock-delay (%d client pauses)", rep.Faults[faultPauseClient])
	}
}

// TestCatchesExtraSlot: a build that grants a semaphore one slot more
// than its permits (raftlockd --unsafe-fault semaphore-extra-slot) lets
// three writers of a semaphore of two write at once; the semaphore-slots
// check must see it, and so must the semaphore model (a grant of a slot
// that a semaphore of two has not).
func TestCatchesExtraSlot(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real cluster and client processes")
	}
	cfg := testConfig(t, "semaphore-extra-slot")
	cfg.Permits = 2
	cfg.Faults = nil
	cfg.Duration = 30 * time.Second
	cfg.Clients, cfg.Locks, cfg.Seed = 4, 1, 1
	cfg.StopOnViolation = true
	rep := runLogged(t, cfg)
	if rep.count(checkSlotBound) == 0 {
		t.Errorf("the checker passed a build that grants a slot too many")
	}
	if rep.count(checkLinearizable) == 0 {
		t.Errorf("the semaphore model passed a build that grants a slot too many: %s (%s)", rep.Lin.Result, rep.Lin.NotRun)
	}
}

// TestCatchesRevocationWithoutNotice shows that the checker fails a build
// whose operator actions free a live holder's locks before its client can
// know (raftlockd --unsafe-fault revoke-without-notice ends every lock-delay
// at once after such an action; the build before issue 26 freed them so
// anyway): a restore of a backup taken before the holder's grant, or the
// deletion of the holder's token, lets a waiting client be granted the
// lock while the holder's Lost() is still open. The lost-before-regrant
// check must see it.
func TestCatchesRevocationWithoutNotice(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real cluster and client processes")
	}
	cfg := testConfig(t, "revoke-without-notice")
	// Seed 2 makes the token deletion come first.
	cfg.Faults = []string{faultRestore, faultDeleteToken}
	cfg.Duration = time.Minute
	cfg.Clients, cfg.Locks, cfg.Seed = 5, 2, 2
	cfg.GapMin, cfg.GapMax = 500*time.Millisecond, time.Second
	cfg.StopOnViolation = true
	rep := runLogged(t, cfg)
	if rep.count(checkLostRegrant) == 0 {
		t.Errorf("the checker passed a build that revokes grants without notice (%d restores, %d token deletions)",
			rep.Faults[faultRestore], rep.Faults[faultDeleteToken])
	}
}

// TestRevokedGrantsUnderFaults: an operator's revocations of held grants,
// and of grants whose answer is held on its way (late-answer), mixed with
// leader kills, pauses and restarts, the clients over the stream protocol:
// no check may fail (the revoked holder's Lost() closes before the next
// grant, a late grant is not trusted; fenced writes never overlap), and a
// late answer must have reached a client that reported the grant held.
// Hold limits (--max-hold-share) are left out here: with two fifths of the
// acquires limited, a CI run on a loaded machine had 178 of its 392
// acquires of unknown outcome (the limited waits' slices that the client
// cuts) and porcupine gave up after a minute; the model's and the checks'
// handling of hold limits is pinned by TestModelGrantEndsAtItsHoldLimit and
// TestGrantsKeptExpectsTheHoldLimit.
func TestRevokedGrantsUnderFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real cluster and client processes")
	}
	cfg := testConfig(t, "")
	cfg.ClientProto = protoStream
	cfg.Faults = []string{faultRevokeGrant, faultLateAnswer, faultKillLeader, faultPauseLeader, faultRestartAll}
	cfg.Duration = 90 * time.Second
	cfg.Clients, cfg.Locks, cfg.Seed = 5, 2, 3
	cfg.GapMin, cfg.GapMax = 500*time.Millisecond, time.Second
	rep := runLogged(t, cfg)
	requireClean(t, rep, cfg.Out)
	if rep.Faults[faultRevokeGrant] == 0 || rep.LateAnswersHeld == 0 {
		t.Errorf("no grant was revoked, or no late answer reached a client that reported the grant held (%d late answers held): %+v",
			rep.LateAnswersHeld, rep.Faults)
	}
}

// TestCatchesGrantRevocationWithoutNotice: a build whose revocation
// grants the next waiter at once (raftlockd --unsafe-fault
// revoke-without-notice ends the lock-delay right after it) is caught by
// the lost-before-regrant check.
func TestCatchesGrantRevocationWithoutNotice(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real cluster and client processes")
	}
	cfg := testConfig(t, "revoke-without-notice")
	cfg.Faults = []string{faultRevokeGrant}
	cfg.Duration = 45 * time.Second
	cfg.Clients, cfg.Locks, cfg.Seed = 5, 2, 2
	cfg.GapMin, cfg.GapMax = 500*time.Millisecond, time.Second
	cfg.StopOnViolation = true
	rep := runLogged(t, cfg)
	if rep.count(checkLostRegrant) == 0 {
		t.Errorf("the checker passed a build that revokes grants without notice (%d revocations)", rep.Faults[faultRevokeGrant])
	}
}

// TestJavaWorkersUnderFaults runs every fault kind of --faults all (but
// the disk faults, late-answer, which holds Go clients' answers only, and
// those of awaitingFix) with every client driven through the Java client's
// conformance worker (clients/java/conformance-worker; issue 31):
// no check may fail, and the Java clients must do work and hold locks.
// The worker runs what `mvn install` built, so the test runs only where
// RAFTLOCK_JAVA_WORKER is set (.ci/run sets it after its Maven build);
// elsewhere it skips, saying so.
func TestJavaWorkersUnderFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real cluster and client processes for two minutes")
	}
	if os.Getenv("RAFTLOCK_JAVA_WORKER") == "" {
		t.Skip("SKIPPING: set RAFTLOCK_JAVA_WORKER=1 after (cd clients/java && mvn install) to run the Java client's workers under faults")
	}
	worker, err := filepath.Abs(filepath.Join("..", "..", "clients", "java", "conformance-worker"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, "")
	// The disk faults judge the server, which TestMixedFaults runs them
	// against; here they would only lengthen the run.
	cfg.Faults = slices.DeleteFunc(cfg.Faults, func(k string) bool {
		return slices.Contains(awaitingFix, k) || isDiskFault(k) || k == faultLateAnswer
	})
	cfg.Duration = 90*time.Second + operatorFaults(cfg)*operatorFaultTime/2
	cfg.Clients, cfg.Locks, cfg.Seed = 5, 2, 6
	cfg.GapMin, cfg.GapMax = time.Second, 2*time.Second
	cfg.Worker, cfg.WorkerClients = []string{worker}, cfg.Clients
	dropPartitions(t, &cfg)
	rep := runLogged(t, cfg)
	requireClean(t, rep, cfg.Out)
	if w := rep.Worker; w == nil || w.Accepted == 0 || w.Ops[kindAcquire][resOK] == 0 || w.Ops[kindKeepAlive][resOK] == 0 {
		t.Errorf("the Java clients did no work: %+v", w)
	}
}

// TestCatchesLateLostWorker shows that the checker fails a broken client
// driven through a conformance worker: the Go worker's "late-lost"
// variant (RAFTLOCK_CONFORMANCE_BROKEN) reports a lock lost only after
// the lease plus the lock-delay plus half a second, so a holder cut off
// by partition-client learns it lost the lock after the cluster granted
// it to another client. Check 5 (Lost() before re-grant) must see it:
// the worker's lost events are judged as the Go client's Lost().
func TestCatchesLateLostWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real cluster and client processes")
	}
	cfg := testConfig(t, "")
	cfg.Faults = []string{faultPartitionClient}
	dropPartitions(t, &cfg)
	if len(cfg.Faults) == 0 {
		t.Skip("needs partitions (root and iptables)")
	}
	cfg.Duration = time.Minute
	cfg.Clients, cfg.Locks, cfg.Seed = 3, 1, 3
	cfg.WorkerClients = cfg.Clients
	cfg.ClientEnv = append(cfg.ClientEnv, "RAFTLOCK_CONFORMANCE_BROKEN=late-lost")
	cfg.GapMin, cfg.GapMax = 500*time.Millisecond, time.Second
	cfg.StopOnViolation = true
	rep := runLogged(t, cfg)
	if rep.count(checkLostRegrant) == 0 {
		t.Errorf("the checker passed a worker that reports lost locks late (%d client cuts)", rep.Faults[faultPartitionClient])
	}
}

// TestCatchesLocalReads shows that the checker fails a build whose
// followers answer reads from their own, possibly stale, state
// (raftlockd --unsafe-fault local-reads): a node cut off by a partition
// keeps answering what it last knew.
func TestCatchesLocalReads(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real cluster and client processes")
	}
	cfg := testConfig(t, "local-reads")
	cfg.Faults = []string{faultPartitionLeader, faultPartitionSplit}
	dropPartitions(t, &cfg)
	if len(cfg.Faults) == 0 {
		t.Skip("needs partitions (root and iptables)")
	}
	cfg.Duration = time.Minute
	cfg.Clients, cfg.Locks, cfg.Seed = 5, 2, 11
	cfg.GapMin, cfg.GapMax = 500*time.Millisecond, time.Second
	cfg.StopOnViolation = true
	rep := runLogged(t, cfg)
	if len(rep.Violations) == 0 {
		t.Errorf("the checker passed a build that answers reads locally (%d partitions)",
			rep.Faults[faultPartitionLeader]+rep.Faults[faultPartitionSplit])
	}
}

// TestCatchesDroppedWatchChanges shows that the checker fails a build
// whose prefix watches leave a change out while their index moves on
// (raftlockd --unsafe-fault watch-drops-changes drops the first lock of
// every answer that is not a reset): an acknowledged grant the watcher
// never sees. The prefix-watch check (check 9) must see it.
func TestCatchesDroppedWatchChanges(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real cluster and client processes")
	}
	cfg := testConfig(t, "watch-drops-changes")
	cfg.Faults = nil
	cfg.Duration = 30 * time.Second
	cfg.Clients, cfg.Locks, cfg.Seed = 4, 2, 1
	cfg.StopOnViolation = true
	rep := runLogged(t, cfg)
	if rep.count(checkPrefixWatchName) == 0 {
		t.Errorf("the checker passed a build whose prefix watches drop changes")
	}
}
