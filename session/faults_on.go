//go:build raftlock_faults

package session

// faults are deliberate bugs, for testing the fault checker: they exist
// only in a build with -tags raftlock_faults.
type faults struct {
	// trustLate trusts every grant, however late its answer came
	// (UnsafeTrustLateGrants).
	trustLate bool
}

func (f faults) trustLateGrants() bool { return f.trustLate }

// UnsafeTrustLateGrants makes the session trust a grant whose answer came
// LostAfter(ttl, lock-delay) or more after its request was sent, instead
// of asking again: a revocation of that grant may have come and gone from
// the keepalive answers meanwhile, so its Lock's Lost() may stay open
// after the lock was granted to another. It breaks the client's promise on
// purpose, so that the fault checker can show that it notices; never use
// it in production. It exists only in a build with -tags raftlock_faults.
func UnsafeTrustLateGrants() Option {
	return func(c *sessionConfig) { c.faults.trustLate = true }
}
