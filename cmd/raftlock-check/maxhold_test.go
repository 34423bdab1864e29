package main

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

// withMaxHold gives an acquire a hold limit of d.
func withMaxHold(o Op, d int64) Op {
	o.MaxHold = d
	return o
}

// TestModelGrantEndsAtItsHoldLimit: a grant with a hold limit may end
// unseen from its acquire's call plus the limit on (the cluster revokes
// it, kind max_hold): a read that shows the lock free, or another holder,
// after that is linearizable; before that, or without a limit, it is not.
func TestModelGrantEndsAtItsHoldLimit(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []Op
		want porcupine.CheckResult
	}{
		{"free after the limit", []Op{
			withMaxHold(opAcq(0, sA, hA, lk, 10, 20, resOK, 5), 1000),
			opRead(1, lk, 30, 40, hold(sA, hA, 5)),
			opRead(1, lk, 1100, 1110),
		}, porcupine.Ok},
		{"another holder after the limit", []Op{
			withMaxHold(opAcq(0, sA, hA, lk, 10, 20, resOK, 5), 1000),
			opAcq(1, sB, hB, lk, 1100, 1110, resOK, 9),
		}, porcupine.Ok},
		{"free before the limit", []Op{
			withMaxHold(opAcq(0, sA, hA, lk, 10, 20, resOK, 5), 1000),
			opRead(1, lk, 500, 510),
		}, porcupine.Illegal},
		{"free without a limit", []Op{
			opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
			opRead(1, lk, 1100, 1110),
		}, porcupine.Illegal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := runPorcupine(hist(tc.ops...), 0).Result; got != tc.want {
				t.Errorf("porcupine says %s, want %s", got, tc.want)
			}
		})
	}
}

// TestGrantsKeptExpectsTheHoldLimit: check 3 takes a grant's hold limit
// as an expected end: a read after it that no longer names the grant is
// no violation; one before it is.
func TestGrantsKeptExpectsTheHoldLimit(t *testing.T) {
	base := []Op{opOpen(0, sA, 1, 2), withMaxHold(opAcq(0, sA, hA, lk, 10, 20, resOK, 5), 1000), opKA(0, sA, 1500, 1510, resOK)}
	vs, _ := checkGrantsKept(hist(append(append([]Op(nil), base...), opRead(1, lk, 1100, 1110))...))
	wantViolations(t, "a read after the hold limit", vs, 0)
	vs, _ = checkGrantsKept(hist(append(append([]Op(nil), base...), opRead(1, lk, 500, 510))...))
	wantViolations(t, "a read before the hold limit", vs, 1)
}
