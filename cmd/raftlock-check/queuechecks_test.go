package main

import (
	"strings"
	"testing"
)

// Builders of the queue checks' histories.

// waitFor sets a waiting acquire's wait and counts its one clean attempt.
func waitFor(o Op, wait int64) Op {
	o.Wait, o.WaitFor = true, wait
	o.Attempts = 1
	return o
}

// clean counts one attempt, answered, for o.
func clean(o Op) Op {
	o.Attempts = 1
	return o
}

// naiveOp marks o as the naive waiter's.
func naiveOp(o Op) Op {
	o.Naive = true
	return o
}

// opCancel is a release that is not an Unlock: a waiter giving up its
// place.
func opCancel(c int, s, h, lock string, call, ret int64, res string) Op {
	o := opRel(c, s, h, lock, call, ret, res)
	o.Unlock = false
	return o
}

// readQ is a read that answered holders and a queue, at Raft index idx.
func readQ(c int, lock string, call, ret int64, idx uint64, queue []string, holders ...holderInfo) Op {
	o := opRead(c, lock, call, ret, holders...)
	o.Index = idx
	for _, h := range queue {
		o.Queue = append(o.Queue, queuedInfo{Holder: h, Mode: "exclusive"})
	}
	return o
}

// TestGrantsFollowQueueOrder: C (client 2) holds token 5; a read at
// 100-110 (index 5) shows A, then B, waiting. A waits from 50 for 10000;
// the three sessions stay alive until 5000.
func TestGrantsFollowQueueOrder(t *testing.T) {
	alive := []Op{
		opOpen(0, sA, 1, 2), opOpen(1, sB, 1, 2), opOpen(2, sC, 1, 2),
		opKA(0, sA, 4000, 4001, resOK), opKA(1, sB, 4000, 4001, resOK), opKA(2, sC, 4000, 4001, resOK),
		opAcq(2, sC, hC, lk, 10, 20, resOK, 5),
	}
	read := readQ(2, lk, 100, 110, 5, []string{hA, hB}, hold(sC, hC, 5))
	for _, tc := range []struct {
		name         string
		ops          []Op
		want, judged int
	}{
		{"granted in queue order", []Op{
			waitFor(opAcq(0, sA, hA, lk, 50, 300, resOK, 9), 10000),
			waitFor(opAcq(1, sB, hB, lk, 60, 500, resOK, 12), 10000)}, 0, 1},
		{"the second waiter granted before the first", []Op{
			waitFor(opAcq(0, sA, hA, lk, 50, 500, resOK, 12), 10000),
			waitFor(opAcq(1, sB, hB, lk, 60, 300, resOK, 9), 10000)}, 1, 1},
		{"the second waiter granted, the first never", []Op{
			waitFor(opAcq(0, sA, hA, lk, 50, pending, resUnknown, 0), 10000),
			waitFor(opAcq(1, sB, hB, lk, 60, 300, resOK, 9), 10000)}, 1, 1},
		{"a later arrival granted before the first waiter", []Op{
			waitFor(opAcq(0, sA, hA, lk, 50, pending, resUnknown, 0), 10000),
			waitFor(opAcq(1, sB, hB, lk, 60, pending, resUnknown, 0), 10000),
			opAcq(2, sC, "holdC2", lk, 200, 300, resOK, 9)}, 2, 2},
		{"the overtaking grant seen by a read only", []Op{
			waitFor(opAcq(0, sA, hA, lk, 50, pending, resUnknown, 0), 10000),
			waitFor(opAcq(1, sB, hB, lk, 60, pending, resUnknown, 0), 10000),
			opRead(2, lk, 280, 290, hold(sB, hB, 9))}, 1, 1},
		{"the first waiter's wait ran out first", []Op{
			waitFor(opAcq(0, sA, hA, lk, 50, pending, resUnknown, 0), 100),
			waitFor(opAcq(1, sB, hB, lk, 60, 300, resOK, 9), 10000)}, 0, 0},
		{"the first waiter was answered wait_timeout", []Op{
			waitFor(opAcq(0, sA, hA, lk, 50, 250, resWaitTimeout, 0), 10000),
			waitFor(opAcq(1, sB, hB, lk, 60, 300, resOK, 9), 10000)}, 0, 0},
		{"the first waiter cancelled its place", []Op{
			waitFor(opAcq(0, sA, hA, lk, 50, 150, resUnknown, 0), 10000),
			opCancel(0, sA, hA, lk, 200, 210, resOK),
			waitFor(opAcq(1, sB, hB, lk, 60, 300, resOK, 9), 10000)}, 0, 0},
		{"the first waiter's session was closed", []Op{
			waitFor(opAcq(0, sA, hA, lk, 50, pending, resUnknown, 0), 10000),
			opClose(0, sA, 200, 210, resOK),
			waitFor(opAcq(1, sB, hB, lk, 60, 300, resOK, 9), 10000)}, 0, 0},
		{"the first waiter cancelled after the overtaking grant", []Op{
			waitFor(opAcq(0, sA, hA, lk, 50, 150, resUnknown, 0), 10000),
			opCancel(0, sA, hA, lk, 400, 410, resOK),
			waitFor(opAcq(1, sB, hB, lk, 60, 300, resOK, 9), 10000)}, 1, 1},
		{"a release answered before the read does not end the place it saw", []Op{
			opCancel(0, sA, hA, lk, 30, 40, resOK),
			waitFor(opAcq(0, sA, hA, lk, 50, pending, resUnknown, 0), 10000),
			waitFor(opAcq(1, sB, hB, lk, 60, 300, resOK, 9), 10000)}, 1, 1},
		{"granted before the read", []Op{
			waitFor(opAcq(0, sA, hA, lk, 50, pending, resUnknown, 0), 10000),
			opAcq(1, sB, hB, lk, 5, 8, resOK, 4)}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hist(append(append(append([]Op(nil), alive...), read), tc.ops...)...)
			vs, judged := checkQueueOrder(h)
			wantViolations(t, tc.name, vs, tc.want)
			if judged != tc.judged {
				t.Errorf("judged %d pairs, want %d", judged, tc.judged)
			}
			for _, v := range vs {
				if v.Check != checkQueueFIFO || (v.Client != 0 && v.Client != 1) || !strings.Contains(v.What, "overtaken") {
					t.Errorf("violation %+v: want a %s violation about a waiter", v, checkQueueFIFO)
				}
			}
		})
	}
}

// TestQueueOrderSessionMayHaveExpired: once the first waiter's session
// may have expired (no keepalive after its open at 1, TTL 1000), a grant
// to the second proves nothing.
func TestQueueOrderSessionMayHaveExpired(t *testing.T) {
	base := []Op{
		opOpen(0, sA, 1, 2), opOpen(1, sB, 1, 2),
		waitFor(opAcq(0, sA, hA, lk, 50, pending, resUnknown, 0), 10000),
		readQ(2, lk, 100, 110, 5, []string{hA, hB}),
	}
	for _, tc := range []struct {
		name string
		seen int64
		want int
	}{
		{"granted within the lease", 900, 1},
		{"granted after the lease", 1500, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hist(append(append([]Op(nil), base...), waitFor(opAcq(1, sB, hB, lk, 60, tc.seen, resOK, 9), 10000))...)
			vs, _ := checkQueueOrder(h)
			wantViolations(t, tc.name, vs, tc.want)
		})
	}
}

// TestQueueOrderLeavesOutWhatItCannotJudge: shared waiters (granted
// together, and possibly unseen while later shared waiters join), holders
// ahead in the queue, and reads without an index.
func TestQueueOrderLeavesOutWhatItCannotJudge(t *testing.T) {
	alive := []Op{
		opOpen(0, sA, 1, 2), opOpen(1, sB, 1, 2),
		opKA(0, sA, 4000, 4001, resOK), opKA(1, sB, 4000, 4001, resOK),
		waitFor(opAcq(0, sA, hA, lk, 50, pending, resUnknown, 0), 10000),
		waitFor(opAcq(1, sB, hB, lk, 60, 300, resOK, 9), 10000),
	}
	shared := readQ(2, lk, 100, 110, 5, []string{hA, hB})
	shared.Queue[0].Mode, shared.Queue[1].Mode = "shared", "shared"
	noIndex := readQ(2, lk, 100, 110, 0, []string{hA, hB})
	for _, tc := range []struct {
		name string
		read Op
	}{
		{"shared waiters", shared},
		{"the granted waiter was ahead", readQ(2, lk, 100, 110, 5, []string{hB, hA})},
		{"a read without an index", noIndex},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs, _ := checkQueueOrder(hist(append(append([]Op(nil), alive...), tc.read)...))
			wantViolations(t, tc.name, vs, 0)
		})
	}
	// Granted together (one token): neither came first.
	together := hist(append(append([]Op(nil), alive[:4]...),
		waitFor(opAcq(0, sA, hA, lk, 50, 300, resOK, 9), 10000),
		waitFor(opAcq(1, sB, hB, lk, 60, 290, resOK, 9), 10000), shared)...)
	if vs, _ := checkQueueOrder(together); len(vs) != 0 {
		t.Errorf("shared waiters granted together: %+v", vs)
	}
}

// TestNoGhostGrant: holder A's last acquire was answered at 100; reads
// sent after that must not show it holding or waiting when its place
// surely ended.
func TestNoGhostGrant(t *testing.T) {
	alive := []Op{opOpen(0, sA, 1, 2), opKA(0, sA, 4000, 4001, resOK), opOpen(1, sB, 1, 2)}
	holding := opRead(1, lk, 200, 210, hold(sA, hA, 9))
	waiting := readQ(1, lk, 200, 210, 7, []string{hA}, hold(sB, hB, 5))
	noLeader := naiveOp(waitFor(opAcq(0, sA, hA, lk, 50, 100, resNoLeader, 0), 20000))
	for _, tc := range []struct {
		name                    string
		ops                     []Op
		want, judged, noLeaders int
	}{
		{"no_leader, then seen holding", []Op{noLeader, holding}, 1, 1, 1},
		{"no_leader, then seen waiting", []Op{noLeader, waiting}, 1, 1, 1},
		{"no_leader, never seen again", []Op{noLeader, opRead(1, lk, 200, 210, hold(sB, hB, 9))}, 0, 1, 1},
		{"no_leader, seen by a read sent before the answer", []Op{noLeader, opRead(1, lk, 90, 210, hold(sA, hA, 9))}, 0, 1, 1},
		{"wait_timeout, then seen holding", []Op{waitFor(opAcq(0, sA, hA, lk, 50, 100, resWaitTimeout, 0), 40), holding}, 1, 1, 0},
		{"wait_cancelled, then seen waiting", []Op{waitFor(opAcq(0, sA, hA, lk, 50, 100, resWaitCancelled, 0), 20000), waiting}, 1, 1, 0},
		{"a busy try, then seen holding", []Op{clean(opAcq(0, sA, hA, lk, 50, 100, resBusy, 0)), holding}, 1, 1, 0},
		{"session_not_found after an unknown outcome, then seen holding", []Op{
			waitFor(opAcq(0, sA, hA, lk, 20, 40, resUnknown, 0), 20000),
			opAcq(0, sA, hA, lk, 50, 100, resNotFound, 0), holding}, 1, 1, 0},
		{"no_leader after an earlier no_leader, then seen holding", []Op{
			naiveOp(waitFor(opAcq(0, sA, hA, lk, 20, 30, resNoLeader, 0), 20000)), noLeader, holding}, 1, 1, 1},
		// Not judged: the place may live on.
		{"an unknown outcome", []Op{waitFor(opAcq(0, sA, hA, lk, 50, 100, resUnknown, 0), 20000), holding}, 0, 0, 0},
		{"no_leader after an unknown outcome", []Op{
			waitFor(opAcq(0, sA, hA, lk, 20, 40, resUnknown, 0), 20000), noLeader, holding}, 0, 0, 0},
		{"a wait_timeout whose retries hid an unsure attempt", []Op{func() Op {
			o := waitFor(opAcq(0, sA, hA, lk, 50, 100, resWaitTimeout, 0), 40)
			o.Attempts, o.Unsure = 2, 1
			return o
		}(), holding}, 0, 0, 0},
		{"attempts not counted (an older history)", []Op{opWaitAcq(0, sA, hA, lk, 50, 100, resWaitTimeout, 0), holding}, 0, 0, 0},
		{"lock_busy to a wait", []Op{waitFor(opAcq(0, sA, hA, lk, 50, 100, resBusy, 0), 20000), holding}, 0, 0, 0},
		{"a later acquire of the holder", []Op{noLeader, waitFor(opAcq(0, sA, hA, lk, 150, 190, resOK, 9), 20000), holding}, 0, 0, 0},
		{"an earlier acquire still running", []Op{waitFor(opAcq(0, sA, hA, lk, 20, 120, resOK, 9), 20000), noLeader, holding}, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs, st := checkNoGhostGrant(hist(append(append([]Op(nil), alive...), tc.ops...)...))
			wantViolations(t, tc.name, vs, tc.want)
			if st.Judged != tc.judged || st.AfterNoLeader != tc.noLeaders {
				t.Errorf("judged %+v, want %d holders, %d after no_leader", st, tc.judged, tc.noLeaders)
			}
			for _, v := range vs {
				if v.Check != checkNoGhost || v.Client != 0 || v.At != 210 || !strings.Contains(v.What, "ghost") {
					t.Errorf("violation %+v: want a %s violation about client 0 at 210", v, checkNoGhost)
				}
			}
		})
	}
}

// TestQuickChecksIncludeQueueChecks: both queue checks run with the
// others (and so under --stop-on-violation).
func TestQuickChecksIncludeQueueChecks(t *testing.T) {
	h := hist(
		opOpen(0, sA, 1, 2), opOpen(1, sB, 1, 2),
		opKA(0, sA, 4000, 4001, resOK), opKA(1, sB, 4000, 4001, resOK),
		waitFor(opAcq(0, sA, hA, lk, 50, pending, resUnknown, 0), 10000),
		waitFor(opAcq(1, sB, hB, lk, 60, 300, resOK, 9), 10000),
		readQ(1, lk, 100, 110, 5, []string{hA, hB}),
		naiveOp(waitFor(opAcq(1, sB, "holdB2", lk, 400, 500, resNoLeader, 0), 20000)),
		readQ(0, lk, 600, 610, 9, []string{"holdB2", hA}, hold(sB, hB, 9)),
	)
	got := map[string]int{}
	for _, v := range quickChecks(h) {
		got[v.Check]++
	}
	if got[checkQueueFIFO] != 1 || got[checkNoGhost] != 1 {
		t.Errorf("quick checks found %v, want one %s and one %s violation", got, checkQueueFIFO, checkNoGhost)
	}
}

// TestReportCountsQueueChecks: analyze reports what the queue checks
// judged, and the naive waiter's answers.
func TestReportCountsQueueChecks(t *testing.T) {
	h := hist(
		opOpen(0, sA, 1, 2), opKA(0, sA, 4000, 4001, resOK),
		naiveOp(waitFor(opAcq(0, sA, hA, lk, 50, 100, resNoLeader, 0), 20000)),
		readQ(1, lk, 200, 210, 5, []string{hB, hC}),
	)
	rep := analyze(h, 0)
	if rep.Ghost.Judged != 1 || rep.Ghost.AfterNoLeader != 1 || rep.Naive[resNoLeader] != 1 || rep.QueueReads != 1 || rep.LongestQueue != 2 {
		t.Errorf("report: ghost %+v, naive %v, %d queue reads (longest %d); want 1 judged after no_leader, 1 naive no_leader, 1 read of 2",
			rep.Ghost, rep.Naive, rep.QueueReads, rep.LongestQueue)
	}
	var sb strings.Builder
	rep.print(&sb)
	for _, want := range []string{"6 grants in queue order", "7 no ghost grants", "naive waits: 1"} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, sb.String())
		}
	}
}
