//go:build !raftlock_faults

package session

// faults are the deliberate bugs of a client built for testing the fault
// checker; this, the default build, has none (faults_on.go, with -tags
// raftlock_faults, has them).
type faults struct{}

func (faults) trustLateGrants() bool { return false }
