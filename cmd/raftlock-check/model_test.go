package main

import (
	"cmp"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

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
		// The 30-minute run of issue 39 (seed 39): a Python client's
		// release answered ok was sent again after another holder took
		// the lock; the cluster answers such a repeat ok (each session
		// remembers its last releases), so the history is linearizable.
		{"a release repeated after another holder took the lock", []Op{
			opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
			opRel(0, sA, hA, lk, 30, 40, resOK),
			opAcq(1, sB, hB, lk, 50, 60, resOK, 9),
			opRel(0, sA, hA, lk, 70, 80, resOK),
			opRead(2, lk, 90, 100, hold(sB, hB, 9)),
		}, porcupine.Ok},
		{"a release ok from a holder that never released the lock it did not hold", []Op{
			opAcq(1, sB, hB, lk, 50, 60, resOK, 9),
			opRel(0, sA, hA, lk, 70, 80, resOK),
		}, porcupine.Illegal},
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
		{"the server keeps the grant of an abandoned wait", []Op{
			opWaitAcq(0, sA, hA, lk, 10, 20, resUnknown, 0),
			opRead(1, lk, 30, 40, hold(sA, hA, 5)),
			opAcq(1, sB, hB, lk, 50, 60, resOK, 9),
		}, porcupine.Illegal},
		{"the grant of an abandoned wait ends with its release", []Op{
			opWaitAcq(0, sA, hA, lk, 10, 20, resUnknown, 0),
			opRead(1, lk, 30, 40, hold(sA, hA, 5)),
			cancelOf(opRel(0, sA, hA, lk, 42, 45, resOK)),
			opAcq(1, sB, hB, lk, 50, 60, resOK, 9),
		}, porcupine.Ok},
		{"an unknown acquire may take effect long after its client gave up", []Op{
			opAcq(1, sB, hB, lk, 5, 8, resOK, 3),
			opWaitAcq(0, sA, hA, lk, 10, 20, resUnknown, 0),
			opRel(1, sB, hB, lk, 100, 110, resOK),
			opRead(2, lk, 200, 210),
			opRead(2, lk, 300, 310, hold(sA, hA, 5)),
		}, porcupine.Ok},
		{"an unknown acquire takes effect once", []Op{
			opWaitAcq(0, sA, hA, lk, 10, 20, resUnknown, 0),
			opRead(2, lk, 30, 40, hold(sA, hA, 5)),
			opRel(0, sA, hA, lk, 50, 60, resOK),
			opRead(2, lk, 70, 80, hold(sA, hA, 7)),
		}, porcupine.Illegal},
		{"copies of an unknown acquire may each take effect", []Op{
			opWaitAcq(0, sA, hA, lk, 10, 20, resUnknown, 0),
			opWaitAcq(0, sA, hA, lk, 21, 30, resUnknown, 0),
			opRead(2, lk, 30, 40, hold(sA, hA, 5)),
			opRel(0, sA, hA, lk, 50, 60, resOK),
			opRead(2, lk, 70, 80, hold(sA, hA, 7)),
		}, porcupine.Ok},
		{"an unknown release takes effect only on its holder's grant", []Op{
			opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
			opRel(0, sA, hA, lk, 30, 40, resUnknown),
			opAcq(1, sB, hB, lk, 50, 60, resOK, 9),
			opRel(1, sB, hB, lk, 70, 80, resOK),
			opAcq(0, sA, hA, lk, 90, 100, resOK, 12),
			opAcq(1, sB, hB, lk, 110, 120, resOK, 14),
		}, porcupine.Illegal},
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

// pendingForever turns the arms of ops back into what they arm: operations
// that never return (the encoding of unknown outcomes before
// pendingEffect).
func pendingForever(ops []porcupine.Operation) []porcupine.Operation {
	out := make([]porcupine.Operation, len(ops))
	for i, op := range ops {
		if in := op.Input.(lockInput); in.Kind == kindArm {
			in.Kind, in.Effect = in.Effect, ""
			op.Input, op.Return = in, pending
		}
		out[i] = op
	}
	return out
}

// simHistory returns a random history of one lock as a correct cluster
// could produce it: clients of sessions A and B (closed at the end) and C
// (never seen again after its open, so it may expire at any time) try,
// wait, release and read; a call of A or B whose outcome is unknown takes
// effect at a random later moment, maybe after its client gave up, maybe
// never (C's outcomes are all known: its expiry, which may come at any
// time, would end its unknown ones, which an operation that never returns
// does not model). With mutate set, two answers are then changed at
// random.
func simHistory(rng *rand.Rand, mutate bool) History {
	type lin struct {
		at int64
		op int
	}
	sessions := []string{sA, sB, sC}
	ops := []Op{opOpen(0, sA, 1, 2), opOpen(1, sB, 1, 2), opOpen(2, sC, 1, 2),
		opKA(0, sA, 4000, 4001, resOK), opKA(1, sB, 4000, 4001, resOK),
		opClose(0, sA, 5000, 5001, resOK), opClose(1, sB, 5000, 5001, resOK)}
	first := len(ops)
	var points []lin
	n := 6 + rng.Intn(7)
	for i := 0; i < n; i++ {
		c := rng.Intn(3)
		call := int64(10 + rng.Intn(400))
		ret := call + int64(1+rng.Intn(80))
		var o Op
		switch k := rng.Intn(10); {
		case k < 5:
			o = opAcq(c, sessions[c], fmt.Sprintf("h%d%d", c, rng.Intn(2)), lk, call, ret, "", 0)
			o.Wait = rng.Intn(2) == 0
		case k < 8:
			o = opRel(c, sessions[c], fmt.Sprintf("h%d%d", c, rng.Intn(2)), lk, call, ret, "")
		default:
			o = opRead(c, lk, call, ret)
		}
		at := call + rng.Int63n(ret-call+1)
		if o.Kind != kindRead && c != 2 && rng.Intn(3) == 0 {
			o.Result = resUnknown
			at = call + rng.Int63n(600) // maybe after ret; beyond the last op: never
		}
		points = append(points, lin{at, len(ops)})
		ops = append(ops, o)
	}
	slices.SortFunc(points, func(a, b lin) int { return cmp.Compare(a.at, b.at) })
	var st lockState
	next := uint64(1)
	for _, p := range points {
		o := &ops[p.op]
		next++
		switch o.Kind {
		case kindAcquire:
			switch {
			case st.heldBy(o.Session, o.Holder):
				o.Token = st.Token
			case st.free():
				st = st.granted(o.Session, o.Holder, next)
				o.Token = next
			default:
				o.Token = 0
				if o.Result == "" {
					o.Result = resBusy
				}
			}
			if o.Result == "" {
				o.Result = resOK
			}
		case kindRelease:
			switch {
			case st.heldBy(o.Session, o.Holder), st.free():
				st = st.freed(false)
				if o.Result == "" {
					o.Result = resOK
				}
			case o.Result == "":
				o.Result = resNotHolder
			}
		case kindRead:
			o.Result = resOK
			if !st.free() {
				o.Holders = []holderInfo{hold(st.Session, st.Holder, st.Token)}
			}
		}
		if o.Result == resUnknown {
			o.Token = 0
		}
	}
	for k := 0; mutate && k < 2; k++ {
		o := &ops[first+rng.Intn(n)]
		switch {
		case o.Kind == kindRead:
			o.Holders = nil
			if rng.Intn(3) > 0 {
				o.Holders = []holderInfo{hold(sessions[rng.Intn(3)], fmt.Sprintf("h%d%d", rng.Intn(3), rng.Intn(2)),
					uint64(rng.Intn(int(next)+1)))}
			}
		case o.Kind == kindAcquire && rng.Intn(2) == 0:
			o.Result, o.Token = resOK, uint64(1+rng.Intn(int(next)))
		default:
			o.Result = []string{resOK, resBusy, resNotHolder}[rng.Intn(3)]
		}
	}
	return hist(ops...)
}

// TestArmedEffectsAcceptWhatPendingOperationsAccept: arming the effect of
// an operation whose outcome is unknown (pendingEffect) accepts exactly
// the histories that an operation that never returns accepts, on random
// histories of a simulated lock, correct and with one answer changed.
func TestArmedEffectsAcceptWhatPendingOperationsAccept(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	model := lockModel()
	verdicts := map[bool]int{} // linearizable or not
	for i := 0; i < 3000; i++ {
		h := simHistory(rng, i%2 == 1)
		armed := modelOps(h)
		want := porcupine.CheckOperations(model, pendingForever(armed))
		got := porcupine.CheckOperations(model, armed)
		if got != want {
			var sb strings.Builder
			for _, o := range h.Ops {
				fmt.Fprintf(&sb, "\n  %+v", o)
			}
			t.Fatalf("history %d: armed: linearizable %v, pending for ever: %v:%s", i, got, want, sb.String())
		}
		verdicts[got]++
	}
	t.Logf("verdicts: %v", verdicts)
	if verdicts[true] < 1000 || verdicts[false] < 500 {
		t.Errorf("the histories prove little: %v", verdicts)
	}
}

// TestModelUnknownOutcomesEndWithTheirSession: an operation whose outcome
// is unknown cannot take effect after its session is gone (the state
// machine refuses a session it does not have, and ids are never used
// again): not after an acknowledged close, not after the expiry of a
// session reported gone.
func TestModelUnknownOutcomesEndWithTheirSession(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []Op
		want porcupine.CheckResult
	}{
		{"granted after its session closed", []Op{
			opOpen(0, sA, 1, 2), opOpen(1, sB, 1, 2),
			opAcq(1, sB, hB, lk, 5, 8, resOK, 3),
			opWaitAcq(0, sA, hA, lk, 10, 20, resUnknown, 0),
			opClose(0, sA, 30, 40, resOK),
			opRel(1, sB, hB, lk, 50, 60, resOK),
			opRead(1, lk, 70, 80, hold(sA, hA, 9)),
			opKA(1, sB, 4000, 4001, resOK),
		}, porcupine.Illegal},
		{"granted before its session closed", []Op{
			opOpen(0, sA, 1, 2), opOpen(1, sB, 1, 2),
			opAcq(1, sB, hB, lk, 5, 8, resOK, 3),
			opWaitAcq(0, sA, hA, lk, 10, 20, resUnknown, 0),
			opRel(1, sB, hB, lk, 25, 28, resOK),
			opRead(1, lk, 29, 30, hold(sA, hA, 9)),
			opClose(0, sA, 30, 40, resOK),
			opRead(1, lk, 70, 80),
			opKA(1, sB, 4000, 4001, resOK),
		}, porcupine.Ok},
		{"granted after its session was reported gone", []Op{
			opOpen(0, sA, 1, 2), opOpen(1, sB, 1, 2),
			opAcq(1, sB, hB, lk, 5, 8, resOK, 3),
			opWaitAcq(0, sA, hA, lk, 10, 20, resUnknown, 0),
			opKA(0, sA, 100, 110, resOK),
			opKA(0, sA, 1500, 1510, resNotFound),
			opRel(1, sB, hB, lk, 2000, 2010, resOK),
			opRead(1, lk, 2100, 2110, hold(sA, hA, 9)),
			opKA(1, sB, 4000, 4001, resOK),
		}, porcupine.Illegal},
		{"granted while its session may still live", []Op{
			opOpen(0, sA, 1, 2), opOpen(1, sB, 1, 2),
			opAcq(1, sB, hB, lk, 5, 8, resOK, 3),
			opWaitAcq(0, sA, hA, lk, 10, 20, resUnknown, 0),
			opKA(0, sA, 100, 110, resOK),
			opRel(1, sB, hB, lk, 200, 210, resOK),
			opRead(1, lk, 300, 310, hold(sA, hA, 9)),
			opKA(0, sA, 1500, 1510, resNotFound),
			opKA(1, sB, 4000, 4001, resOK),
		}, porcupine.Ok},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := runPorcupine(hist(tc.ops...), 0).Result; got != tc.want {
				t.Errorf("porcupine says %s, want %s", got, tc.want)
			}
		})
	}
}

// TestUnknownOutcomesDoNotMultiplyTheSearch: a grant that a read sees
// after its client gave up on the acquire, behind dozens of other waits
// whose outcome is unknown, is checked at once. Held as operations that
// never return, a dozen of them made porcupine give up after 30 s: it
// searched every subset of them that might have been linearized first.
func TestUnknownOutcomesDoNotMultiplyTheSearch(t *testing.T) {
	ops := append(lived(), opAcq(0, sA, hA, lk, 10, 20, resOK, 5))
	for i := 0; i < 40; i++ {
		c := 1 + i%2
		ops = append(ops, opWaitAcq(c, []string{sB, sC}[c-1], fmt.Sprintf("holder%d", i), lk, int64(100+i*10), int64(105+i*10), resUnknown, 0))
	}
	ops = append(ops, opRel(0, sA, hA, lk, 1000, 1010, resOK), opRead(1, lk, 1100, 1110, hold(sC, "holder1", 9)))
	l := runPorcupine(hist(ops...), 20*time.Second)
	if l.Result != porcupine.Ok {
		t.Errorf("porcupine says %s after %v, want Ok", l.Result, l.Elapsed)
	}
}

// TestReduceDropsSubsumedStates: of two states that differ only in their
// armed effects, the one whose effects are a part of the other's is
// dropped; states that differ otherwise are kept.
func TestReduceDropsSubsumedStates(t *testing.T) {
	acqA := pendingEffect{Kind: kindAcquire, Session: sA, Holder: hA}
	acqB := pendingEffect{Kind: kindAcquire, Session: sB, Holder: hB}
	free := lockState{Last: 5}
	both, onlyA := free.arm(acqA).arm(acqB), free.arm(acqA)
	held := free.granted(sC, hC, 7)
	got := reduce([]lockState{onlyA, both, free, held, both, onlyA.arm(acqA)})
	want := lockStates{held, both, onlyA.arm(acqA)}
	slices.SortFunc(want, compareLockStates)
	if !slices.Equal(got, want) {
		t.Errorf("reduce kept %v, want %v", got, want)
	}
}

// A non-linearizable history is reported with where it stops linearizing:
// the state the longest linearization leaves and the operations it could
// not place, so that a CI log (whose history file is gone) says what
// went wrong.
func TestIllegalHistoryIsExplained(t *testing.T) {
	h := hist(append(lived(),
		opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
		opAcq(1, sB, hB, lk, 30, 40, resOK, 9),
		opRel(0, sA, hA, lk, 50, 60, resOK))...)
	rep := analyze(h, time.Minute)
	var what string
	for _, v := range rep.Violations {
		if v.Check == checkLinearizable {
			what = v.What
		}
	}
	for _, want := range []string{"not linearizable", "lock L: the longest linearization places", "leaving the lock", "the earliest operations not placed", sB} {
		if !strings.Contains(what, want) {
			t.Errorf("the explanation lacks %q:\n%s", want, what)
		}
	}
	t.Log(what)
}
