package main

import "testing"

// A semaphore of 2: C holds slot 0 (token 5) and slot 1 (token 6, holder
// hC2); a read at 100-110 (index 6) shows A, then B, waiting. The
// sessions stay alive until 5000.
func TestSemaphoreGrantsFollowQueueOrder(t *testing.T) {
	const hC2 = "holdC2"
	alive := []Op{
		opOpen(0, sA, 1, 2), opOpen(1, sB, 1, 2), opOpen(2, sC, 1, 2),
		opKA(0, sA, 4000, 4001, resOK), opKA(1, sB, 4000, 4001, resOK), opKA(2, sC, 4000, 4001, resOK),
		slotAcq(2, sC, hC, lk, 10, 20, 5, 0), slotAcq(2, sC, hC2, lk, 30, 40, 6, 1),
	}
	read := readQ(2, lk, 100, 110, 6, []string{hA, hB}, held(sC, hC, 5, 0), held(sC, hC2, 6, 1))
	for _, tc := range []struct {
		name                   string
		ops                    []Op
		want, judged, wantLock int
	}{
		{"granted in queue order", []Op{
			waitFor(slotAcq(0, sA, hA, lk, 50, 300, 9, 0), 10000),
			waitFor(slotAcq(1, sB, hB, lk, 60, 500, 12, 1), 10000)}, 0, 1, 0},
		{"the second waiter granted before the first", []Op{
			waitFor(slotAcq(0, sA, hA, lk, 50, 500, 12, 1), 10000),
			waitFor(slotAcq(1, sB, hB, lk, 60, 300, 9, 0), 10000)}, 1, 1, 1},
		{"a newcomer granted before the first waiter", []Op{
			waitFor(slotAcq(0, sA, hA, lk, 50, 500, 12, 1), 10000),
			slotAcq(1, sB, "holdB2", lk, 200, 300, 9, 0)}, 1, 1, 1},
		// A plain lock's next waiter waits for the unseen holder to let
		// go; a semaphore's takes the other slot: A may hold one unseen.
		{"the second waiter granted, the first's outcome unknown", []Op{
			waitFor(opAcq(0, sA, hA, lk, 50, pending, resUnknown, 0), 10000),
			waitFor(slotAcq(1, sB, hB, lk, 60, 300, 9, 0), 10000)}, 0, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hist(append(append(append([]Op(nil), alive...), read), tc.ops...)...)
			h.Permits = 2
			vs, judged := checkSemQueueOrder(h)
			wantViolations(t, tc.name, vs, tc.want)
			if judged != tc.judged {
				t.Errorf("%d pairs judged, want %d", judged, tc.judged)
			}
			if vs, _ := checkQueueOrder(h); len(vs) != tc.wantLock {
				t.Errorf("judged as a plain lock: %d violations, want %d", len(vs), tc.wantLock)
			}
			n := 0
			for _, v := range semaphoreChecks(h) {
				if v.Check == checkQueueFIFO {
					n++
				}
			}
			if n != tc.want {
				t.Errorf("semaphoreChecks: %d queue-order violations, want %d", n, tc.want)
			}
		})
	}
}
