//go:build !raftlock_faults

package node

// Faults are the deliberate bugs of a build for testing the fault checker;
// this, the default build, has none. Build with -tags raftlock_faults for
// them (faults_on.go).
type Faults struct{}

// Any reports whether any fault is enabled: never in this build.
func (Faults) Any() bool { return false }

func (Faults) skipLockDelay() bool       { return false }
func (Faults) localReads() bool          { return false }
func (Faults) revokeWithoutNotice() bool { return false }
func (Faults) extraSlot() bool           { return false }
func (Faults) watchDropsChanges() bool   { return false }
func (Faults) revokeSlotEarly() bool     { return false }
