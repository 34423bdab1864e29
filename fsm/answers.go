package fsm

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"strings"
)

// Reads that answer many locks (a listing page, a prefix watch) are
// bounded in bytes as well as in locks (issue 40: a prefix of 5,000 locks
// with 4 KB values made each answer 40 MiB, and 80 at once took the
// leader past 4 GB). One lock can carry a 4 KB value per holder and a
// history of MaxGrantHistory grants with a value each, so a count alone
// does not bound an answer. The bound is counted by LockBytes, under the
// state's read lock, before anything is copied: an answer copies at most
// its bound (and one lock past it when that lock alone is over it).

// Allowances of LockBytes for what an answer adds to a record's text:
// field names, numbers, times, the session's handle and name a holder is
// shown with (MaxSessionNameBytes 256 in package api).
const (
	lockAllowance    = 256
	holderAllowance  = 512
	waiterAllowance  = 64
	grantAllowance   = 192
	delayAllowance   = 64
	unboundedAnswers = math.MaxInt
)

// LockBytes is the size an answer counts for lock l: the text it carries
// (name, holder ids, values, session names) plus a fixed allowance per
// record for the rest (field names, numbers, session handles). For text
// JSON does not escape it is at least the lock's JSON in an answer.
func LockBytes(l *Lock) int {
	n := lockAllowance + len(l.Name)
	for _, h := range l.Holders {
		n += holderAllowance + len(h.Holder) + len(h.Value)
	}
	for _, w := range l.Waiters {
		n += waiterAllowance + len(w.Holder)
	}
	for _, g := range l.Grants {
		n += grantAllowance + len(g.Holder) + len(g.Value) + len(g.SessionName)
	}
	return n + delayAllowance*len(l.SlotDelays)
}

// pageFits tells whether a page of n locks holding used bytes (LockBytes)
// takes one more of size bytes under maxBytes: always the first lock.
func pageFits(n, used, size, maxBytes int) bool {
	return n == 0 || used+size <= maxBytes
}

// LocksPage returns copies of locks whose names start with prefix and sort
// after after, in name order: at most limit, and no more than fit in
// maxBytes (LockBytes; always one, even over it), and the cursor of the
// next page: the last name returned when more follow, else "".
func (f *FSM) LocksPage(prefix, after string, limit, maxBytes int) ([]Lock, string) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.pageByName(prefix, after, limit, maxBytes, func(*Lock) bool { return true })
}

// pageByName pages the locks under prefix named after after that keep
// says to (f.mu held).
func (f *FSM) pageByName(prefix, after string, limit, maxBytes int, keep func(*Lock) bool) ([]Lock, string) {
	names := []string{}
	for name, l := range f.locks {
		if name > after && strings.HasPrefix(name, prefix) && keep(l) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	out, used := []Lock{}, 0
	for i, name := range names {
		l := f.locks[name]
		size := LockBytes(l)
		if len(out) == limit || !pageFits(len(out), used, size, maxBytes) {
			return out, names[i-1]
		}
		out, used = append(out, copyLock(l)), used+size
	}
	return out, ""
}

// Changes answers a prefix watch (LocksChangedSince).
type Changes struct {
	// Locks are the locks answered: without Reset, the locks changed since
	// the watcher's index in the order of those changes (then by name);
	// with Reset, a page of the whole state under the prefix, by name.
	Locks []Lock
	// Reset says Locks is (a page of) the whole state.
	Reset bool
	// Next, on a reset cut by its bound, is the last name answered: the
	// rest of the reset is ResetPage(prefix, Next, Index, ...).
	Next string
	// Index is what the watcher passes next: the applied index the
	// answer was read at, or, when a change answer was cut by its bound,
	// the index of the last change answered (the rest follow above it).
	Index uint64
}

// LocksChangedSince answers a prefix watch at index, within maxBytes
// (LockBytes): the locks whose names start with prefix and whose last
// change is above index, in the order of those changes (then by name),
// free ones included (the record a freed lock left: no holders, no
// waiters). An answer over maxBytes stops after the last change index
// that fits, whole (the locks one entry changed are never split; the
// first index is answered whole even over maxBytes), and its Index is
// that change's. The answer is a reset when index is 0 or below the watch
// floor, the highest change the state may have dropped for good: Locks
// is then the whole state under prefix (held, waited for or delayed) in
// name order, cut at maxBytes with Next set, the rest read with
// ResetPage. Index is otherwise the index of the last entry applied, read
// atomically with the rest.
func (f *FSM) LocksChangedSince(prefix string, index uint64, maxBytes int) Changes {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if index == 0 || index < f.watchFloor {
		ls, next := f.pageByName(prefix, "", unboundedAnswers, maxBytes, func(*Lock) bool { return true })
		return Changes{Locks: ls, Reset: true, Next: next, Index: f.applied}
	}
	changed := []*Lock{}
	for name, l := range f.locks {
		if l.Index > index && strings.HasPrefix(name, prefix) {
			changed = append(changed, l)
		}
	}
	for e := f.free.Front(); e != nil; e = e.Next() {
		if l := e.Value.(*Lock); l.Index > index && strings.HasPrefix(l.Name, prefix) {
			changed = append(changed, l)
		}
	}
	slices.SortFunc(changed, func(a, b *Lock) int {
		return cmp.Or(cmp.Compare(a.Index, b.Index), strings.Compare(a.Name, b.Name))
	})
	out := Changes{Locks: []Lock{}, Index: f.applied}
	used := 0
	for i := 0; i < len(changed); {
		j, size := i, 0 // changed[i:j] is the group of one change index
		for ; j < len(changed) && changed[j].Index == changed[i].Index; j++ {
			size += LockBytes(changed[j])
		}
		if !pageFits(len(out.Locks), used, size, maxBytes) {
			out.Index = changed[i-1].Index
			break
		}
		for _, l := range changed[i:j] {
			out.Locks = append(out.Locks, copyLock(l))
		}
		used += size
		i = j
	}
	return out
}

// ResetPage reads the rest of a reset read at index (LocksChangedSince's
// Next): the locks under prefix named after after whose last change is
// at or below index, in name order, within maxBytes (LockBytes; at least
// one), and the cursor of the page after it ("" after the last). The
// locks changed above index are left out: they are changes after the
// reset, which the watcher, watching from index next, is answered once.
// The caller has applied index (it waits for it otherwise).
func (f *FSM) ResetPage(prefix, after string, index uint64, maxBytes int) ([]Lock, string) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.pageByName(prefix, after, unboundedAnswers, maxBytes, func(l *Lock) bool { return l.Index <= index })
}
