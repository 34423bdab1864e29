package fsm

import "slices"

// RevokeGrant takes one grant away from its holder (an operator's
// revocation, or the end of a hold limit): the grant named by its lock,
// session, holder id and token. A grant that is no longer held (released,
// expired, re-granted) is not found (StatusNotHolder) and nothing changes,
// so a stale or repeated revocation never takes a later grant.
type RevokeGrant struct {
	Lock    string `json:"lock"`
	Session string `json:"session"`
	Holder  string `json:"holder"`
	Token   uint64 `json:"token"`
	// Kind says who revoked: RevokeKindAdmin or RevokeKindMaxHold.
	Kind string `json:"kind"`
	// Reason is the operator's reason (api.MaxRevokeReasonBytes).
	Reason string `json:"reason,omitempty"`
	// By is the id of the ACL token that asked for it (empty with ACLs
	// off, or for a hold limit): for the log line, never a secret.
	By string `json:"by,omitempty"`
}

// RevokeSession ends a session as revoked (an operator closing it by its
// handle): as a deleted token's sessions end, each lock it held waits out
// its ttl + lock-delay, and its client learns at its next request that
// the session is gone.
type RevokeSession struct {
	ID     string `json:"id"`
	Reason string `json:"reason,omitempty"`
	By     string `json:"by,omitempty"`
}

// Kinds of revocation (RevokeGrant.Kind).
const (
	RevokeKindAdmin   = "admin"
	RevokeKindMaxHold = "max_hold"
)

// Revocation is a grant revoked while its lock's delay (on a semaphore:
// its slot's delay) runs: kept on the lock (Lock.Revoked) until that delay
// ends, so that every keepalive its session's client has answered until
// then names it (FSM.Revoked). A client whose keepalives are all answered
// before the revocation loses the lock by its lease end + lock-delay
// anyway, which is before the delay ends; any keepalive answered later
// tells it. So the client's Lost() always closes before the lock (the
// slot) can be granted again.
type Revocation struct {
	Session string `json:"session"`
	Holder  string `json:"holder"`
	Token   uint64 `json:"token"`
	Kind    string `json:"kind"`
	Reason  string `json:"reason,omitempty"`
	// Slot is the semaphore slot the grant held, whose delay ends the
	// revocation (0 on a plain lock).
	Slot uint64 `json:"slot,omitempty"`
}

// RevokedGrant is a revocation as its session's keepalive answer names
// it: the lock, the holder id, the token and why.
type RevokedGrant struct {
	Lock   string
	Holder string
	Token  uint64
	Kind   string
	Reason string
}

// revoke applies a RevokeGrant: the grant ends at once (its sequencer is
// no longer valid), its session stays open, and the lock (for a
// semaphore: its slot alone, the other slots staying grantable) stays
// unavailable for the session's ttl + lock-delay, the longest its client
// can go on believing it holds it (DESIGN.md, "Server actions never
// outrun the holder"). No waiter is granted the revoked lock or slot by
// this entry.
func (f *FSM) revoke(index uint64, c *RevokeGrant) Status {
	if c.Lock == "" || c.Session == "" || c.Holder == "" || c.Token == 0 {
		return StatusInvalid
	}
	s, ok := f.sessions[c.Session]
	l := f.locks[c.Lock]
	if !ok || l == nil {
		return StatusNotHolder
	}
	i := slices.IndexFunc(l.Holders, func(h Holder) bool {
		return h.Session == c.Session && h.Holder == c.Holder && h.Token == c.Token
	})
	if i < 0 {
		return StatusNotHolder
	}
	h := l.Holders[i]
	l.Holders = append(l.Holders[:i:i], l.Holders[i+1:]...)
	f.count(s, -1, 0)
	f.forget(l, c.Session)
	l.Revoked = append(l.Revoked, Revocation{Session: c.Session, Holder: c.Holder, Token: c.Token, Kind: c.Kind, Reason: c.Reason,
		Slot: h.Slot})
	s.Revoked = append(s.Revoked, RevokedGrant{Lock: c.Lock, Holder: c.Holder, Token: c.Token, Kind: c.Kind, Reason: c.Reason})
	f.emit(Event{Kind: EventRevoked, Lock: l.Name, Session: h.Session, Holder: h.Holder, Token: h.Token, Mode: l.Mode,
		RevokeKind: c.Kind, RevokeReason: c.Reason, By: c.By})
	if d := s.TTL + s.LockDelay; l.Permits > 0 {
		f.delaySlot(l, h.Slot, d)
	} else {
		f.delay(l, d)
	}
	f.changed(index, l)
	return StatusOK
}

// clearRevoked forgets the revocations of l whose delay has ended: on a
// semaphore those of slot, on a plain lock (slot 0) all of them. Every
// client that held them has learnt it, or lost the lock by its lease.
func (f *FSM) clearRevoked(l *Lock, slot uint64) {
	l.Revoked = slices.DeleteFunc(l.Revoked, func(r Revocation) bool {
		if r.Slot != slot {
			return false
		}
		if s := f.sessions[r.Session]; s != nil {
			// (lock, holder id, token) names one grant of the session:
			// two slots granted by one entry share its token.
			s.Revoked = slices.DeleteFunc(s.Revoked, func(g RevokedGrant) bool {
				return g.Lock == l.Name && g.Holder == r.Holder && g.Token == r.Token
			})
			if len(s.Revoked) == 0 {
				s.Revoked = nil
			}
		}
		return true
	})
	if len(l.Revoked) == 0 {
		l.Revoked = nil
	}
}

// Revoked returns the grants of session id revoked while their locks'
// delays still run: what its keepalive answer names (nil: none, the
// common case, read without copying).
func (f *FSM) Revoked(id string) []RevokedGrant {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := f.sessions[id]
	if s == nil || len(s.Revoked) == 0 {
		return nil
	}
	return slices.Clone(s.Revoked)
}
