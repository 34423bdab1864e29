package api

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/raftlock/raftlock/sequencer"
)

// The wire types of the HTTP/JSON API (shared/API.md). The server encodes
// its answers with them, the Client decodes them, and the CLI prints them
// for --json. Durations are Go duration strings ("15s"), tokens JSON
// numbers, sequencers their printable form, times RFC 3339 (nanoseconds).

// Header names of the API.
const (
	// HeaderLeader carries the id of the leader as the answering node sees it.
	HeaderLeader = "X-Raftlock-Leader"
	// HeaderLeaderAddr carries the HTTP address of the leader as the
	// answering node sees it (absent when unknown): clients send their next
	// calls there directly.
	HeaderLeaderAddr = "X-Raftlock-Leader-Addr"
	// HeaderTerm carries the answering node's Raft term.
	HeaderTerm = "X-Raftlock-Term"
	// HeaderMembers carries a digest of the cluster's membership as the
	// answering node sees it (its Raft configuration's servers and their
	// HTTP addresses): a client that sees it change asks GET /v1/cluster
	// for the members, so that it follows a rotation of every member
	// however fast.
	HeaderMembers = "X-Raftlock-Members"
	// HeaderIndex carries a lock answer's index (GET /v1/lock), to pass
	// back as ?index= in the next blocking query.
	HeaderIndex = "X-Raftlock-Index"
	// HeaderForwarded marks a request a follower forwarded to the leader; its
	// value is the follower's view of the leader ("<leader id>@<term>"). A
	// forwarded request is never forwarded again.
	HeaderForwarded = "X-Raftlock-Forwarded"
	// HeaderStreamPort is on every HTTP answer of a node that serves the
	// stream protocol (raftlockd --stream-addr): the port of its stream
	// listener, on the host the client reached the node at.
	HeaderStreamPort = "X-Raftlock-Stream-Port"
)

// MaxBodyBytes bounds a request body; larger bodies get too_large (413).
const MaxBodyBytes = 64 << 10

// OpenSessionBody is the body of POST /v1/sessions. Empty (or absent)
// durations take the defaults; a duration given is taken as it is
// (OpenRequest.Explicit): "ttl":"0s" is refused, "lock_delay":"0s"
// means none.
type OpenSessionBody struct {
	Name      string `json:"name"`
	TTL       string `json:"ttl"`
	LockDelay string `json:"lock_delay"`
}

// OpenSessionReply answers POST /v1/sessions.
type OpenSessionReply struct {
	ID        string `json:"id"`
	TTL       string `json:"ttl"`
	LockDelay string `json:"lock_delay"`
}

// KeepAliveReply answers POST /v1/sessions/{id}/keepalive.
type KeepAliveReply struct {
	TTL string `json:"ttl"`
	// Revoked names the session's grants revoked while their locks'
	// delays run (absent: none).
	Revoked []RevokedReply `json:"revoked,omitempty"`
	// ReleaseRequested names the session's grants whose release another
	// session asked for (absent: none).
	ReleaseRequested []ReleaseRequestedReply `json:"release_requested,omitempty"`
}

// SessionReply answers GET /v1/sessions/{id}.
type SessionReply struct {
	ID        string   `json:"id"`
	Name      string   `json:"name"`
	TTL       string   `json:"ttl"`
	LockDelay string   `json:"lock_delay"`
	Locks     []string `json:"locks"`
}

// CloseReply answers DELETE /v1/sessions/{id}.
type CloseReply struct {
	Closed bool `json:"closed"`
}

// AcquireBody is the body of POST /v1/acquire. Mode "" means exclusive;
// Wait "" or "0s" means try once.
type AcquireBody struct {
	Name    string `json:"name"`
	Session string `json:"session"`
	Holder  string `json:"holder"`
	Mode    string `json:"mode"`
	Wait    string `json:"wait"`
	Value   string `json:"value"`
	// MaxHold is the grant's hold limit (a duration; absent: none).
	MaxHold string `json:"max_hold,omitempty"`
	// Permits (absent: 0, a plain lock) takes a slot of a semaphore.
	Permits uint64 `json:"permits,omitempty"`
}

// GrantReply answers a successful POST /v1/acquire. A semaphore's grant
// carries its permits and slot; a plain lock's has neither.
type GrantReply struct {
	Name      string  `json:"name"`
	Mode      string  `json:"mode"`
	Token     uint64  `json:"token"`
	Sequencer string  `json:"sequencer"`
	Permits   uint64  `json:"permits,omitempty"`
	Slot      *uint64 `json:"slot,omitempty"`
}

// ReleaseBody is the body of POST /v1/release.
type ReleaseBody struct {
	Name    string `json:"name"`
	Session string `json:"session"`
	Holder  string `json:"holder"`
}

// ReleaseReply answers POST /v1/release.
type ReleaseReply struct {
	Released bool `json:"released"`
}

// HolderReply is one holder of a lock. Its session is named by its handle
// (SessionHandle) and its name, never by its id.
type HolderReply struct {
	SessionHandle string `json:"session_handle"`
	SessionName   string `json:"session_name"`
	Holder        string `json:"holder"`
	Token         uint64 `json:"token"`
	Value         string `json:"value"`
	// ReleaseRequested says who asked the holder to release (absent:
	// nobody).
	ReleaseRequested *ReleaseRequestReply `json:"release_requested,omitempty"`
	// Slot is the semaphore slot held (absent on a plain lock).
	Slot *uint64 `json:"slot,omitempty"`
}

// ReleaseRequestReply is who asked a holder to release, and when.
type ReleaseRequestReply struct {
	SessionHandle string `json:"session_handle"`
	SessionName   string `json:"session_name,omitempty"`
	Holder        string `json:"holder"`
	At            string `json:"at"`
}

// SlotDelayReply is one slot of a semaphore in lock-delay.
type SlotDelayReply struct {
	Slot  uint64 `json:"slot"`
	Until string `json:"until"`
}

// LockReply answers GET /v1/lock and is one element of LocksReply. A free
// lock has mode "" and no holders; DelayUntil is "" without a lock-delay.
// Index (an addition to API.md) is the Raft index of the lock's last change.
// Grants is the lock's recent grant history, oldest first, and GrantsSince
// how far back it reaches (LockState); a server from before
// histories sends neither, and an empty history is left out.
type LockReply struct {
	Name        string           `json:"name"`
	Mode        string           `json:"mode"`
	Holders     []HolderReply    `json:"holders"`
	Waiters     int              `json:"waiters"`
	Queue       []QueuedReply    `json:"queue"`
	DelayUntil  string           `json:"delay_until,omitempty"`
	Index       uint64           `json:"index,omitempty"`
	Grants      []PastGrantReply `json:"grants,omitempty"`
	GrantsSince uint64           `json:"grants_since,omitempty"`
	// Permits and SlotDelays: a semaphore's (LockState); absent on a
	// plain lock.
	Permits    uint64           `json:"permits,omitempty"`
	SlotDelays []SlotDelayReply `json:"slot_delays,omitempty"`
}

// PastGrantReply is one grant of a lock's history. The session is named by
// its name, never by its id.
type PastGrantReply struct {
	Token       uint64 `json:"token"`
	Mode        string `json:"mode"`
	Holder      string `json:"holder"`
	Value       string `json:"value"`
	SessionName string `json:"session_name"`
	// Permits and Slot: a semaphore's grant (absent on a plain lock's).
	Permits uint64  `json:"permits,omitempty"`
	Slot    *uint64 `json:"slot,omitempty"`
}

// QueuedReply is one waiter of a lock, in queue order.
type QueuedReply struct {
	Holder string `json:"holder"`
	Mode   string `json:"mode"`
}

// LocksReply answers GET /v1/locks: one page of the listing, and the
// cursor of the next (the after parameter of the next request; empty after
// the last page).
type LocksReply struct {
	Locks []LockReply `json:"locks"`
	Next  string      `json:"next"`
	// Reset and Index answer a prefix watch (LocksChange); absent from
	// a listing.
	Reset bool   `json:"reset,omitempty"`
	Index uint64 `json:"index,omitempty"`
}

// CheckBody is the body of POST /v1/sequencer/check.
type CheckBody struct {
	Sequencer string `json:"sequencer"`
}

// CheckReply answers POST /v1/sequencer/check.
type CheckReply struct {
	Valid        bool   `json:"valid"`
	CurrentToken uint64 `json:"current_token"`
}

// HealthInfo answers GET /v1/health, which the answering node serves
// locally (never forwarded): whether it is healthy (200) or not (503, with
// the same body), and its view of the leader.
type HealthInfo struct {
	// OK is true when the node is healthy (HealthStatus.Healthy).
	OK bool `json:"ok"`
	// Reason says why not, when OK is false.
	Reason string `json:"reason,omitempty"`
	// LastContactMillis is how long ago a follower last heard from the
	// leader, in milliseconds (absent on the leader).
	LastContactMillis int64 `json:"last_contact_ms,omitempty"`
	// Node is the answering node's id and AppliedIndex the last log index
	// its state machine applied (absent from servers before them).
	Node         string `json:"node,omitempty"`
	AppliedIndex uint64 `json:"applied_index,omitempty"`
	// Leader is the leader's id ("" when unknown).
	Leader string `json:"leader"`
	// Term is the node's Raft term.
	Term uint64 `json:"term"`
	// IsLeader is true when the answering node believes it leads.
	IsLeader bool `json:"is_leader"`
	// Serving is true when the answering node leads and serves requests;
	// is_leader without serving: elected, not caught up yet (its answers
	// are no_leader until it is).
	Serving bool `json:"serving"`
}

// RegisterReply answers POST /v1/internal/members (peer port only).
type RegisterReply struct {
	Registered bool `json:"registered"`
}

// ErrorReply is the body of every error answer.
type ErrorReply struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody is the code and message of an error answer.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// The request bodies refuse to be encoded with text that is not valid
// UTF-8: encoding/json would replace the bytes with U+FFFD, so that a
// client sent "inv\xff" as "inv\uFFFD" and two names became one lock. The
// call then fails with invalid_argument before anything is sent, as the
// server refuses such a body (and an in-process call, such a name).

// MarshalJSON encodes b, refusing text that is not valid UTF-8.
func (b OpenSessionBody) MarshalJSON() ([]byte, error) {
	type plain OpenSessionBody
	return marshalText(plain(b), "name", b.Name)
}

// MarshalJSON encodes b, refusing text that is not valid UTF-8.
func (b AcquireBody) MarshalJSON() ([]byte, error) {
	type plain AcquireBody
	return marshalText(plain(b), "name", b.Name, "session", b.Session, "holder", b.Holder, "value", b.Value,
		"mode", b.Mode, "wait", b.Wait, "max_hold", b.MaxHold)
}

// MarshalJSON encodes b, refusing text that is not valid UTF-8.
func (b ReleaseBody) MarshalJSON() ([]byte, error) {
	type plain ReleaseBody
	return marshalText(plain(b), "name", b.Name, "session", b.Session, "holder", b.Holder)
}

// MarshalJSON encodes b, refusing text that is not valid UTF-8.
func (b CheckBody) MarshalJSON() ([]byte, error) {
	type plain CheckBody
	return marshalText(plain(b), "sequencer", b.Sequencer)
}

// marshalText encodes v unless one of its text fields (name, value pairs)
// is not valid UTF-8.
func marshalText(v any, fields ...string) ([]byte, error) {
	if err := checkText(fields...); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// NewSessionReply encodes a session's description.
func NewSessionReply(in Info) SessionReply {
	locks := in.Locks
	if locks == nil {
		locks = []string{}
	}
	return SessionReply{ID: in.ID, Name: in.Name, TTL: in.TTL.String(), LockDelay: in.LockDelay.String(), Locks: locks}
}

// Info decodes a session's description.
func (r SessionReply) Info() (Info, error) {
	ttl, err := ParseWireDuration("ttl", r.TTL)
	if err != nil {
		return Info{}, err
	}
	ld, err := ParseWireDuration("lock_delay", r.LockDelay)
	if err != nil {
		return Info{}, err
	}
	locks := r.Locks
	if locks == nil {
		locks = []string{}
	}
	return Info{ID: r.ID, Name: r.Name, TTL: ttl, LockDelay: ld, Locks: locks}, nil
}

// NewGrantReply encodes a grant.
func NewGrantReply(g Grant) GrantReply {
	return GrantReply{Name: g.Name, Mode: modeString(g.Mode), Token: uint64(g.Token), Sequencer: g.Sequencer.String(),
		Permits: g.Permits, Slot: slotOf(g.Permits, g.Slot)}
}

// slotOf is the wire form of a slot: nil on a plain lock (permits 0).
func slotOf(permits, slot uint64) *uint64 {
	if permits == 0 {
		return nil
	}
	return &slot
}

// Grant decodes a grant; term is the X-Raftlock-Term of the answer.
func (r GrantReply) Grant(term uint64) (Grant, error) {
	seq, err := sequencer.Parse(r.Sequencer)
	if err != nil {
		return Grant{}, fmt.Errorf("grant: %w", err)
	}
	mode, err := sequencer.ParseMode(r.Mode)
	if err != nil {
		return Grant{}, fmt.Errorf("grant: %w", err)
	}
	g := Grant{Name: r.Name, Mode: mode, Token: sequencer.Token(r.Token), Sequencer: seq, Term: term, Permits: r.Permits}
	if r.Slot != nil {
		g.Slot = *r.Slot
	}
	return g, nil
}

// NewLockReply encodes a lock's state.
func NewLockReply(l LockState) LockReply {
	out := LockReply{Name: l.Name, Mode: modeString(l.Mode), Holders: make([]HolderReply, 0, len(l.Holders)),
		Waiters: l.Waiters, Queue: make([]QueuedReply, 0, len(l.Queue)), Index: l.Index}
	for _, h := range l.Holders {
		hr := HolderReply{SessionHandle: h.SessionHandle, SessionName: h.SessionName,
			Holder: h.Holder, Token: uint64(h.Token), Value: h.Value, Slot: slotOf(l.Permits, h.Slot)}
		if r := h.ReleaseRequested; r != nil {
			hr.ReleaseRequested = &ReleaseRequestReply{SessionHandle: r.SessionHandle, SessionName: r.SessionName, Holder: r.Holder,
				At: r.At.UTC().Format(time.RFC3339Nano)}
		}
		out.Holders = append(out.Holders, hr)
	}
	out.Permits = l.Permits
	for _, d := range l.SlotDelays {
		out.SlotDelays = append(out.SlotDelays, SlotDelayReply{Slot: d.Slot, Until: d.Until.UTC().Format(time.RFC3339Nano)})
	}
	for _, q := range l.Queue {
		out.Queue = append(out.Queue, QueuedReply{Holder: q.Holder, Mode: q.Mode.String()})
	}
	if !l.DelayUntil.IsZero() {
		out.DelayUntil = l.DelayUntil.UTC().Format(time.RFC3339Nano)
	}
	for _, g := range l.Grants {
		out.Grants = append(out.Grants, PastGrantReply{Token: uint64(g.Token), Mode: modeString(g.Mode),
			Holder: g.Holder, Value: g.Value, SessionName: g.SessionName, Permits: g.Permits, Slot: slotOf(g.Permits, g.Slot)})
	}
	out.GrantsSince = uint64(l.GrantsSince)
	return out
}

// State decodes a lock's state.
func (r LockReply) State() (LockState, error) {
	out := LockState{Name: r.Name, Holders: make([]Holder, 0, len(r.Holders)), Waiters: r.Waiters, Index: r.Index,
		Permits: r.Permits}
	for _, d := range r.SlotDelays {
		t, err := time.Parse(time.RFC3339Nano, d.Until)
		if err != nil {
			return LockState{}, fmt.Errorf("lock %s: slot %d delay: %w", r.Name, d.Slot, err)
		}
		out.SlotDelays = append(out.SlotDelays, SlotDelay{Slot: d.Slot, Until: t})
	}
	if r.Mode != "" {
		m, err := sequencer.ParseMode(r.Mode)
		if err != nil {
			return LockState{}, fmt.Errorf("lock %s: %w", r.Name, err)
		}
		out.Mode = m
	}
	for _, h := range r.Holders {
		oh := Holder{SessionHandle: h.SessionHandle, SessionName: h.SessionName,
			Holder: h.Holder, Token: sequencer.Token(h.Token), Value: h.Value, Slot: derefSlot(h.Slot)}
		if r := h.ReleaseRequested; r != nil {
			at, _ := time.Parse(time.RFC3339Nano, r.At)
			oh.ReleaseRequested = &ReleaseRequestInfo{SessionHandle: r.SessionHandle, SessionName: r.SessionName, Holder: r.Holder, At: at}
		}
		out.Holders = append(out.Holders, oh)
	}
	for _, q := range r.Queue {
		m, err := sequencer.ParseMode(q.Mode)
		if err != nil {
			return LockState{}, fmt.Errorf("lock %s: queue: %w", r.Name, err)
		}
		out.Queue = append(out.Queue, QueuedHolder{Holder: q.Holder, Mode: m})
	}
	for _, g := range r.Grants {
		m, err := sequencer.ParseMode(g.Mode)
		if err != nil {
			return LockState{}, fmt.Errorf("lock %s: grant %d: %w", r.Name, g.Token, err)
		}
		out.Grants = append(out.Grants, PastGrant{Token: sequencer.Token(g.Token), Mode: m,
			Holder: g.Holder, Value: g.Value, SessionName: g.SessionName, Permits: g.Permits, Slot: derefSlot(g.Slot)})
	}
	out.GrantsSince = sequencer.Token(r.GrantsSince)
	if r.DelayUntil != "" {
		t, err := time.Parse(time.RFC3339Nano, r.DelayUntil)
		if err != nil {
			return LockState{}, fmt.Errorf("lock %s: delay_until: %w", r.Name, err)
		}
		out.DelayUntil = t
	}
	return out, nil
}

// derefSlot is a wire slot's value (0 when absent).
func derefSlot(s *uint64) uint64 {
	if s == nil {
		return 0
	}
	return *s
}

// NewLocksReply encodes a list of lock states (a last page: no next).
func NewLocksReply(ls []LockState) LocksReply {
	return NewLocksPageReply(LocksPage{Locks: ls})
}

// NewLocksPageReply encodes one page of a listing.
func NewLocksPageReply(p LocksPage) LocksReply {
	out := LocksReply{Locks: make([]LockReply, 0, len(p.Locks)), Next: p.Next}
	for _, l := range p.Locks {
		out.Locks = append(out.Locks, NewLockReply(l))
	}
	return out
}

// NewLocksChangeReply encodes the answer of a prefix watch.
func NewLocksChangeReply(c LocksChange) LocksReply {
	out := NewLocksReply(c.Locks)
	out.Reset, out.Index = c.Reset, c.Index
	return out
}

// NewCheckReply encodes the answer about a sequencer.
func NewCheckReply(c SequencerCheck) CheckReply {
	return CheckReply{Valid: c.Valid, CurrentToken: uint64(c.CurrentToken)}
}

// modeString is a mode's wire form; "" for no mode (a free lock).
func modeString(m sequencer.Mode) string {
	switch m {
	case sequencer.Exclusive, sequencer.Shared:
		return m.String()
	default:
		return ""
	}
}

// ParseWireDuration parses a Go duration string; "" is zero.
func ParseWireDuration(field, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", field, err)
	}
	return d, nil
}

// WireLockDelay is WireDuration, with NoLockDelay as "0s".
func WireLockDelay(d time.Duration) string {
	if d == NoLockDelay {
		return "0s"
	}
	return WireDuration(d)
}

// WireDuration is the wire form of an optional duration: "" for zero.
func WireDuration(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

// TokensReply answers GET /v1/acl/tokens (never a secret).
type TokensReply struct {
	Tokens []TokenInfo `json:"tokens"`
}

// DeletedReply answers DELETE /v1/acl/tokens/{id}.
type DeletedReply struct {
	Deleted bool `json:"deleted"`
}
