package main

import (
	"fmt"
	"maps"
	"slices"
)

// A semaphore run (--permits N) takes every lock as a semaphore of N
// slots. Each slot is fenced, delayed and handed over like a lock of its
// own (docs/DESIGN.md, "Semaphores"), so the checks that judge one
// exclusive lock judge each slot: perSlot rewrites the history so that
// slot S of lock L is the lock "L#S" (its grants, releases, holds, writes
// and the reads of it), and fencing, acknowledged grants kept and Lost()
// before re-grant run on that. On top, checkSlots judges the semaphore's
// bound: at most N writers accepted at any time. The per-slot checks make
// each slot's accepted writers one after another (no write of a stale
// holder after the slot's next grant, per-slot tokens increasing), so
// the writers at any moment are at most one per slot; checkSlots checks
// that every grant and every accepted write is of a slot below N, and
// counts the slots with a current writer as the resource saw them.
// Linearizability is judged on the whole semaphore, not per slot (an
// acquire of unknown outcome may take any slot, which a per-slot model
// cannot place): the semaphore model, model_sem.go. So are the queue
// checks (one FIFO queue per semaphore): queuechecks_sem.go.

// checkSlotBound names the semaphore's bound check.
const checkSlotBound = "semaphore-slots"

// slotLock names slot of semaphore lock as a lock of its own.
func slotLock(lock string, slot uint64) string { return fmt.Sprintf("%s#%d", lock, slot) }

// perSlot rewrites a semaphore run's history h into one of per-slot locks
// (see above). Acquires that were not granted change no slot and are
// left out, as are releases and holds of grants never acknowledged (their
// slot is unknown); each read becomes one read per slot, naming that
// slot's holder.
func perSlot(h History) History {
	type key struct{ s, h, l string }
	type tokKey struct {
		l   string
		tok uint64
	}
	slotOf := map[key]uint64{}
	slotOfTok := map[tokKey]uint64{}
	for _, o := range h.Ops {
		if o.Kind == kindAcquire && o.Result == resOK {
			slotOf[key{o.Session, o.Holder, o.Lock}] = o.Slot
			slotOfTok[tokKey{o.Lock, o.Token}] = o.Slot
		}
	}
	out := h
	out.Ops = make([]Op, 0, len(h.Ops))
	for _, o := range h.Ops {
		switch o.Kind {
		case kindAcquire:
			if o.Result != resOK {
				continue
			}
			o.Lock = slotLock(o.Lock, o.Slot)
		case kindRelease:
			s, ok := slotOf[key{o.Session, o.Holder, o.Lock}]
			if !ok {
				continue
			}
			o.Lock = slotLock(o.Lock, s)
		case kindRead:
			if o.Result != resOK || !o.Done() {
				continue
			}
			for s := range uint64(h.Permits) {
				r := o
				r.Lock, r.Holders, r.Queue = slotLock(o.Lock, s), nil, nil
				for _, hd := range o.Holders {
					if hd.Slot == s {
						hd.Slot = 0
						r.Holders = append(r.Holders, hd)
					}
				}
				out.Ops = append(out.Ops, r)
			}
			continue
		}
		out.Ops = append(out.Ops, o)
	}
	out.Writes = make([]WriteRec, 0, len(h.Writes))
	for _, w := range h.Writes {
		if w.Semaphore {
			w.Lock = slotLock(w.Lock, w.Slot)
		}
		out.Writes = append(out.Writes, w)
	}
	out.Holds = make([]HoldRec, 0, len(h.Holds))
	for _, hd := range h.Holds {
		hd.Lock = slotLock(hd.Lock, hd.Slot)
		out.Holds = append(out.Holds, hd)
	}
	out.Faults = make([]FaultRec, 0, len(h.Faults))
	for _, f := range h.Faults {
		if s, ok := slotOfTok[tokKey{f.Lock, f.Token}]; ok && f.Lock != "" {
			f.Lock = slotLock(f.Lock, s)
		}
		out.Faults = append(out.Faults, f)
	}
	return out
}

// checkSlots checks a semaphore run's bound (see above): every
// acknowledged grant and every accepted write is of a slot below the
// permits, every accepted write carries a slot sequencer, and the slots
// with a current writer never number more than the permits. It returns
// the violations and how many accepted writes it judged.
func checkSlots(h History) ([]Violation, int) {
	var vs []Violation
	n := uint64(h.Permits)
	for _, o := range h.Ops {
		if o.Kind == kindAcquire && o.Result == resOK && o.Slot >= n {
			vs = append(vs, Violation{Check: checkSlotBound, At: o.Return, Client: o.Client,
				What: fmt.Sprintf("lock %s: client %d was granted slot %d (token %d) of a semaphore of %d permits: more holders than permits",
					o.Lock, o.Client, o.Slot, o.Token, n)})
		}
	}
	type writer struct {
		s, h string
		tok  uint64
	}
	current := map[string]map[uint64]writer{} // lock -> slot -> its last accepted writer
	judged := 0
	for _, w := range h.Writes {
		if !w.Accepted {
			continue
		}
		judged++
		switch {
		case !w.Semaphore:
			vs = append(vs, Violation{Check: checkSlotBound, At: w.At, Client: w.Client,
				What: fmt.Sprintf("lock %s: client %d's write with token %d was accepted without a slot sequencer, in a semaphore run", w.Lock, w.Client, w.Token)})
			continue
		case w.Slot >= n:
			vs = append(vs, Violation{Check: checkSlotBound, At: w.At, Client: w.Client,
				What: fmt.Sprintf("lock %s: client %d's write in slot %d (token %d) was accepted: a semaphore of %d permits has no such slot", w.Lock, w.Client, w.Slot, w.Token, n)})
		}
		if current[w.Lock] == nil {
			current[w.Lock] = map[uint64]writer{}
		}
		_, known := current[w.Lock][w.Slot]
		current[w.Lock][w.Slot] = writer{w.Session, w.Holder, w.Token}
		if c := current[w.Lock]; !known && uint64(len(c)) > n { // reported once per slot too many
			vs = append(vs, Violation{Check: checkSlotBound, At: w.At, Client: w.Client,
				What: fmt.Sprintf("lock %s: %d writers accepted at once (slots %v) in a semaphore of %d permits", w.Lock, len(c), slices.Sorted(maps.Keys(c)), n)})
		}
	}
	return vs, judged
}

// semaphoreChecks are quickChecks for a semaphore run.
func semaphoreChecks(h History) []Violation {
	vs, _ := checkSlots(h)
	ps := perSlot(h)
	gv, _ := checkGrantsKept(ps)
	lv, _ := checkLostBeforeRegrant(ps)
	qv, _ := checkSemQueueOrder(h)
	nv, _ := checkNoGhostGrant(h)
	vs = append(append(append(vs, checkFence(ps)...), gv...), lv...)
	return append(append(append(vs, checkSessionsKept(h)...), qv...), nv...)
}
