package fsm

import "slices"

// RequestRelease asks the holders of a lock to release it (Chubby's
// conflicting-lock event, Curator's revocation request): the grant is
// marked (Holder.ReleaseRequested) until it ends, and its holder sees it
// at its keepalives; the holder chooses. Session and Holder name the
// asker (a waiter, or any session with write on the lock).
type RequestRelease struct {
	Lock    string `json:"lock"`
	Session string `json:"session"`
	Holder  string `json:"holder"`
}

// ReleaseRequest is who asked a grant's holder to release, and when (the
// state machine's clock).
type ReleaseRequest struct {
	Session string `json:"session"`
	Holder  string `json:"holder"`
	At      int64  `json:"at"`
}

// RequestedRelease is a grant of a session whose release was requested,
// as its keepalive answers name it.
type RequestedRelease struct {
	Lock    string
	Holder  string
	Token   uint64
	Request ReleaseRequest
}

// requestRelease marks every grant of the lock but the asker's own as
// asked to release (the first request stays). A lock not held is
// StatusNotHolder, an unknown asker StatusSessionNotFound; neither
// changes anything.
func (f *FSM) requestRelease(index uint64, c *RequestRelease) Status {
	if c.Lock == "" || c.Session == "" || c.Holder == "" {
		return StatusInvalid
	}
	if _, ok := f.sessions[c.Session]; !ok {
		return StatusSessionNotFound
	}
	l := f.locks[c.Lock]
	if l == nil || len(l.Holders) == 0 {
		return StatusNotHolder
	}
	for i := range l.Holders {
		h := &l.Holders[i]
		if (h.Session == c.Session && h.Holder == c.Holder) || h.ReleaseRequested != nil {
			continue
		}
		h.ReleaseRequested = &ReleaseRequest{Session: c.Session, Holder: c.Holder, At: f.now}
		f.emit(Event{Kind: EventReleaseRequested, Lock: l.Name, Session: h.Session, Holder: h.Holder, Token: h.Token})
	}
	f.changed(index, l)
	return StatusOK
}

// ReleaseRequests returns the grants of session id whose release was
// requested (nil: none). It looks at the session's locks only.
func (f *FSM) ReleaseRequests(id string) []RequestedRelease {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.releaseRequestsLocked(id)
}

// KeepAliveNews returns what a keepalive of session id answers besides
// its ttl, read at once: its revoked grants (Revoked) and the grants
// whose release was requested (ReleaseRequests). Both nil, the common
// case, without allocating.
func (f *FSM) KeepAliveNews(id string) ([]RevokedGrant, []RequestedRelease) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := f.sessions[id]
	if s == nil {
		return nil, nil
	}
	var revoked []RevokedGrant
	if len(s.Revoked) > 0 {
		revoked = slices.Clone(s.Revoked)
	}
	return revoked, f.releaseRequestsLocked(id)
}

func (f *FSM) releaseRequestsLocked(id string) []RequestedRelease {
	s := f.sessions[id]
	if s == nil {
		return nil
	}
	var out []RequestedRelease
	for name := range s.Locks {
		l := f.locks[name]
		if l == nil {
			continue
		}
		for _, h := range l.Holders {
			if h.Session == id && h.ReleaseRequested != nil {
				out = append(out, RequestedRelease{Lock: name, Holder: h.Holder, Token: h.Token, Request: *h.ReleaseRequested})
			}
		}
	}
	return out
}
