//go:build raftlock_faults

package httpapi

// WithUnsafeLocalReads makes a follower answer reads (session info, lock
// state, lock lists, sequencer checks) itself instead of forwarding them to
// the leader. It breaks linearizability on purpose, so that the fault
// checker can show that it notices; never use it in production. It
// exists only in a build with -tags raftlock_faults.
func WithUnsafeLocalReads() ServerOption {
	return func(s *Server) { s.localReads = true }
}
