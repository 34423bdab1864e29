package sequencer

// IsCurrent reports whether sequencer s is still current: the lock s.Name is
// held, in mode s.Mode, by the grant whose token is exactly s.Token. This is
// the server-side check behind the cluster's POST /v1/sequencer/check; a
// resource that cannot keep a Fence asks the cluster instead.
//
// The caller looks the lock up in current (leader-verified) state and passes:
//
//   - held: whether the lock is held in mode s.Mode (false if it is free or
//     held in the other mode);
//   - currentToken: the token of the grant being checked — for an exclusive
//     lock, its holder's token; for a shared lock, the token of the reader
//     whose grant has token s.Token if there is one (any other token
//     otherwise).
//
// A token is the Raft index of the granting entry, so it names exactly one
// grant: an older token means the grant was released or expired, a newer one
// cannot appear in s. A zero token is never current.
func IsCurrent(s Sequencer, currentToken Token, held bool) bool {
	return held && s.Token != 0 && s.Token == currentToken
}

// Validate reports whether s could have come from Parse (a valid name, a
// known mode, a non-zero token): what every fence checks before it looks
// at the marks, for fences kept outside this package (sqlfence). Errors
// wrap ErrMalformed.
func (s Sequencer) Validate() error { return s.validate() }
