package main

import "testing"

func slotAcq(c int, s, h, lock string, call, ret int64, token, slot uint64) Op {
	o := opAcq(c, s, h, lock, call, ret, resOK, token)
	o.Slot = slot
	return o
}

func slotWrite(c int, s, h, lock string, token, slot uint64, at int64, accepted bool) WriteRec {
	w := write(c, s, h, lock, token, at, accepted)
	w.Semaphore, w.Slot = true, slot
	return w
}

// A semaphore of 2: A holds slot 0 (token 5), B slot 1 (token 7); A's
// slot goes to C (token 9) at 500. Writes of different slots interleave
// freely; the checks judge each slot as a lock.
func TestSemaphoreChecksJudgeEachSlot(t *testing.T) {
	const sC, hC = "sess-c", "holder-c"
	ops := []Op{
		opOpen(0, sA, 1, 2), opOpen(1, sB, 1, 2), opOpen(2, sC, 1, 2),
		slotAcq(0, sA, hA, lk, 10, 20, 5, 0),
		slotAcq(1, sB, hB, lk, 30, 40, 7, 1),
		opRel(0, sA, hA, lk, 400, 410, resOK),
		slotAcq(2, sC, hC, lk, 490, 500, 9, 0),
		opKA(0, sA, 900, 901, resOK), opKA(1, sB, 900, 901, resOK), opKA(2, sC, 900, 901, resOK),
	}
	for _, tc := range []struct {
		name   string
		extra  []Op
		writes []WriteRec
		want   int
	}{
		{"slots interleave", nil, []WriteRec{
			slotWrite(0, sA, hA, lk, 5, 0, 100, true), slotWrite(1, sB, hB, lk, 7, 1, 150, true),
			slotWrite(0, sA, hA, lk, 5, 0, 200, true), slotWrite(2, sC, hC, lk, 9, 0, 600, true),
			slotWrite(1, sB, hB, lk, 7, 1, 650, true)}, 0},
		{"a stale slot holder writes inside its slot's next tenure", nil, []WriteRec{
			slotWrite(0, sA, hA, lk, 5, 0, 100, true), slotWrite(0, sA, hA, lk, 5, 0, 550, true)}, 1},
		{"a write in a slot beyond the permits", nil, []WriteRec{
			slotWrite(1, sB, hB, lk, 7, 2, 100, true)}, 2}, // no such slot; three writers at once
		{"a grant beyond the permits", []Op{slotAcq(2, sC, "h2", lk, 600, 610, 11, 2)}, nil, 1},
		{"a plain sequencer accepted", nil, []WriteRec{write(1, sB, hB, lk, 7, 100, true)}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hist(append(append([]Op(nil), ops...), tc.extra...)...)
			h.Permits, h.Writes = 2, tc.writes
			if tc.name == "a write in a slot beyond the permits" {
				h.Writes = append([]WriteRec{slotWrite(0, sA, hA, lk, 5, 0, 50, true), slotWrite(1, sB, hB, lk, 7, 1, 60, true)}, h.Writes...)
			}
			wantViolations(t, tc.name, semaphoreChecks(h), tc.want)
		})
	}
}

// perSlot turns slot S of lock L into the lock "L#S": a read names, per
// slot, that slot's holder; releases follow their grant's slot.
func TestPerSlotSplitsReadsAndReleases(t *testing.T) {
	r := opRead(2, lk, 100, 110, holderInfo{Session: sA, Holder: hA, Token: 5, Slot: 0}, holderInfo{Session: sB, Holder: hB, Token: 7, Slot: 1})
	h := hist(opOpen(0, sA, 1, 2), opOpen(1, sB, 1, 2), slotAcq(0, sA, hA, lk, 10, 20, 5, 0), slotAcq(1, sB, hB, lk, 30, 40, 7, 1),
		r, opRel(1, sB, hB, lk, 400, 410, resOK), opKA(0, sA, 900, 901, resOK), opKA(1, sB, 900, 901, resOK))
	h.Permits = 3
	ps := perSlot(h)
	var reads, rels int
	for _, o := range ps.Ops {
		switch o.Kind {
		case kindRead:
			reads++
			want := map[string]int{lk + "#0": 1, lk + "#1": 1, lk + "#2": 0}[o.Lock]
			if len(o.Holders) != want {
				t.Errorf("read of %s names %+v", o.Lock, o.Holders)
			}
		case kindRelease:
			rels++
			if o.Lock != lk+"#1" {
				t.Errorf("release of %s, want %s#1", o.Lock, lk)
			}
		}
	}
	if reads != 3 || rels != 1 {
		t.Fatalf("%d reads, %d releases", reads, rels)
	}
	if vs, judged := checkGrantsKept(ps); len(vs) != 0 || judged != 2 {
		t.Fatalf("grants kept per slot: %+v (%d judged)", vs, judged)
	}
}
