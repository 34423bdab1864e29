package api

// Bounds of an overview: a page on a big cluster shows the first ones and
// says how many there are.
const (
	// MaxOverviewLocks is the most locks an overview lists (in name order).
	MaxOverviewLocks = 1000
	// MaxOverviewSessions is the most sessions an overview lists.
	MaxOverviewSessions = 1000
	// MaxOverviewEvents is how many recent events a node keeps and an
	// overview lists.
	MaxOverviewEvents = 100
)

// Overview is the answer of GET /v1/overview. It never carries a session
// id: sessions are named by handle and name.
type Overview struct {
	// Index is the leader's applied Raft index when the overview was read:
	// the index of the next blocking query.
	Index uint64 `json:"index"`
	// Now is the leader's clock (RFC 3339): the page counts lock-delays
	// down against it, whatever the browser's clock says.
	Now         string `json:"now"`
	Leader      string `json:"leader"`
	Term        uint64 `json:"term"`
	Serving     bool   `json:"serving"`
	CommitIndex uint64 `json:"commit_index"`
	// Members is the Raft configuration with each member's state as the
	// leader sees it; only for a token with the admin rule (with ACLs
	// on), else left out and MembersHidden is true.
	Members       []MemberStatus `json:"members,omitempty"`
	MembersHidden bool           `json:"members_hidden,omitempty"`
	// Locks are the locks held, waited for or in lock-delay (at most
	// MaxOverviewLocks, and no more than fit in MaxAnswerBytes, in name
	// order); LocksTotal counts them all.
	Locks      []OverviewLock `json:"locks"`
	LocksTotal int            `json:"locks_total"`
	// Sessions are the open sessions (at most MaxOverviewSessions, by
	// name then handle); SessionsTotal counts them all.
	Sessions      []SessionSummary `json:"sessions"`
	SessionsTotal int              `json:"sessions_total"`
	// Events are the leader's recent events, newest first.
	Events []EventReply `json:"events"`
}

// MemberStatus is one member of the configuration and its state.
type MemberStatus struct {
	Member
	// State is "leader", "follower", "unreachable" (its peer port did not
	// answer within a second) or "unknown" (no peer port to ask: an
	// embedded node on an in-memory transport).
	State string `json:"state"`
	// LastIndex is the member's last Raft log index, Lag how far it is
	// behind the leader's (0 when unknown or unreachable).
	LastIndex uint64 `json:"last_index"`
	Lag       uint64 `json:"lag"`
	// Error says why a member is unreachable.
	Error string `json:"error,omitempty"`
}

// OverviewLock is one lock of an overview.
type OverviewLock struct {
	Name       string           `json:"name"`
	Mode       string           `json:"mode,omitempty"`
	Holders    []OverviewHolder `json:"holders"`
	Waiters    int              `json:"waiters"`
	Queue      []QueuedReply    `json:"queue"`
	DelayUntil string           `json:"delay_until,omitempty"`
	Index      uint64           `json:"index"`
	// Permits and SlotDelays: a semaphore's (LockReply); each holder's
	// slot is in its HolderReply.
	Permits    uint64           `json:"permits,omitempty"`
	SlotDelays []SlotDelayReply `json:"slot_delays,omitempty"`
}

// OverviewHolder is one holder of a lock, with when it was granted.
type OverviewHolder struct {
	HolderReply
	// Since is when the grant was made, by the clock of the leader that
	// made it (RFC 3339); left out when no longer known (the entry was
	// compacted into a snapshot before this node started).
	Since string `json:"since,omitempty"`
}

// SessionSummary is one open session of an overview (never its id).
type SessionSummary struct {
	Handle    string `json:"handle"`
	Name      string `json:"name"`
	TTL       string `json:"ttl"`
	LockDelay string `json:"lock_delay"`
	// Created is the leader's clock when the session was opened.
	Created string `json:"created"`
	// Locks are the locks it holds or waits for.
	Locks []string `json:"locks"`
}

// EventReply is one recent event: what changed, and when (At: the
// entry's time by the clock of the leader that proposed it). Kind is one of "session_opened", "session_closed",
// "session_expired", "granted", "released", "queued", "wait_ended",
// "lock_delay", "restored".
type EventReply struct {
	// Seq numbers the events of the answering node (1, 2, ...).
	Seq           uint64 `json:"seq"`
	At            string `json:"at"`
	Kind          string `json:"kind"`
	Lock          string `json:"lock,omitempty"`
	SessionHandle string `json:"session_handle,omitempty"`
	SessionName   string `json:"session_name,omitempty"`
	Holder        string `json:"holder,omitempty"`
	Token         uint64 `json:"token,omitempty"`
	Mode          string `json:"mode,omitempty"`
	DelayUntil    string `json:"delay_until,omitempty"`
	// Reason says why a wait ended: "session_gone", "timed_out",
	// "cancelled"; of a revocation ("revoked"), the operator's reason.
	Reason string `json:"reason,omitempty"`
	// RevokeKind says who revoked a grant ("revoked"): "admin" or
	// "max_hold".
	RevokeKind string `json:"revoke_kind,omitempty"`
	// Slot is the semaphore slot granted, released or put into
	// lock-delay (absent on a plain lock).
	Slot *uint64 `json:"slot,omitempty"`
}
