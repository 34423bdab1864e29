package fsm

import (
	"fmt"
	"strings"
	"testing"
)

// bigAcq is an exclusive acquire of lock with a 4 KiB value.
func bigAcq(lock, session string) Command {
	c := acqCmd(lock, session, "h", Exclusive, false)
	c.Acquire.Value = strings.Repeat("v", 4096)
	return c
}

// A change answer over its bound stops after a change index, whole: its
// Index is that change's, and the watcher reading on from it is answered
// the rest, every change once; the locks one entry changed (a session's
// close frees them all) come together even over the bound, and the first
// change index is answered even when it alone is over it.
func TestChangeAnswersStopAtAChangeIndexWithinTheirBound(t *testing.T) {
	h := newHarness(t)
	h.open("s", 0)
	h.open("t", 0)
	h.must(StatusGranted, bigAcq("c/first", "s"))
	at := h.idx
	for i := range 6 {
		h.must(StatusGranted, bigAcq(fmt.Sprintf("c/%d", i), "s"))
	}
	h.must(StatusGranted, bigAcq("c/t1", "t"))
	h.must(StatusGranted, bigAcq("c/t2", "t"))
	h.must(StatusGranted, bigAcq("c/t3", "t"))
	h.must(StatusOK, closeCmd("t"))
	l, _ := h.f.Lock("c/0")
	bound := 2 * LockBytes(&l) // two one-lock changes fit
	seen := map[string]int{}
	index, answers := at, 0
	for index < h.idx {
		c := h.f.LocksChangedSince("c/", index, bound)
		answers++
		if c.Reset || c.Next != "" || len(c.Locks) == 0 || c.Index <= index {
			t.Fatalf("answer %d from %d: %d locks, reset %v, next %q, index %d", answers, index, len(c.Locks), c.Reset, c.Next, c.Index)
		}
		for _, l := range c.Locks {
			if l.Index <= index || l.Index > c.Index {
				t.Fatalf("%s changed at %d answered in (%d, %d]", l.Name, l.Index, index, c.Index)
			}
			seen[l.Name]++
		}
		if c.Index < h.idx && len(c.Locks) > 3 {
			t.Fatalf("answer %d holds %d locks, over its bound of two but for one entry's three", answers, len(c.Locks))
		}
		index = c.Index
	}
	if len(seen) != 9 || answers != 4 {
		t.Fatalf("%d answers saw %v; want the 9 changed locks in 4 answers (2, 2, 2, the close's 3)", answers, seen)
	}
	for name, n := range seen {
		if n != 1 {
			t.Fatalf("%s answered %d times", name, n)
		}
	}
	if c := h.f.LocksChangedSince("c/", 0, 1); !c.Reset || len(c.Locks) != 1 || c.Next != c.Locks[0].Name {
		t.Fatalf("a reset over a bound of one byte: %d locks, next %q; want one lock naming the next", len(c.Locks), c.Next)
	}
}
