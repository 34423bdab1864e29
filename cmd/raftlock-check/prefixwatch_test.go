package main

import "testing"

// Check 9 holds the prefix watcher's answers to the rule of prefix
// watches: every acknowledged grant under the prefix in the answer whose
// range holds its token, none twice, the index never back; grants in a
// reset's range, or outside every answer's, are not judged.
func TestCheckPrefixWatch(t *testing.T) {
	const l0, l1 = lockPrefix + "lock0", lockPrefix + "lock1"
	ops := []Op{
		opOpen(0, sA, 1, 2), opOpen(1, sB, 1, 2),
		opAcq(0, sA, hA, l0, 10, 20, resOK, 5),
		opRel(0, sA, hA, l0, 30, 40, resOK),
		opAcq(1, sB, hB, l0, 50, 60, resOK, 9),
		opAcq(1, sB, hB, l1, 70, 80, resOK, 12),
		opAcq(1, sB, "h-other", "elsewhere", 70, 80, resOK, 13),
	}
	lock := func(name string, index uint64, tokens ...uint64) watchedLock {
		return watchedLock{Name: name, Index: index, GrantsSince: 1, Tokens: tokens}
	}
	good := []WatchRec{
		{At: 5, From: 0, Index: 2, Reset: true},
		{At: 25, From: 2, Index: 6, Locks: []watchedLock{lock(l0, 5, 5)}},
		{At: 45, From: 6, Index: 7, Locks: []watchedLock{lock(l0, 7, 5)}}, // released: no token in range
		{At: 90, From: 7, Index: 14, Locks: []watchedLock{lock(l0, 9, 5, 9), lock(l1, 12, 12)}},
		{At: 95, From: 14, Index: 14},
	}
	for _, tc := range []struct {
		name    string
		watches func([]WatchRec) []WatchRec
		want    int
		judged  int
	}{
		{"every grant seen once", func(ws []WatchRec) []WatchRec { return ws }, 0, 3},
		{"a grant missed", func(ws []WatchRec) []WatchRec {
			ws[3].Locks = ws[3].Locks[:1]
			return ws
		}, 1, 3},
		{"a grant seen twice", func(ws []WatchRec) []WatchRec {
			ws[3].Locks[0].Tokens = []uint64{5, 9}
			ws[4].Index = 15
			ws[4].Locks = []watchedLock{lock(l0, 15, 9)} // out of its range: not counted
			ws = append(ws, WatchRec{At: 99, From: 8, Index: 16, Locks: []watchedLock{lock(l0, 16, 9)}})
			return ws
		}, 2, 3}, // the last answer: asked at 8 after one at 15 (back), and grant 9 again
		{"the index goes back", func(ws []WatchRec) []WatchRec {
			ws[4].Index = 13
			return ws
		}, 1, 3},
		{"a lock outside the prefix, and one changed before the range", func(ws []WatchRec) []WatchRec {
			ws[4].Locks = []watchedLock{{Name: "elsewhere", Index: 13}, lock(l1, 12)}
			return ws
		}, 3, 3},
		{"a reset's range is not judged", func(ws []WatchRec) []WatchRec {
			ws[3].Reset, ws[3].Locks = true, nil
			return ws
		}, 0, 1},
		{"a truncated history is not judged", func(ws []WatchRec) []WatchRec {
			ws[3].Locks[0].GrantsSince, ws[3].Locks[0].Tokens = 10, nil
			return ws
		}, 0, 2},
		{"grants past the last answer are not judged", func(ws []WatchRec) []WatchRec { return ws[:3] }, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hist(ops...)
			ws := make([]WatchRec, len(good))
			for i, w := range good {
				w.Locks = append([]watchedLock(nil), w.Locks...)
				for j := range w.Locks {
					w.Locks[j].Tokens = append([]uint64(nil), w.Locks[j].Tokens...)
				}
				ws[i] = w
			}
			h.Watches = tc.watches(ws)
			vs, st := checkPrefixWatch(h)
			wantViolations(t, tc.name, vs, tc.want)
			if st.Judged != tc.judged {
				t.Errorf("%s: %d grants judged, want %d", tc.name, st.Judged, tc.judged)
			}
			if got := len(quickChecksOnly(h, checkPrefixWatchName)); got != tc.want {
				t.Errorf("%s: quickChecks reports %d prefix-watch violations, want %d", tc.name, got, tc.want)
			}
		})
	}
}

// quickChecksOnly returns quickChecks's violations of one check.
func quickChecksOnly(h History, check string) []Violation {
	var out []Violation
	for _, v := range quickChecks(h) {
		if v.Check == check {
			out = append(out, v)
		}
	}
	return out
}
