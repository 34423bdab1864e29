package main

import (
	"testing"
)

// mixedAcq is an acknowledged acquire of a mixed-kinds run.
func mixedAcq(c int, s, h string, call, ret int64, token uint64, shared bool, permits, slot uint64) Op {
	o := opAcq(c, s, h, lk, call, ret, resOK, token)
	if shared {
		o.Mode = modeShared
	}
	o.Permits, o.Slot = permits, slot
	return o
}

// TestConflictsIsTheKindsRule pins which grants may be held at once: two
// shared grants, or two slots of a semaphore of one size in different
// slots; nothing else.
func TestConflictsIsTheKindsRule(t *testing.T) {
	x, sh := grantKind{}, grantKind{shared: true}
	s20, s21, s30 := grantKind{permits: 2}, grantKind{permits: 2, slot: 1}, grantKind{permits: 3}
	for _, tc := range []struct {
		a, b grantKind
		want bool
	}{
		{x, x, true}, {x, sh, true}, {sh, sh, false}, {sh, s20, true}, {x, s20, true},
		{s20, s21, false}, {s20, s20, true}, {s20, s30, true}, {s21, s30, true},
	} {
		if got := conflicts(tc.a, tc.b); got != tc.want || conflicts(tc.b, tc.a) != tc.want {
			t.Errorf("conflicts(%v, %v) = %v, want %v (both ways)", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestTenuresJudgeEveryWriteByItsKind pins the tenure check of a
// mixed-kinds run: one fence per name, every write judged by its grant's
// kind against every newer grant and every newer accepted write.
func TestTenuresJudgeEveryWriteByItsKind(t *testing.T) {
	// A and B hold shared grants 5 and 6 (released at 400); C is granted
	// slot 0 of a semaphore of 2 at 500 (token 9), D slot 1 (token 10).
	ops := []Op{
		opOpen(0, sA, 1, 2), opOpen(1, sB, 1, 2), opOpen(2, sC, 1, 2),
		mixedAcq(0, sA, hA, 10, 20, 5, true, 0, 0),
		mixedAcq(1, sB, hB, 11, 21, 6, true, 0, 0),
		mixedAcq(2, sC, hC, 490, 500, 9, false, 2, 0),
		mixedAcq(2, sC, "hD", 495, 505, 10, false, 2, 1),
	}
	for _, tc := range []struct {
		name   string
		writes []WriteRec
		want   int
	}{
		{"readers side by side, then the slots side by side", []WriteRec{
			write(1, sB, hB, lk, 6, 100, true), write(0, sA, hA, lk, 5, 110, true),
			write(2, sC, hC, lk, 9, 600, true), write(2, sC, "hD", lk, 10, 610, true), write(2, sC, hC, lk, 9, 620, true)}, 0},
		{"a reader's write accepted after a slot holder's (the fence kept the shared rule across the change)", []WriteRec{
			write(0, sA, hA, lk, 5, 100, true), write(2, sC, hC, lk, 9, 600, true),
			write(0, sA, hA, lk, 5, 650, true)}, 2},
		{"a reader's write accepted in the next tenure before its first write", []WriteRec{
			write(0, sA, hA, lk, 5, 100, true), write(0, sA, hA, lk, 5, 550, true)}, 1},
		{"a reader's stale write refused", []WriteRec{
			write(0, sA, hA, lk, 5, 100, true), write(2, sC, hC, lk, 9, 600, true),
			write(0, sA, hA, lk, 5, 650, false)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hist(ops...)
			h.Mixed, h.Writes = true, tc.writes
			vs, _ := checkTenures(h)
			wantViolations(t, tc.name, vs, tc.want)
		})
	}
	h := hist(append(append([]Op(nil), ops...), mixedAcq(1, sB, "hE", 700, 710, 12, false, 2, 2))...)
	h.Mixed = true
	if vs, _ := checkTenures(h); len(vs) != 1 || vs[0].Client != 1 {
		t.Errorf("a grant of slot 2 of a semaphore of 2: %+v, want one violation about client 1", vs)
	}
}

// TestMixedReadsAndRegrantsCountCompany: in a mixed-kinds run a read
// that names a shared grant among others keeps it (check 3), and a later
// shared grant is no re-grant of a shared one (check 5).
func TestMixedReadsAndRegrantsCountCompany(t *testing.T) {
	h := hist(
		opOpen(0, sA, 1, 2), opOpen(1, sB, 1, 2),
		mixedAcq(0, sA, hA, 10, 20, 5, true, 0, 0),
		mixedAcq(1, sB, hB, 30, 40, 6, true, 0, 0),
		opKA(0, sA, 900, 901, resOK), opKA(1, sB, 900, 901, resOK),
		opRead(1, lk, 100, 110, hold(sA, hA, 5), hold(sB, hB, 6)),
	)
	h.Mixed = true
	h.Holds = []HoldRec{holdRec(0, sA, hA, lk, 5, 21, pending)}
	if vs, judged := checkGrantsKept(h); len(vs) != 0 || judged != 2 {
		t.Errorf("check 3: %+v, %d judged; want none of 2", vs, judged)
	}
	if vs, _ := checkLostBeforeRegrant(h); len(vs) != 0 {
		t.Errorf("check 5: %+v; a shared grant is no re-grant of another", vs)
	}
	h.Mixed = false
	if vs, _ := checkGrantsKept(h); len(vs) == 0 {
		t.Errorf("check 3 of a plain run: a read of two holders passed")
	}
}
