package fsm

// HasToken reports whether the ACL token id exists (was created and not
// deleted). Tokens never change: a token that exists has the rules it was
// created with.
func (f *FSM) HasToken(id string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, ok := f.tokens[id]
	return ok
}
