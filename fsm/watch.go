package fsm

import (
	"cmp"
	"slices"
	"strings"
)

// Prefix watches (DESIGN.md, "Prefix watches") read the state machine's
// change indexes, as Consul's blocking queries do: every lock record
// carries the index of its last change (Lock.Index), a free lock keeps a
// record (its history, whose Index is the entry that freed it) for as long
// as the bound on free histories allows, and that record is the tombstone
// that tells a watcher the lock went. What the state drops for good (a
// free history pushed out by MaxFreeGrants, a lock freed with no history,
// the whole state at a restore) only raises one index, watchFloor, kept
// in snapshots: a watcher whose last index is below it may have missed a
// change, and re-lists (like etcd's ErrCompacted). The floor is
// deterministic (computed by Apply alone) and costs one integer.

// dropChange records that the state dropped, for good, a change at index
// (f.mu held).
func (f *FSM) dropChange(index uint64) {
	f.watchFloor = max(f.watchFloor, index)
}

// LocksChangedSince answers a prefix watch at index: the locks whose
// names start with prefix and whose last change is above index, in the
// order of those changes (then by name), free ones included (the record a
// freed lock left: no holders, no waiters). reset is true when index is 0
// or below the watch floor, the highest change the state may have dropped
// for good: locks is then every lock under prefix (held, waited for or
// delayed), the whole state the watcher must replace its own with.
// applied is the index of the last entry applied, read atomically with
// the rest.
func (f *FSM) LocksChangedSince(prefix string, index uint64) (locks []Lock, reset bool, applied uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	reset = index == 0 || index < f.watchFloor
	locks = []Lock{}
	for name, l := range f.locks {
		if strings.HasPrefix(name, prefix) && (reset || l.Index > index) {
			locks = append(locks, copyLock(l))
		}
	}
	if !reset {
		for e := f.free.Front(); e != nil; e = e.Next() {
			if l := e.Value.(*Lock); l.Index > index && strings.HasPrefix(l.Name, prefix) {
				locks = append(locks, copyLock(l))
			}
		}
	}
	slices.SortFunc(locks, func(a, b Lock) int {
		return cmp.Or(cmp.Compare(a.Index, b.Index), strings.Compare(a.Name, b.Name))
	})
	return locks, reset, f.applied
}

// WatchFloor returns the highest change index the state may have dropped
// for good (see LocksChangedSince).
func (f *FSM) WatchFloor() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.watchFloor
}
