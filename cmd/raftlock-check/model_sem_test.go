package main

import (
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// held names a holder of a semaphore's slot, as a read answers it.
func held(s, h string, token, slot uint64) holderInfo {
	return holderInfo{Session: s, Holder: h, Token: token, Slot: slot}
}

// semHist is a semaphore run's history of the sessions of lived() and
// ops, on semaphores of permits slots.
func semHist(permits int, ops ...Op) History {
	h := hist(append(lived(), ops...)...)
	h.Permits = permits
	return h
}

// The semaphore model: at most N holders, each in its own slot, the
// lowest grantable slot taken, tokens rising, reads naming exactly the
// holders (semaphores of 2 slots unless the case says otherwise).
func TestSemaphoreModelHistories(t *testing.T) {
	for _, tc := range []struct {
		name    string
		permits int
		ops     []Op
		want    porcupine.CheckResult
	}{
		{"two holders, a release, the freed slot granted again", 2, []Op{
			slotAcq(0, sA, hA, lk, 10, 20, 5, 0),
			slotAcq(1, sB, hB, lk, 30, 40, 7, 1),
			opRead(2, lk, 50, 60, held(sA, hA, 5, 0), held(sB, hB, 7, 1)),
			opRel(0, sA, hA, lk, 70, 80, resOK),
			opRead(2, lk, 85, 88, held(sB, hB, 7, 1)),
			slotAcq(2, sC, hC, lk, 90, 100, 9, 0),
			opRead(0, lk, 110, 120, held(sC, hC, 9, 0), held(sB, hB, 7, 1)),
		}, porcupine.Ok},
		{"a slot held twice", 2, []Op{
			slotAcq(0, sA, hA, lk, 10, 20, 5, 0),
			slotAcq(1, sB, hB, lk, 30, 40, 7, 0),
		}, porcupine.Illegal},
		{"more holders than permits", 2, []Op{
			slotAcq(0, sA, hA, lk, 10, 20, 5, 0),
			slotAcq(1, sB, hB, lk, 30, 40, 7, 1),
			slotAcq(2, sC, hC, lk, 50, 60, 9, 2),
		}, porcupine.Illegal},
		{"a read naming more holders than permits", 2, []Op{
			slotAcq(0, sA, hA, lk, 10, 20, 5, 0),
			slotAcq(1, sB, hB, lk, 30, 40, 7, 1),
			opRead(0, lk, 50, 60, held(sA, hA, 5, 0), held(sB, hB, 7, 1), held(sC, hC, 9, 2)),
		}, porcupine.Illegal},
		{"a read naming a holder that never held", 2, []Op{
			slotAcq(0, sA, hA, lk, 10, 20, 5, 0),
			opRead(2, lk, 50, 60, held(sA, hA, 5, 0), held(sB, hB, 7, 1)),
		}, porcupine.Illegal},
		{"a read missing a holder", 2, []Op{
			slotAcq(0, sA, hA, lk, 10, 20, 5, 0),
			slotAcq(1, sB, hB, lk, 30, 40, 7, 1),
			opRead(2, lk, 50, 60, held(sB, hB, 7, 1)),
		}, porcupine.Illegal},
		{"a read naming a holder in another slot", 2, []Op{
			slotAcq(0, sA, hA, lk, 10, 20, 5, 0),
			opRead(2, lk, 50, 60, held(sA, hA, 5, 1)),
		}, porcupine.Illegal},
		{"a token going backwards", 2, []Op{
			slotAcq(0, sA, hA, lk, 10, 20, 5, 0),
			slotAcq(1, sB, hB, lk, 30, 40, 4, 1),
		}, porcupine.Illegal},
		{"two waiters granted by one entry share its token", 2, []Op{
			slotAcq(0, sA, hA, lk, 10, 30, 9, 0),
			slotAcq(1, sB, hB, lk, 10, 30, 9, 1),
		}, porcupine.Ok},
		{"a token granted again after its holder released", 2, []Op{
			slotAcq(0, sA, hA, lk, 10, 20, 5, 0),
			opRel(0, sA, hA, lk, 30, 40, resOK),
			slotAcq(1, sB, hB, lk, 50, 60, 5, 0),
		}, porcupine.Illegal},
		{"a released slot skipped for a higher one", 3, []Op{
			slotAcq(0, sA, hA, lk, 10, 20, 5, 0),
			slotAcq(1, sB, hB, lk, 30, 40, 7, 1),
			opRel(0, sA, hA, lk, 50, 60, resOK),
			slotAcq(2, sC, hC, lk, 70, 80, 9, 2),
		}, porcupine.Illegal},
		{"a try answered busy beside a free slot", 2, []Op{
			slotAcq(0, sA, hA, lk, 10, 20, 5, 0),
			opAcq(1, sB, hB, lk, 30, 40, resBusy, 0),
		}, porcupine.Illegal},
		{"a try answered busy with every slot held", 2, []Op{
			slotAcq(0, sA, hA, lk, 10, 20, 5, 0),
			slotAcq(1, sB, hB, lk, 30, 40, 7, 1),
			opAcq(2, sC, hC, lk, 50, 60, resBusy, 0),
		}, porcupine.Ok},
		{"a retry returns its slot and token", 2, []Op{
			slotAcq(0, sA, hA, lk, 10, 20, 5, 0),
			slotAcq(1, sB, hB, lk, 30, 40, 7, 1),
			slotAcq(0, sA, hA, lk, 50, 60, 5, 0),
		}, porcupine.Ok},
		{"an unknown outcome takes a slot, a read names it", 2, []Op{
			opAcq(0, sA, hA, lk, 10, pending, resUnknown, 0),
			slotAcq(1, sB, hB, lk, 50, 60, 7, 0),
			opRead(2, lk, 100, 110, held(sB, hB, 7, 0), held(sA, hA, 8, 1)),
		}, porcupine.Ok},
		{"an unseen grant's token below one granted before it", 2, []Op{
			opAcq(0, sA, hA, lk, 10, pending, resUnknown, 0),
			slotAcq(1, sB, hB, lk, 50, 60, 7, 0),
			opRead(2, lk, 100, 110, held(sB, hB, 7, 0), held(sA, hA, 6, 1)),
		}, porcupine.Illegal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := runSemPorcupine(semHist(tc.permits, tc.ops...), 0).Result; got != tc.want {
				t.Errorf("porcupine says %s, want %s", got, tc.want)
			}
		})
	}
}

// An expired holder's slot may stay in its lock-delay: a grant may skip
// it for a higher slot, and a try may find the semaphore busy; once a
// grant took it, it is as any held slot.
func TestSemaphoreModelExpiredSlotMayBeDelayed(t *testing.T) {
	base := []Op{
		opOpen(0, sA, 1, 2), opOpen(1, sB, 1, 2), opOpen(2, sC, 1, 2),
		slotAcq(0, sA, hA, lk, 10, 20, 5, 0),
		slotAcq(1, sB, hB, lk, 30, 40, 7, 1),
		opKA(0, sA, 100, 110, resOK),
		opKA(0, sA, 1500, 1510, resNotFound),
		opKA(1, sB, 4000, 4001, resOK), opClose(1, sB, 5000, 5001, resOK),
		opKA(2, sC, 4000, 4001, resOK), opClose(2, sC, 5000, 5001, resOK),
	}
	for _, tc := range []struct {
		name    string
		permits int
		ops     []Op
		want    porcupine.CheckResult
	}{
		{"the next grant skips the delayed slot", 3, []Op{slotAcq(2, sC, hC, lk, 1600, 1610, 9, 2)}, porcupine.Ok},
		{"a try finds the semaphore busy", 2, []Op{opAcq(2, sC, hC, lk, 1600, 1610, resBusy, 0)}, porcupine.Ok},
		{"the delayed slot granted once its delay ends", 3, []Op{slotAcq(2, sC, hC, lk, 1600, 1610, 9, 0)}, porcupine.Ok},
		{"a grant of the slot while its holder may live", 3, []Op{slotAcq(2, sC, hC, lk, 50, 60, 9, 0)}, porcupine.Illegal},
		{"a try answered busy while its holder may live", 2, []Op{opAcq(2, sC, hC, lk, 50, 60, resBusy, 0)}, porcupine.Ok},
		{"a try answered busy beside a free slot after a close", 2, []Op{
			opClose(1, sB, 1600, 1610, resOK), opAcq(2, sC, hC, lk, 1700, 1710, resBusy, 0)}, porcupine.Illegal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hist(append(append([]Op(nil), base...), tc.ops...)...)
			h.Permits = tc.permits
			if got := runSemPorcupine(h, 0).Result; got != tc.want {
				t.Errorf("porcupine says %s, want %s", got, tc.want)
			}
		})
	}
}

// An operator's revocation frees the revoked grant's slot (in its delay)
// and no other.
func TestSemaphoreModelRevocationFreesItsSlot(t *testing.T) {
	ops := []Op{
		slotAcq(0, sA, hA, lk, 10, 20, 5, 0),
		slotAcq(1, sB, hB, lk, 30, 40, 7, 1),
		slotAcq(2, sC, hC, lk, 200, 210, 9, 0),
	}
	for _, tc := range []struct {
		name  string
		token uint64
		want  porcupine.CheckResult
	}{
		{"slot 0's grant revoked", 5, porcupine.Ok},
		{"slot 1's grant revoked", 7, porcupine.Illegal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := semHist(2, ops...)
			h.Faults = []FaultRec{{Kind: faultRevokeGrant, Lock: lk, Token: tc.token, ActCall: 100, ActReturn: 110}}
			if got := runSemPorcupine(h, 0).Result; got != tc.want {
				t.Errorf("porcupine says %s, want %s", got, tc.want)
			}
		})
	}
}

// A semaphore run's report judges the history with the semaphore model:
// a slot held twice is a linearizability violation, explained.
func TestSemaphoreRunJudgesLinearizability(t *testing.T) {
	h := semHist(2,
		slotAcq(0, sA, hA, lk, 10, 20, 5, 0),
		slotAcq(1, sB, hB, lk, 30, 40, 7, 0))
	rep := analyze(h, time.Minute)
	if rep.Lin.NotRun != "" || rep.Lin.Result != porcupine.Illegal || rep.count(checkLinearizable) != 1 {
		t.Fatalf("linearizability: %+v, %d violations", rep.Lin.Result, rep.count(checkLinearizable))
	}
	var what string
	for _, v := range rep.Violations {
		if v.Check == checkLinearizable {
			what = v.What
		}
	}
	for _, want := range []string{"lock L: the longest linearization places", "slots [0 sessA/holdA token 5; 1 free]", "slot 0"} {
		if !strings.Contains(what, want) {
			t.Errorf("the explanation lacks %q:\n%s", want, what)
		}
	}
	var sb strings.Builder
	rep.print(&sb)
	if !strings.Contains(sb.String(), "1 linearizable (porcupine): Illegal") || !strings.Contains(sb.String(), "the semaphore model of 2 slots") {
		t.Errorf("the summary does not report the semaphore model:\n%s", sb.String())
	}
	clean := semHist(2, slotAcq(0, sA, hA, lk, 10, 20, 5, 0), slotAcq(1, sB, hB, lk, 30, 40, 7, 1))
	if rep := analyze(clean, time.Minute); rep.Lin.Result != porcupine.Ok || rep.Lin.NotRun != "" || rep.Lin.Ops == 0 {
		t.Errorf("a legal semaphore history: %+v", rep.Lin)
	}
}

// A restore is not modelled: the check says it was not run.
func TestSemaphoreModelNotRunAfterARestore(t *testing.T) {
	h := semHist(2, slotAcq(0, sA, hA, lk, 10, 20, 5, 0))
	h.Faults = []FaultRec{{Kind: faultRestore, ActCall: 100, ActReturn: 110}}
	if l := runSemPorcupine(h, 0); l.NotRun == "" {
		t.Errorf("checked a history with a restore: %+v", l.Result)
	}
}
