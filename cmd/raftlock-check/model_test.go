package main

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

// Three sessions, A, B and C (clients 0, 1, 2), and the lock "L".
const (
	sA, hA = "sessA", "holdA"
	sB, hB = "sessB", "holdB"
	sC, hC = "sessC", "holdC"
	lk     = "L"
)

// lived opens sessions A, B and C at the start, keeps them alive and
// closes them at the end (time 5000 on).
func lived() []Op {
	return []Op{
		opOpen(0, sA, 1, 2), opOpen(1, sB, 1, 2), opOpen(2, sC, 1, 2),
		opKA(0, sA, 4000, 4001, resOK), opKA(1, sB, 4000, 4001, resOK), opKA(2, sC, 4000, 4001, resOK),
		opClose(0, sA, 5000, 5001, resOK), opClose(1, sB, 5000, 5001, resOK), opClose(2, sC, 5000, 5001, resOK),
	}
}

func TestModelHistories(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []Op
		want porcupine.CheckResult
	}{
		{"sequential grants and reads", []Op{
			opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
			opRead(1, lk, 30, 40, hold(sA, hA, 5)),
			opRel(0, sA, hA, lk, 50, 60, resOK),
			opRead(1, lk, 70, 80),
			opAcq(1, sB, hB, lk, 90, 100, resOK, 9),
			opRead(0, lk, 110, 120, hold(sB, hB, 9)),
		}, porcupine.Ok},
		{"two holders at once", []Op{
			opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
			opAcq(1, sB, hB, lk, 30, 40, resOK, 9),
			opRel(0, sA, hA, lk, 50, 60, resOK),
		}, porcupine.Illegal},
		{"token going backwards", []Op{
			opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
			opRel(0, sA, hA, lk, 30, 40, resOK),
			opAcq(1, sB, hB, lk, 50, 60, resOK, 4),
		}, porcupine.Illegal},
		{"stale read after a release", []Op{
			opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
			opRel(0, sA, hA, lk, 30, 40, resOK),
			opRead(1, lk, 50, 60, hold(sA, hA, 5)),
		}, porcupine.Illegal},
		{"stale read of a free lock", []Op{
			opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
			opRead(1, lk, 50, 60),
		}, porcupine.Illegal},
		{"reads concurrent with a release see either state", []Op{
			opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
			opRel(0, sA, hA, lk, 30, 60, resOK),
			opRead(1, lk, 40, 50, hold(sA, hA, 5)),
			opRead(2, lk, 40, 50),
		}, porcupine.Ok},
		{"reads going back in time", []Op{
			opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
			opRel(0, sA, hA, lk, 30, 90, resOK),
			opRead(1, lk, 40, 50),
			opRead(2, lk, 60, 70, hold(sA, hA, 5)),
		}, porcupine.Illegal},
		{"read of a holder with another token", []Op{
			opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
			opRead(1, lk, 30, 40, hold(sA, hA, 6)),
		}, porcupine.Illegal},
		{"busy while held", []Op{
			opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
			opAcq(1, sB, hB, lk, 30, 40, resBusy, 0),
		}, porcupine.Ok},
		{"busy while free", []Op{
			opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
			opRel(0, sA, hA, lk, 30, 40, resOK),
			opAcq(1, sB, hB, lk, 50, 60, resBusy, 0),
		}, porcupine.Illegal},
		{"busy behind a waiter granted by the release", []Op{
			opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
			opWaitAcq(2, sC, hC, lk, 25, 90, resOK, 8),
			opRel(0, sA, hA, lk, 30, 40, resOK),
			opAcq(1, sB, hB, lk, 50, 60, resBusy, 0),
			opRead(1, lk, 95, 99, hold(sC, hC, 8)),
		}, porcupine.Ok},
		{"a retried acquire returns another token", []Op{
			opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
			opAcq(0, sA, hA, lk, 30, 40, resOK, 7),
		}, porcupine.Illegal},
		{"a retried acquire returns the same token", []Op{
			opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
			opAcq(0, sA, hA, lk, 30, 40, resOK, 5),
		}, porcupine.Ok},
		{"an unknown acquire that took effect", []Op{
			opAcq(0, sA, hA, lk, 10, 20, resUnknown, 0),
			opRead(1, lk, 30, 40, hold(sA, hA, 5)),
			opAcq(1, sB, hB, lk, 50, 60, resBusy, 0),
		}, porcupine.Ok},
		{"an unknown acquire that did not", []Op{
			opAcq(0, sA, hA, lk, 10, 20, resUnknown, 0),
			opRead(1, lk, 30, 40),
			opAcq(1, sB, hB, lk, 50, 60, resOK, 9),
		}, porcupine.Ok},
		{"an unknown acquire learns one token only", []Op{
			opAcq(0, sA, hA, lk, 10, 20, resUnknown, 0),
			opRead(1, lk, 30, 40, hold(sA, hA, 5)),
			opRead(1, lk, 50, 60, hold(sA, hA, 6)),
		}, porcupine.Illegal},
		{"an unknown waiting acquire may be dropped by the server", []Op{
			opWaitAcq(0, sA, hA, lk, 10, 20, resUnknown, 0),
			opRead(1, lk, 30, 40, hold(sA, hA, 5)),
			opAcq(1, sB, hB, lk, 50, 60, resOK, 9),
		}, porcupine.Ok},
		{"an unknown try-acquire is not dropped by the server", []Op{
			opAcq(0, sA, hA, lk, 10, 20, resUnknown, 0),
			opRead(1, lk, 30, 40, hold(sA, hA, 5)),
			opAcq(1, sB, hB, lk, 50, 60, resOK, 9),
		}, porcupine.Illegal},
		{"an acquire answered not_found may have been granted first", []Op{
			opAcq(0, sA, hA, lk, 10, 40, resNotFound, 0),
			opRead(1, lk, 20, 30, hold(sA, hA, 5)),
		}, porcupine.Ok},
		{"not_holder after a retried release that released", []Op{
			opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
			opRel(0, sA, hA, lk, 30, 90, resNotHolder),
			opAcq(1, sB, hB, lk, 40, 50, resOK, 9),
		}, porcupine.Ok},
		{"not_holder of a free lock", []Op{
			opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
			opRel(0, sA, hA, lk, 30, 40, resOK),
			opRel(0, sA, hA, lk, 50, 60, resNotHolder),
		}, porcupine.Illegal},
		{"an unknown release that took effect later", []Op{
			opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
			opRel(0, sA, hA, lk, 30, 40, resUnknown),
			opAcq(1, sB, hB, lk, 50, 60, resBusy, 0),
			opAcq(1, sB, hB, lk, 70, 80, resOK, 9),
		}, porcupine.Ok},
		{"an acquire answered no_leader appended nothing", []Op{
			opWaitAcq(0, sA, hA, lk, 10, 20, resNoLeader, 0),
			opRead(1, lk, 30, 40, hold(sA, hA, 5)),
		}, porcupine.Illegal},
		{"a read concurrent with an acquire answered no_leader", []Op{
			opWaitAcq(0, sA, hA, lk, 10, 20, resNoLeader, 0),
			opRead(1, lk, 15, 40),
		}, porcupine.Ok},
		{"a wait answered wait_cancelled was not granted", []Op{
			opWaitAcq(0, sA, hA, lk, 10, 20, resWaitCancelled, 0),
			opRead(1, lk, 30, 40, hold(sA, hA, 5)),
		}, porcupine.Illegal},
		{"a release of a lock someone else holds", []Op{
			opAcq(1, sB, hB, lk, 10, 20, resOK, 5),
			opRel(0, sA, hA, lk, 30, 40, resOK),
		}, porcupine.Illegal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hist(append(lived(), tc.ops...)...)
			if got := runPorcupine(h, 0).Result; got != tc.want {
				t.Errorf("porcupine says %s, want %s", got, tc.want)
			}
		})
	}
}

// TestModelExpiry covers the synthetic expiry of a session: it frees the
// session's lock between the last keepalive acknowledged and the first
// not_found, after which the lock may stay busy (lock-delay).
func TestModelExpiry(t *testing.T) {
	base := []Op{
		opOpen(0, sA, 1, 2), opOpen(1, sB, 1, 2),
		opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
		opKA(0, sA, 100, 110, resOK),
		opKA(0, sA, 1500, 1510, resNotFound),
		opKA(1, sB, 4000, 4001, resOK), opClose(1, sB, 5000, 5001, resOK),
	}
	for _, tc := range []struct {
		name string
		ops  []Op
		want porcupine.CheckResult
	}{
		{"next holder after the expiry", []Op{
			opAcq(1, sB, hB, lk, 1520, 1530, resBusy, 0),
			opAcq(1, sB, hB, lk, 1600, 1610, resOK, 9),
		}, porcupine.Ok},
		{"next holder while the session may still live", []Op{
			opAcq(1, sB, hB, lk, 50, 60, resOK, 9),
		}, porcupine.Illegal},
		{"next holder concurrent with the expiry", []Op{
			opAcq(1, sB, hB, lk, 1000, 1100, resOK, 9),
		}, porcupine.Ok},
		{"read of the expired holder after it was gone", []Op{
			opRead(1, lk, 1600, 1610, hold(sA, hA, 5)),
		}, porcupine.Illegal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hist(append(append([]Op(nil), base...), tc.ops...)...)
			if got := runPorcupine(h, 0).Result; got != tc.want {
				t.Errorf("porcupine says %s, want %s", got, tc.want)
			}
		})
	}
}

// TestModelSessionNeverSeenGone: a session that was neither closed nor
// reported gone may expire at any time after its last keepalive.
func TestModelSessionNeverSeenGone(t *testing.T) {
	h := hist(
		opOpen(0, sA, 1, 2), opOpen(1, sB, 1, 2),
		opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
		opKA(0, sA, 100, 110, resOK),
		opAcq(1, sB, hB, lk, 3000, 3010, resOK, 9),
	)
	if got := runPorcupine(h, 0).Result; got != porcupine.Ok {
		t.Errorf("porcupine says %s, want Ok", got)
	}
	h.Ops = append(h.Ops, opKA(0, sA, 3500, 3510, resOK))
	if got := runPorcupine(h, 0).Result; got != porcupine.Illegal {
		t.Errorf("with A alive after B's grant: porcupine says %s, want Illegal", got)
	}
}

// TestModelClose: closing a session frees its locks at once, without
// lock-delay.
func TestModelClose(t *testing.T) {
	h := hist(
		opOpen(0, sA, 1, 2), opOpen(1, sB, 1, 2),
		opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
		opClose(0, sA, 30, 40, resOK),
		opAcq(1, sB, hB, lk, 50, 60, resBusy, 0),
		opKA(1, sB, 4000, 4001, resOK),
	)
	if got := runPorcupine(h, 0).Result; got != porcupine.Illegal {
		t.Errorf("busy after a close: porcupine says %s, want Illegal", got)
	}
}
