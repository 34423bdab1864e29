package fsm

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// changeLog records, from the events Apply emits, the index of every
// lock's last change: the model a prefix watch is checked against.
type changeLog struct{ last map[string]uint64 }

func (c *changeLog) note(h *harness) {
	for _, e := range h.last {
		if e.Kind == EventLockChanged {
			c.last[e.Lock] = h.idx
		}
	}
}

// watcher is a prefix watcher's view: the locks it knows held, waited for
// or delayed, by name, and the index it passes next.
type watcher struct {
	prefix string
	index  uint64
	view   map[string]Lock
}

// poll answers the watcher from f and checks the answer against the
// changes: without a reset, exactly the locks under the prefix whose last
// change is above the watcher's index, each with that change's index, in
// the order of the changes; the index never goes back.
func (w *watcher) poll(t *testing.T, f *FSM, c *changeLog) {
	t.Helper()
	locks, reset, applied := changedSince(f, w.prefix, w.index)
	if applied < w.index {
		t.Fatalf("answer index %d below the watcher's %d", applied, w.index)
	}
	if reset {
		w.view = map[string]Lock{}
	} else {
		want := map[string]uint64{}
		for name, at := range c.last {
			if strings.HasPrefix(name, w.prefix) && at > w.index && at <= applied {
				want[name] = at
			}
		}
		if len(locks) != len(want) {
			t.Fatalf("watch at %d: %d locks answered, want %d (%v)", w.index, len(locks), len(want), want)
		}
		for i, l := range locks {
			if want[l.Name] != l.Index {
				t.Fatalf("watch at %d: %s at index %d, want its last change %d", w.index, l.Name, l.Index, want[l.Name])
			}
			if i > 0 && locks[i-1].Index > l.Index {
				t.Fatalf("watch at %d: answer not in change order: %d before %d", w.index, locks[i-1].Index, l.Index)
			}
		}
	}
	for _, l := range locks {
		if len(l.Holders) == 0 && len(l.Waiters) == 0 && !l.Delayed {
			delete(w.view, l.Name)
		} else {
			w.view[l.Name] = l
		}
	}
	w.index = applied
	for _, l := range f.Locks(w.prefix) {
		if v, ok := w.view[l.Name]; !ok || v.Index != l.Index {
			t.Fatalf("after the answer at %d the watcher's %s is at %d (known %v), the state's at %d", applied, l.Name, v.Index, ok, l.Index)
		}
	}
	if n := len(f.Locks(w.prefix)); n != len(w.view) {
		t.Fatalf("after the answer at %d the watcher knows %d locks, the state holds %d", applied, len(w.view), n)
	}
}

// A prefix watch answers every change under its prefix since its index
// once: the locks changed since, freed ones included (their kept record
// is the tombstone), never one changed before, so that a watcher applying
// the answers knows exactly the state's locks after each; random grants,
// waits, releases, cancels and expiries, with a snapshot restore on the
// way, whose replica answers alike.
func TestPrefixWatchAnswersEveryChangeSinceItsIndexOnce(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 32))
			h := newHarness(t)
			c := &changeLog{last: map[string]uint64{}}
			sessions := []string{"s1", "s2", "s3"}
			for _, s := range sessions {
				h.open(s, 0)
			}
			ws := []*watcher{{prefix: "a/"}, {prefix: ""}, {prefix: "a/1"}}
			for _, w := range ws {
				w.poll(t, h.f, c)
			}
			for step := 0; step < 400; step++ {
				name := fmt.Sprintf("%c/%d", "ab"[rng.IntN(2)], rng.IntN(4))
				s := sessions[rng.IntN(len(sessions))]
				switch rng.IntN(5) {
				case 0, 1:
					h.apply(acqCmd(name, s, "h", Exclusive, rng.IntN(2) == 0))
				case 2, 3:
					h.apply(relCmd(name, s, "h"))
				case 4:
					h.apply(expireCmd(s))
					h.now += int64(time.Second)
					c.note(h)
					h.open(s, 0)
				}
				c.note(h)
				if step == 200 {
					g := New(nil)
					restoreInto(t, g, snapshotBytes(t, h.f))
					h.f = g
					h.f.onEvent = func(e Event) { h.events = append(h.events, e) }
				}
				if w := ws[rng.IntN(len(ws))]; rng.IntN(3) == 0 {
					w.poll(t, h.f, c)
				}
			}
			for _, w := range ws {
				w.poll(t, h.f, c)
			}
		})
	}
}

// A watch at index 0 is a listing: every lock under the prefix, held,
// waited for or delayed, and a reset (the watcher starts from it).
func TestPrefixWatchAtIndexZeroListsTheWholeState(t *testing.T) {
	h := newHarness(t)
	h.open("s", 0)
	h.must(StatusGranted, acqCmd("a/1", "s", "h", Exclusive, false))
	h.must(StatusGranted, acqCmd("a/2", "s", "h", Exclusive, false))
	h.must(StatusOK, relCmd("a/2", "s", "h"))
	h.must(StatusGranted, acqCmd("b", "s", "h", Exclusive, false))
	locks, reset, applied := changedSince(h.f, "a/", 0)
	if !reset || len(locks) != 1 || locks[0].Name != "a/1" || applied != h.idx {
		t.Fatalf("watch at 0: %+v reset %v at %d; want a/1 alone, reset, at %d", locks, reset, applied, h.idx)
	}
}

// A watcher whose index is below a change the state dropped for good (a
// free history pushed out by MaxFreeGrants) may have missed it: its
// answer is a reset, the whole state. A watcher at or above that change
// missed nothing and is answered the changes alone.
func TestPrefixWatchResetsOnceAChangeAboveItsIndexWasDropped(t *testing.T) {
	h := newHarness(t)
	h.open("a", 0)
	h.must(StatusGranted, acqCmd("w/old", "a", "h", Exclusive, false))
	h.must(StatusOK, relCmd("w/old", "a", "h"))
	freed := h.idx
	h.must(StatusGranted, acqCmd("w/held", "a", "h", Exclusive, false))
	before := h.idx
	for i := 0; i < MaxFreeGrants-1; i++ {
		h.must(StatusGranted, acqCmd(fmt.Sprintf("x/%05d", i), "a", "h", Exclusive, false))
		h.must(StatusOK, relCmd(fmt.Sprintf("x/%05d", i), "a", "h"))
	}
	if _, _, reset := watchAt(h.f, "w/", before); reset {
		t.Fatal("a watcher reset before anything was dropped")
	}
	h.must(StatusGranted, acqCmd("x/last", "a", "h", Exclusive, false))
	h.must(StatusOK, relCmd("x/last", "a", "h")) // pushes w/old's history out
	if _, ok, _ := h.f.LockRecord("w/old"); ok {
		t.Fatal("w/old's history still kept")
	}
	if got := h.f.WatchFloor(); got != freed {
		t.Fatalf("watch floor %d, want %d, the change of the record dropped", got, freed)
	}
	locks, _, reset := watchAt(h.f, "w/", freed-1)
	if !reset || len(locks) != 1 || locks[0].Name != "w/held" {
		t.Fatalf("watch below the dropped change: %+v reset %v; want a reset listing w/held", locks, reset)
	}
	if locks, _, reset := watchAt(h.f, "w/", freed); reset || len(locks) != 1 || locks[0].Name != "w/held" {
		t.Fatalf("watch at the dropped change: %+v reset %v; want w/held's change, no reset", locks, reset)
	}
	if locks, _, reset := watchAt(h.f, "w/", before); reset || len(locks) != 0 {
		t.Fatalf("watch above every change under w/: %+v reset %v; want nothing", locks, reset)
	}
}

func watchAt(f *FSM, prefix string, index uint64) ([]Lock, uint64, bool) {
	locks, reset, applied := changedSince(f, prefix, index)
	return locks, applied, reset
}

// The watch floor is part of the state: a snapshot carries it, and a
// snapshot from before prefix watches, which did not keep it, restores
// with the floor at the index that last forgot grants (Forgot; for one
// from before grant histories, its applied index).
func TestPrefixWatchFloorRestoresFromSnapshots(t *testing.T) {
	h := newHarness(t)
	h.open("a", 0)
	h.must(StatusGranted, acqCmd("l", "a", "h", Exclusive, false))
	h.f.mu.Lock()
	h.f.dropChange(2)
	h.f.mu.Unlock()
	g := New(nil)
	restoreInto(t, g, snapshotBytes(t, h.f))
	if g.WatchFloor() != 2 {
		t.Fatalf("restored watch floor %d, want 2", g.WatchFloor())
	}
	old := strings.Replace(string(h.f.Dump()), `"watch_floor":2,`, "", 1)
	if old == string(h.f.Dump()) {
		t.Fatal("the dump carries no watch_floor")
	}
	if err := g.Load([]byte(old)); err != nil {
		t.Fatal(err)
	}
	if g.WatchFloor() != 0 {
		t.Fatalf("watch floor of a snapshot without one: %d, want its forgot, 0", g.WatchFloor())
	}
	noHistories := strings.Replace(old, `"forgot":0,`, "", 1)
	if err := g.Load([]byte(noHistories)); err != nil {
		t.Fatal(err)
	}
	if g.WatchFloor() != h.idx {
		t.Fatalf("watch floor of a snapshot without histories: %d, want its applied index %d", g.WatchFloor(), h.idx)
	}
}

// A restore replaces the state from a backup: every watcher from before
// it (its index below the restore's floor) is answered a reset, the
// restored state, and an index at or above the floor, never lower than
// its own.
func TestPrefixWatchResetsAcrossARestore(t *testing.T) {
	h := newHarness(t)
	h.open("s", 0)
	h.must(StatusGranted, acqCmd("a/1", "s", "h", Exclusive, false))
	backup := h.f.Dump()
	h.must(StatusOK, relCmd("a/1", "s", "h"))
	h.must(StatusGranted, acqCmd("a/2", "s", "h", Exclusive, false))
	watcherAt := h.idx
	const floor = 1000
	out, _, err := PrepareRestore(backup, floor, h.f)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.f.Load(out); err != nil {
		t.Fatal(err)
	}
	locks, reset, applied := changedSince(h.f, "a/", watcherAt)
	if want := h.f.Locks("a/"); !reset || applied < floor || !reflect.DeepEqual(locks, want) {
		t.Fatalf("watch from before the restore: %+v reset %v at %d; want the restored state %+v, reset, at ≥ %d", locks, reset, applied, want, floor)
	}
	if _, reset, _ := changedSince(h.f, "a/", applied); reset {
		t.Fatal("a watcher from after the restore reset")
	}
}

// BenchmarkLocksChangedSince: what one woken prefix watch costs the node
// (one scan of the stored locks and the free histories), with 10,000
// locks held under other prefixes and 4,000 free histories, for a watch
// whose prefix had one change.
func BenchmarkLocksChangedSince(b *testing.B) {
	h := newHarness(b)
	h.open("s", 0)
	for i := 0; i < 10_000; i++ {
		h.must(StatusGranted, acqCmd(fmt.Sprintf("held/%05d", i), "s", "h", Exclusive, false))
	}
	for i := 0; i < 4_000; i++ {
		h.must(StatusGranted, acqCmd(fmt.Sprintf("freed/%05d", i), "s", "h", Exclusive, false))
		h.must(StatusOK, relCmd(fmt.Sprintf("freed/%05d", i), "s", "h"))
	}
	at := h.idx
	h.must(StatusGranted, acqCmd("watched/a", "s", "h", Exclusive, false))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if locks, reset, _ := changedSince(h.f, "watched/", at); reset || len(locks) != 1 {
			b.Fatalf("%d locks, reset %v", len(locks), reset)
		}
	}
}

// changedSince is LocksChangedSince without a bound in bytes, as the
// three values the tests read.
func changedSince(f *FSM, prefix string, index uint64) ([]Lock, bool, uint64) {
	c := f.LocksChangedSince(prefix, index, unboundedAnswers)
	return c.Locks, c.Reset, c.Index
}
