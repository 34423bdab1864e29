package main

import (
	"bytes"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/node/backupfile"
	"github.com/raftlock/raftlock/sequencer"
)

// restoreAt is a restore fault whose request ran from call to ret.
func restoreAt(call, ret int64) FaultRec {
	return FaultRec{Kind: faultRestore, Target: "cluster", Start: call - 50, End: ret, ActCall: call, ActReturn: ret}
}

// deleteTokenAt is a delete-token fault of client c whose request ran
// from call to ret.
func deleteTokenAt(c int, call, ret int64) FaultRec {
	return FaultRec{Kind: faultDeleteToken, Target: fmt.Sprintf("client%d", c), Start: call - 10, End: ret + 500, ActCall: call, ActReturn: ret}
}

// TestModelRestoreRevokesGrantsAndKeepsTheRest pins what a restore means
// to the lock model: any grant may be gone after it, grants the history
// did not see made (the backup's) may come and go, but the grants the
// history shows after it are as exclusive as ever, tokens keep rising,
// and nothing of it shows before the restore.
func TestModelRestoreRevokesGrantsAndKeepsTheRest(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ops    []Op
		faults []FaultRec
		want   porcupine.CheckResult
	}{
		{"a grant is gone after a restore", []Op{
			opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
			opAcq(1, sB, hB, lk, 120, 130, resOK, 9),
		}, []FaultRec{restoreAt(100, 110)}, porcupine.Ok},
		{"the same without the restore", []Op{
			opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
			opAcq(1, sB, hB, lk, 120, 130, resOK, 9),
		}, nil, porcupine.Illegal},
		{"a released grant comes back with the restore and goes unseen", []Op{
			opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
			opRel(0, sA, hA, lk, 30, 40, resOK),
			opRead(2, lk, 120, 130, hold(sA, hA, 5)),
			opAcq(1, sB, hB, lk, 140, 150, resBusy, 0),
			opRead(2, lk, 160, 170),
			opAcq(1, sB, hB, lk, 180, 190, resOK, 9),
		}, []FaultRec{restoreAt(100, 110)}, porcupine.Ok},
		{"grants made after a restore stay exclusive", []Op{
			opAcq(0, sA, hA, lk, 120, 130, resOK, 20),
			opAcq(1, sB, hB, lk, 140, 150, resOK, 21),
		}, []FaultRec{restoreAt(100, 110)}, porcupine.Illegal},
		{"a read names the holder of a grant made after a restore", []Op{
			opAcq(0, sA, hA, lk, 120, 130, resOK, 20),
			opRead(2, lk, 140, 150, hold(sB, hB, 30)),
		}, []FaultRec{restoreAt(100, 110)}, porcupine.Illegal},
		{"tokens keep rising after a restore", []Op{
			opAcq(0, sA, hA, lk, 120, 130, resOK, 20),
			opRel(0, sA, hA, lk, 140, 150, resOK),
			opRead(2, lk, 160, 170),
			opAcq(1, sB, hB, lk, 180, 190, resOK, 19),
			opRead(2, lk, 200, 210, hold(sB, hB, 19)),
		}, []FaultRec{restoreAt(100, 110)}, porcupine.Illegal},
		{"nothing of a restore shows before it", []Op{
			opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
			opRead(2, lk, 50, 60),
		}, []FaultRec{restoreAt(100, 110)}, porcupine.Illegal},
		{"a restore of unknown outcome may take effect", []Op{
			opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
			opAcq(1, sB, hB, lk, 120, 130, resOK, 9),
		}, []FaultRec{restoreAt(100, pending)}, porcupine.Ok},
		{"a retry finds its restored grant, token and all", []Op{
			opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
			opAcq(0, sA, hA, lk, 120, 130, resOK, 5),
			opRead(2, lk, 140, 150, hold(sA, hA, 5)),
		}, []FaultRec{restoreAt(100, 110)}, porcupine.Ok},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hist(append(lived(), tc.ops...)...)
			h.Faults = tc.faults
			if got := runPorcupine(h, 0).Result; got != tc.want {
				t.Errorf("porcupine says %s, want %s", got, tc.want)
			}
		})
	}
}

// TestRevokedIsPerClientForATokenAndForAllForARestore pins which clients
// an operator action revokes, and when.
func TestRevokedIsPerClientForATokenAndForAllForARestore(t *testing.T) {
	h := History{Faults: []FaultRec{deleteTokenAt(1, 100, 110), restoreAt(500, 510)}}
	for _, tc := range []struct {
		client   int
		from, to int64
		want     bool
	}{
		{1, 0, 100, true}, {1, 105, 200, true}, {1, 111, 200, false}, {0, 0, 200, false},
		{0, 0, 500, true}, {2, 510, 600, true}, {2, 511, 600, false},
	} {
		if got := revoked(h, tc.client, tc.from, tc.to); got != tc.want {
			t.Errorf("revoked(client%d, %d, %d) = %v, want %v", tc.client, tc.from, tc.to, got, tc.want)
		}
	}
	h.Faults = append(h.Faults, FaultRec{Kind: faultRestore, ActCall: 900, ActReturn: pending})
	if !revoked(h, 0, 5000, 6000) {
		t.Errorf("a restore of unknown outcome revokes nothing after its call")
	}
}

// TestLateAnswerRevokesAGrantAcknowledgedAfterIt: the late-answer fault
// revokes the grant whose answer it holds, which its client acknowledges
// only when the answer arrives: the revocation counts, for that client,
// until the fault ends.
func TestLateAnswerRevokesAGrantAcknowledgedAfterIt(t *testing.T) {
	h := History{Faults: []FaultRec{{Kind: faultLateAnswer, Target: "client1", Start: 90, ActCall: 100, ActReturn: 110, End: 900}}}
	for _, tc := range []struct {
		client   int
		from, to int64
		want     bool
	}{
		{1, 500, 2000, true}, {1, 900, 2000, true}, {1, 901, 2000, false}, {1, 0, 99, false}, {0, 500, 2000, false},
	} {
		if got := revoked(h, tc.client, tc.from, tc.to); got != tc.want {
			t.Errorf("revoked(client%d, %d, %d) = %v, want %v", tc.client, tc.from, tc.to, got, tc.want)
		}
	}
}

// TestOperatorRevocationsExemptTheLeaseAndGrantChecks: a grant or a
// session an operator action took away is not a lost grant (check 3), a
// lost session (check 4) or a rejected current write (check 2); without
// the action each of them is.
func TestOperatorRevocationsExemptTheLeaseAndGrantChecks(t *testing.T) {
	for _, fault := range []FaultRec{restoreAt(100, 110), deleteTokenAt(0, 100, 110)} {
		t.Run(fault.Kind, func(t *testing.T) {
			ops := []Op{
				opOpen(0, sA, 1, 2), opOpen(1, sB, 1, 2),
				opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
				opKA(0, sA, 90, 95, resOK),
				// Gone long before the lease of the keepalive sent at 90
				// ended (1090).
				opKA(0, sA, 150, 160, resNotFound),
				opAcq(1, sB, hB, lk, 200, 210, resOK, 9),
				opKA(1, sB, 4000, 4001, resOK),
			}
			// B's read at 120 finds the lock free while A's grant, alive
			// until 1090, is not released.
			ops = append(ops, opRead(1, lk, 120, 130))
			h := hist(ops...)
			h.Writes = []WriteRec{write(0, sA, hA, lk, 5, 300, false)}
			h.Writes[0].Err = "stale"
			without := func() (int, int, int) {
				gv, _ := checkGrantsKept(h)
				return len(gv), len(checkSessionsKept(h)), len(checkFence(h))
			}
			g, s, f := without()
			if g == 0 || s == 0 || f == 0 {
				t.Fatalf("without the action: grant-kept %d, session-kept %d, fencing %d violations, want each > 0", g, s, f)
			}
			h.Faults = []FaultRec{fault}
			g, s, f = without()
			if g != 0 || s != 0 || f != 0 {
				t.Errorf("with %s: grant-kept %d, session-kept %d, fencing %d violations, want none", fault.Kind, g, s, f)
			}
		})
	}
}

// TestSessionKeptAliveAfterARestoreIsJudged: a session whose keepalive
// was acknowledged after the restore survived it, and a loss long after
// is not the restore's doing.
func TestSessionKeptAliveAfterARestoreIsJudged(t *testing.T) {
	h := hist(
		opOpen(0, sA, 1, 2),
		opKA(0, sA, 2000, 2010, resOK),
		// Gone long before the lease of the keepalive sent at 2000 ended.
		opKA(0, sA, 2500, 2510, resNotFound),
	)
	h.Faults = []FaultRec{restoreAt(100, 110)}
	if vs := checkSessionsKept(h); len(vs) != 1 {
		t.Errorf("%d violations, want 1: %+v", len(vs), vs)
	}
}

// TestLostBeforeRegrantJudgesRevokedGrants: an operator action excuses
// nothing in the lost-before-regrant check: the holder whose grant a
// restore or a token deletion took away must still see Lost() close
// before anyone else is granted the lock.
func TestLostBeforeRegrantJudgesRevokedGrants(t *testing.T) {
	for _, fault := range []FaultRec{restoreAt(100, 110), deleteTokenAt(0, 100, 110)} {
		for _, tc := range []struct {
			name         string
			lost         int64
			want, judged int
		}{
			{"Lost() still open at the re-grant", pending, 1, 1},
			{"Lost() closed after the re-grant", 300, 1, 1},
			{"Lost() closed before the re-grant", 180, 0, 1},
		} {
			t.Run(fault.Kind+"/"+tc.name, func(t *testing.T) {
				h := hist(
					opOpen(0, sA, 1, 2), opOpen(1, sB, 1, 2),
					opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
					opKA(0, sA, 90, 95, resOK),
					opWaitAcq(1, sB, hB, lk, 50, 200, resOK, 2000),
					opKA(1, sB, 4000, 4001, resOK),
				)
				h.Holds = []HoldRec{holdRec(0, sA, hA, lk, 5, 21, tc.lost)}
				h.Faults = []FaultRec{fault}
				vs, judged := checkLostBeforeRegrant(h)
				wantViolations(t, tc.name, vs, tc.want)
				if judged != tc.judged {
					t.Errorf("judged %d grants, want %d", judged, tc.judged)
				}
			})
		}
	}
}

// TestNoGhostGrantAllowsWhatARestoreBringsBack: a place that surely ended
// may come back with a restore (the backup's queue), and only then.
func TestNoGhostGrantAllowsWhatARestoreBringsBack(t *testing.T) {
	try := opAcq(0, sA, hA, lk, 10, 20, resBusy, 0)
	try.Attempts = 1
	h := hist(
		opOpen(0, sA, 1, 2),
		try,
		opRead(1, lk, 300, 310, hold(sA, hA, 7)),
	)
	if vs, _ := checkNoGhostGrant(h); len(vs) != 1 {
		t.Fatalf("without a restore: %d violations, want 1", len(vs))
	}
	h.Faults = []FaultRec{restoreAt(100, 110)}
	if vs, _ := checkNoGhostGrant(h); len(vs) != 0 {
		t.Errorf("with a restore in between: %d violations, want none: %+v", len(vs), vs)
	}
}

// TestBusyLocksReadsTheBackupAsARestoreDoes: the restore fault aims at a
// lock the backup holds free; a held lock, a waited-for one and one in a
// lock-delay are busy, a released one and locks of other prefixes are not
// counted.
func TestBusyLocksReadsTheBackupAsARestoreDoes(t *testing.T) {
	f := fsm.New(nil)
	idx := uint64(0)
	apply := func(c fsm.Command) {
		t.Helper()
		idx++
		c.Now = int64(idx) * int64(time.Millisecond)
		if r := f.ApplyCommand(idx, c); r.Status != fsm.StatusOK && r.Status != fsm.StatusGranted && r.Status != fsm.StatusQueued {
			t.Fatalf("apply %v: %+v", c.Type, r)
		}
	}
	open := func(id string) {
		apply(fsm.Command{Type: fsm.CmdOpenSession, OpenSession: &fsm.OpenSession{ID: id, TTL: int64(time.Second), LockDelay: int64(time.Second)}})
	}
	acq := func(lock, s, h string, wait bool) {
		apply(fsm.Command{Type: fsm.CmdAcquire, Acquire: &fsm.Acquire{Lock: lock, Session: s, Holder: h, Mode: sequencer.Exclusive, Wait: wait, WaitFor: int64(time.Minute)}})
	}
	open("s1")
	open("s2")
	open("s3")
	acq(lockPrefix+"held", "s1", "h1", false)
	acq(lockPrefix+"queued", "s1", "h2", false)
	acq(lockPrefix+"queued", "s2", "h3", true)
	acq(lockPrefix+"released", "s2", "h4", false)
	apply(fsm.Command{Type: fsm.CmdRelease, Release: &fsm.LockRef{Lock: lockPrefix + "released", Session: "s2", Holder: "h4"}})
	acq(lockPrefix+"delayed", "s3", "h5", false)
	apply(fsm.Command{Type: fsm.CmdExpireSession, ExpireSession: &fsm.SessionRef{ID: "s3"}})
	acq("other/held", "s2", "h6", false)
	var file bytes.Buffer
	if _, err := backupfile.Encode(&file, backupfile.Header{Index: idx, Term: 1, Created: time.Now(), Node: "n1"}, f.Dump()); err != nil {
		t.Fatal(err)
	}
	busy, err := busyLocks(file.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{lockPrefix + "held": true, lockPrefix + "queued": true, lockPrefix + "delayed": true}
	if !maps.Equal(busy, want) {
		t.Errorf("busy locks %v, want %v", busy, want)
	}
	if _, err := busyLocks(file.Bytes()[:file.Len()-1]); err == nil {
		t.Errorf("a truncated backup was read")
	}
}
