//go:build raftlock_faults

package node

// Faults are deliberate bugs, for testing the fault checker: they exist
// only in a build with -tags raftlock_faults.
type Faults struct {
	// SkipLockDelay ends every lock-delay as soon as it starts.
	SkipLockDelay bool
	// LocalReads answers reads from the local replica without confirming
	// leadership (stale reads on followers and on deposed leaders).
	LocalReads bool
	// RevokeWithoutNotice lets an operator's revocation (a restore into the
	// running cluster, a token deletion) free the revoked grants at once,
	// without waiting for their holders to learn of it: every lock-delay
	// running after such an action ends at once (DESIGN.md, "Server
	// actions never outrun the holder").
	RevokeWithoutNotice bool
	// ExtraSlot grants a semaphore one slot more than its permits (an
	// off-by-one in the slot count): the leader proposes permits + 1 and
	// answers the permits asked for.
	ExtraSlot bool
	// WatchDropsChanges leaves out the first lock of every prefix watch
	// answer that is not a reset, while its index moves on: a change the
	// watcher never sees.
	WatchDropsChanges bool
	// RevokeSlotEarly frees a revoked semaphore slot at once: the leader
	// ends the slot's delay as soon as the revocation's entry applies, so
	// a waiter can be granted the slot while the revoked holder's client
	// still trusts it (the bug issue 39 fixed, when the revocation delayed
	// the plain lock instead of the slot). A revoked plain lock keeps its
	// delay.
	RevokeSlotEarly bool
}

// Any reports whether any fault is enabled.
func (f Faults) Any() bool {
	return f.SkipLockDelay || f.LocalReads || f.RevokeWithoutNotice || f.ExtraSlot || f.WatchDropsChanges || f.RevokeSlotEarly
}

func (f Faults) skipLockDelay() bool       { return f.SkipLockDelay }
func (f Faults) localReads() bool          { return f.LocalReads }
func (f Faults) revokeWithoutNotice() bool { return f.RevokeWithoutNotice }
func (f Faults) extraSlot() bool           { return f.ExtraSlot }
func (f Faults) watchDropsChanges() bool   { return f.WatchDropsChanges }
func (f Faults) revokeSlotEarly() bool     { return f.RevokeSlotEarly }
