package fsm

import (
	"slices"
	"sort"
)

// aclBootstrap creates the management token, once per cluster.
func (f *FSM) aclBootstrap(index uint64, t *Token) Status {
	if f.bootstrapped {
		return StatusAlreadyBootstrapped
	}
	st := f.createToken(t)
	if st == StatusOK {
		f.bootstrapped, f.bootstrapIndex = true, index
	}
	return st
}

// aclBootstrapReset bootstraps once more, only with the current reset
// index: a reset file left behind never allows a second one.
func (f *FSM) aclBootstrapReset(index uint64, c *ACLBootstrapReset) Status {
	if f.bootstrapped && c.ResetIndex != f.bootstrapIndex {
		return StatusAlreadyBootstrapped
	}
	st := f.createToken(&c.Token)
	if st == StatusOK {
		f.bootstrapped, f.bootstrapIndex = true, index
	}
	return st
}

func (f *FSM) createToken(t *Token) Status {
	if t.ID == "" || t.Hash == "" || len(t.Rules) == 0 {
		return StatusInvalid
	}
	if _, ok := f.tokens[t.ID]; ok {
		return StatusTokenExists
	}
	if _, ok := f.byHash[t.Hash]; ok {
		return StatusTokenExists
	}
	tok := *t
	tok.Rules = slices.Clone(t.Rules)
	tok.Created = f.now
	f.tokens[tok.ID], f.byHash[tok.Hash] = &tok, &tok
	return StatusOK
}

// deleteToken deletes a token and ends its sessions, in session id order,
// as revoked (endRevoke): their clients cannot keep them alive any more,
// but each may hold a lease for up to its ttl and believe it holds its
// locks until its lock-delay has passed too, so the locks wait that out.
func (f *FSM) deleteToken(index uint64, id string) Status {
	t, ok := f.tokens[id]
	if !ok {
		return StatusTokenNotFound
	}
	delete(f.tokens, id)
	delete(f.byHash, t.Hash)
	var owned []string
	for sid, s := range f.sessions {
		if s.Owner == id {
			owned = append(owned, sid)
		}
	}
	sort.Strings(owned)
	for _, sid := range owned {
		f.removeSession(index, sid, endRevoke)
	}
	return StatusOK
}

// TokenByHash returns the token whose secret hashes to hash.
func (f *FSM) TokenByHash(hash string) (Token, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t, ok := f.byHash[hash]
	if !ok {
		return Token{}, false
	}
	out := *t
	out.Rules = slices.Clone(t.Rules)
	return out, true
}

// Tokens returns the ACL tokens, by id.
func (f *FSM) Tokens() []Token {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]Token, 0, len(f.tokens))
	for _, t := range f.tokens {
		c := *t
		c.Rules = slices.Clone(t.Rules)
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// ACLBootstrapResetIndex is the reset index of the ACL bootstrap: the log
// index of the last bootstrap (0 if none, or if the state comes from a
// snapshot written before it was kept).
func (f *FSM) ACLBootstrapResetIndex() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.bootstrapIndex
}

// ACLBootstrapped reports whether the management token was created.
func (f *FSM) ACLBootstrapped() bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.bootstrapped
}

// HasToken reports whether the ACL token id exists (was created and not
// deleted). Tokens never change: a token that exists has the rules it was
// created with.
func (f *FSM) HasToken(id string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, ok := f.tokens[id]
	return ok
}
