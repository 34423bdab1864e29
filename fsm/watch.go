package fsm

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

// WatchFloor returns the highest change index the state may have dropped
// for good (see LocksChangedSince).
func (f *FSM) WatchFloor() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.watchFloor
}
