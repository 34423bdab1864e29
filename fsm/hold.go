package fsm

import (
	"sort"
)

// Hold is a cluster-wide pause of grants, set by a restore into a brand-new
// cluster (raftlockd --restore): that cluster cannot know which locks the
// old one granted after the backup, nor to whom, so no lock is granted
// until every client of the old cluster has either been told or reached
// the end of its lease plus its lock-delay. Acquires find every lock busy
// (a wait keeps its place) until an EndHold entry ends it. Like a
// lock-delay, Until (the stamped wall clock of the restore plus For) names
// it, and For is its length, timed by the leader on its own monotonic
// clock and again in full by every new leader.
type Hold struct {
	Until int64 `json:"until"`
	For   int64 `json:"for"`
}

// endHold ends the restore hold if it is still the one that ends at
// c.Until, and grants the waiters it held back, lock by lock in name order.
func (f *FSM) endHold(index uint64, c *EndHold) {
	if f.hold == nil || f.hold.Until != c.Until {
		return // ended already
	}
	f.hold = nil
	names := make([]string, 0, len(f.locks))
	for name, l := range f.locks {
		if len(l.Waiters) > 0 {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		f.changed(index, f.locks[name])
	}
	f.emit(Event{Kind: EventHoldEnded, Index: index})
}

// Hold returns the restore hold, if one runs.
func (f *FSM) Hold() (Hold, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.hold == nil {
		return Hold{}, false
	}
	return *f.hold, true
}
