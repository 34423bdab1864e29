package api

import (
	"time"

	"github.com/raftlock/raftlock/sequencer"
)

// MinMaxHold and MaxMaxHold bound an acquire's hold limit (max_hold).
const (
	MinMaxHold = time.Second
	MaxMaxHold = 24 * time.Hour
)

// MaxRevokeReasonBytes bounds the reason an operator gives for a
// revocation or a session's closing.
const MaxRevokeReasonBytes = 256

// KeepAliveAnswer is what a keepalive answers: the session's ttl, and the
// grants of the session revoked while their locks' delays run (DESIGN.md,
// "Revocation"). A client that holds one of them has lost it.
type KeepAliveAnswer struct {
	TTL     time.Duration
	Revoked []RevokedGrant
	// ReleaseRequested names the session's grants whose release another
	// session asked for (POST /v1/locks/request-release).
	ReleaseRequested []ReleaseRequestedGrant
}

// RevokedGrant names one revoked grant of a session: the lock, the holder
// id and the token, and why ("admin": an operator, whose Reason it
// carries; "max_hold": the grant's hold limit ran out).
type RevokedGrant struct {
	Name   string
	Holder string
	Token  sequencer.Token
	Kind   string
	Reason string
}

// RevokeRequest asks to revoke one grant of lock Name: the one of holder
// id Holder, or of the session whose handle is SessionHandle (at least one
// of them; both must match when both are given), with a Reason (1 to
// MaxRevokeReasonBytes).
type RevokeRequest struct {
	Name          string
	Holder        string
	SessionHandle string
	Reason        string
}

// Check validates the request.
func (r RevokeRequest) Check() error {
	if err := ValidateLockName(r.Name); err != nil {
		return err
	}
	if r.Holder == "" && r.SessionHandle == "" {
		return Errorf(CodeInvalidArgument, "name the grant to revoke: holder or session_handle")
	}
	if err := CheckText("holder", r.Holder, 0, MaxHolderBytes); err != nil {
		return err
	}
	if err := CheckSessionHandle(r.SessionHandle, true); err != nil {
		return err
	}
	return CheckText("reason", r.Reason, 1, MaxRevokeReasonBytes)
}

// CheckSessionHandle checks a session handle: SessionHandleLen lowercase
// hex digits (empty only when optional).
func CheckSessionHandle(h string, optional bool) error {
	if h == "" && optional {
		return nil
	}
	if len(h) != SessionHandleLen {
		return Errorf(CodeInvalidArgument, "session_handle %q: want %d hex digits", sanitize(h), SessionHandleLen)
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return Errorf(CodeInvalidArgument, "session_handle %q: want %d lowercase hex digits", sanitize(h), SessionHandleLen)
		}
	}
	return nil
}

// sanitize bounds a string quoted back in an error message.
func sanitize(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// Revocation is what a revocation did: the grant it ended, and how long
// the lock (for a semaphore, the slot) stays unavailable: the holder's
// session ttl + lock-delay.
type Revocation struct {
	Name          string
	Holder        string
	SessionHandle string
	SessionName   string
	Token         sequencer.Token
	Unavailable   time.Duration
}

// RevokeBody is the body of POST /v1/locks/revoke.
type RevokeBody struct {
	Name          string `json:"name"`
	Holder        string `json:"holder,omitempty"`
	SessionHandle string `json:"session_handle,omitempty"`
	Reason        string `json:"reason"`
}

// RevokeReply answers POST /v1/locks/revoke.
type RevokeReply struct {
	Revoked       bool   `json:"revoked"`
	Name          string `json:"name"`
	Holder        string `json:"holder"`
	SessionHandle string `json:"session_handle"`
	SessionName   string `json:"session_name,omitempty"`
	Token         uint64 `json:"token"`
	// Unavailable is how long the lock stays unavailable (a duration).
	Unavailable string `json:"unavailable_for"`
}

// RevokedReply is one revoked grant in a keepalive's answer.
type RevokedReply struct {
	Name   string `json:"name"`
	Holder string `json:"holder"`
	Token  uint64 `json:"token"`
	Kind   string `json:"kind"`
	Reason string `json:"reason,omitempty"`
}

// NewKeepAliveReply is the wire form of a keepalive's answer.
func NewKeepAliveReply(a KeepAliveAnswer) KeepAliveReply {
	r := KeepAliveReply{TTL: a.TTL.String()}
	for _, g := range a.Revoked {
		r.Revoked = append(r.Revoked, RevokedReply{Name: g.Name, Holder: g.Holder, Token: uint64(g.Token), Kind: g.Kind, Reason: g.Reason})
	}
	for _, g := range a.ReleaseRequested {
		r.ReleaseRequested = append(r.ReleaseRequested, ReleaseRequestedReply{Name: g.Name, Holder: g.Holder, Token: uint64(g.Token),
			BySessionHandle: g.BySessionHandle, BySessionName: g.BySessionName, ByHolder: g.ByHolder, At: g.At.UTC().Format(time.RFC3339Nano)})
	}
	return r
}

// Answer decodes a keepalive's answer.
func (r KeepAliveReply) Answer() (KeepAliveAnswer, error) {
	d, err := ParseWireDuration("ttl", r.TTL)
	if err != nil {
		return KeepAliveAnswer{}, err
	}
	a := KeepAliveAnswer{TTL: d}
	for _, g := range r.Revoked {
		a.Revoked = append(a.Revoked, RevokedGrant{Name: g.Name, Holder: g.Holder, Token: sequencer.Token(g.Token), Kind: g.Kind, Reason: g.Reason})
	}
	for _, g := range r.ReleaseRequested {
		at, _ := time.Parse(time.RFC3339Nano, g.At)
		a.ReleaseRequested = append(a.ReleaseRequested, ReleaseRequestedGrant{Name: g.Name, Holder: g.Holder, Token: sequencer.Token(g.Token),
			BySessionHandle: g.BySessionHandle, BySessionName: g.BySessionName, ByHolder: g.ByHolder, At: at})
	}
	return a, nil
}

// MaxSessionsListed bounds one answer of GET /v1/sessions: the sessions
// beyond it are left out (SessionList.Truncated).
const MaxSessionsListed = 1000

// SessionsQuery selects sessions to list (admin): by exact Name, by
// Handle, or all (both empty).
type SessionsQuery struct {
	Name   string
	Handle string
}

// Check validates the query.
func (q SessionsQuery) Check() error {
	if err := CheckText("name", q.Name, 0, MaxSessionNameBytes); err != nil {
		return err
	}
	return CheckSessionHandle(q.Handle, true)
}

// CloseByHandleRequest asks to close a session by its handle (admin), with
// a Reason (1 to MaxRevokeReasonBytes).
type CloseByHandleRequest struct {
	Handle string
	Reason string
}

// Check validates the request.
func (r CloseByHandleRequest) Check() error {
	if err := CheckSessionHandle(r.Handle, false); err != nil {
		return err
	}
	return CheckText("reason", r.Reason, 1, MaxRevokeReasonBytes)
}

// SessionsReply answers GET /v1/sessions: the sessions, sorted by
// handle (overview's SessionSummary), at most MaxSessionsListed of them
// (Truncated: more matched).
type SessionsReply struct {
	Sessions  []SessionSummary `json:"sessions"`
	Truncated bool             `json:"truncated,omitempty"`
}

// CloseByHandleBody is the body of POST /v1/sessions/close-by-handle.
type CloseByHandleBody struct {
	Handle string `json:"handle"`
	Reason string `json:"reason"`
}

// CloseByHandleReply answers POST /v1/sessions/close-by-handle: the
// session's locks stay unavailable for its ttl + lock-delay.
type CloseByHandleReply struct {
	Closed      bool     `json:"closed"`
	Handle      string   `json:"handle"`
	Name        string   `json:"name,omitempty"`
	Locks       []string `json:"locks"`
	Unavailable string   `json:"unavailable_for"`
}

// ClosedSession is what closing a session by handle did.
type ClosedSession struct {
	Handle      string
	Name        string
	Locks       []string
	Unavailable time.Duration
}

// ReleaseRequestedGrant names one grant of a session whose release
// another session asked for (a keepalive's answer): the lock, the holder
// id and token, who asked (by handle and name, never the id) and when.
type ReleaseRequestedGrant struct {
	Name            string
	Holder          string
	Token           sequencer.Token
	BySessionHandle string
	BySessionName   string
	ByHolder        string
	At              time.Time
}

// ReleaseRequestedReply is one requested release in a keepalive's answer.
type ReleaseRequestedReply struct {
	Name            string `json:"name"`
	Holder          string `json:"holder"`
	Token           uint64 `json:"token"`
	BySessionHandle string `json:"by_session_handle"`
	BySessionName   string `json:"by_session_name,omitempty"`
	ByHolder        string `json:"by_holder"`
	At              string `json:"at"`
}

// RequestReleaseRequest asks the holders of lock Name to release it, on
// behalf of (Session, Holder) (write on the lock).
type RequestReleaseRequest struct {
	Name    string
	Session string
	Holder  string
}

// Check validates the request.
func (r RequestReleaseRequest) Check() error { return CheckLockRef(r.Name, r.Session, r.Holder) }

// RequestReleaseBody is the body of POST /v1/locks/request-release.
type RequestReleaseBody struct {
	Name    string `json:"name"`
	Session string `json:"session"`
	Holder  string `json:"holder"`
}

// RequestReleaseReply answers POST /v1/locks/request-release.
type RequestReleaseReply struct {
	Requested bool `json:"requested"`
}
