package api

import "fmt"

// Default limits against exhaustion (Limits). A real deployment stays far
// below them: a lock service holds coarse-grained locks, a handful per
// client; yet they bound the replicated state every node keeps in memory
// (10,000 locks with 4 KiB values took about 140 MB; the defaults allow
// ten times that, more only with full grant histories of large values).
const (
	DefaultMaxSessions        = 100_000
	DefaultMaxLocks           = 100_000
	DefaultMaxWaitersPerLock  = 10_000
	DefaultMaxLocksPerSession = 1_000
	// DefaultMaxSessionsPerToken bounds the sessions one ACL token holds
	// open (ACLs on): a tenth of the cluster's, so that one leaked or
	// looping client cannot take every session from the others.
	DefaultMaxSessionsPerToken = 10_000
	// DefaultMaxLocksPerToken bounds the holds and waits of one ACL
	// token's sessions together: a tenth of the cluster's locks, so that
	// one token (100 sessions of 1,000 locks) cannot take every lock slot.
	DefaultMaxLocksPerToken = 10_000
	// DefaultMaxWaitersPerToken bounds the waits of one ACL token's
	// sessions: a tenth of one lock's queue, so that one token cannot fill
	// a queue ahead of everyone else.
	DefaultMaxWaitersPerToken = 1_000
)

// Limits bound what the replicated state may hold. The leader stamps its
// limits into every command that could pass one (an open, an acquire) and
// the state machine checks them (Exceeded) from the command alone, so every
// replica decides alike. A zero field means no limit (how entries written
// before limits are applied); Resolve fills the defaults in.
type Limits struct {
	// Sessions bounds the open sessions.
	Sessions int `json:"sessions,omitempty"`
	// Locks bounds the locks held, waited for or in their lock-delay.
	Locks int `json:"locks,omitempty"`
	// WaitersPerLock bounds one lock's queue.
	WaitersPerLock int `json:"waiters_per_lock,omitempty"`
	// LocksPerSession bounds one session's holds and waits: one per lock
	// and holder id (so many holders of one shared lock count as many).
	LocksPerSession int `json:"locks_per_session,omitempty"`
	// SessionsPerToken bounds the open sessions of one ACL token (with
	// ACLs off sessions have no token and only Sessions applies).
	SessionsPerToken int `json:"sessions_per_token,omitempty"`
	// LocksPerToken bounds the holds and waits of one ACL token's sessions
	// together (one per lock and holder id, as LocksPerSession counts), and
	// WaitersPerToken their waits alone. Carried only by the command
	// format that knows them (fsm.VersionTokenLimits): an entry written
	// for an older replica has none.
	LocksPerToken   int `json:"locks_per_token,omitempty"`
	WaitersPerToken int `json:"waiters_per_token,omitempty"`
}

// DefaultLimits returns the default limits.
func DefaultLimits() Limits {
	return Limits{Sessions: DefaultMaxSessions, Locks: DefaultMaxLocks,
		WaitersPerLock: DefaultMaxWaitersPerLock, LocksPerSession: DefaultMaxLocksPerSession,
		SessionsPerToken: DefaultMaxSessionsPerToken, LocksPerToken: DefaultMaxLocksPerToken,
		WaitersPerToken: DefaultMaxWaitersPerToken}
}

// fields names each limit by its raftlockd flag, with a pointer to it.
func (l *Limits) fields() []struct {
	flag string
	v    *int
} {
	return []struct {
		flag string
		v    *int
	}{{"--max-sessions", &l.Sessions}, {"--max-locks", &l.Locks},
		{"--max-waiters-per-lock", &l.WaitersPerLock}, {"--max-locks-per-session", &l.LocksPerSession},
		{"--max-sessions-per-token", &l.SessionsPerToken}, {"--max-locks-per-token", &l.LocksPerToken},
		{"--max-waiters-per-token", &l.WaitersPerToken}}
}

// Resolve replaces every zero limit by its default, then checks them
// (Check).
func (l *Limits) Resolve() error {
	def := DefaultLimits()
	dfs := def.fields()
	for i, f := range l.fields() {
		if *f.v == 0 {
			*f.v = *dfs[i].v
		}
	}
	return l.Check()
}

// Check refuses a limit below 1 (invalid_argument naming its raftlockd
// flag).
func (l *Limits) Check() error {
	for _, f := range l.fields() {
		if *f.v < 1 {
			return Errorf(CodeInvalidArgument, "%s %d out of range [1, ∞)", f.flag, *f.v)
		}
	}
	return nil
}

// Usage is what the state would hold once a command is applied, in the
// dimensions the command grows (zero: not grown).
type Usage struct {
	Sessions int
	Locks    int
	// Waiters is the length of the lock's queue; SessionLocks the number
	// of locks the session holds or waits for.
	Waiters      int
	SessionLocks int
	// TokenSessions is the number of open sessions of the ACL token that
	// opens one.
	TokenSessions int
	// TokenLocks and TokenWaiters are the holds and waits, and the waits
	// alone, of the sessions of the ACL token whose session acquires.
	TokenLocks   int
	TokenWaiters int
}

// Exceeded is the one limit rule: it returns the resource_exhausted error
// of the first limit that u passes, nil if u is within them all (or l is
// nil: no limits).
func (l *Limits) Exceeded(u Usage) *Error {
	if l == nil {
		return nil
	}
	for _, c := range []struct {
		have, max int
		what      string
	}{{u.Sessions, l.Sessions, "open sessions"}, {u.Locks, l.Locks, "locks held, waited for or delayed"},
		{u.Waiters, l.WaitersPerLock, "waiters on this lock"}, {u.SessionLocks, l.LocksPerSession, "locks this session holds or waits for"},
		{u.TokenSessions, l.SessionsPerToken, "open sessions of this token"},
		{u.TokenLocks, l.LocksPerToken, "locks this token's sessions hold or wait for"},
		{u.TokenWaiters, l.WaitersPerToken, "waits of this token's sessions"}} {
		if c.max > 0 && c.have > c.max {
			return &Error{Code: CodeResourceExhausted, Message: fmt.Sprintf("the cluster's limit of %d %s is reached", c.max, c.what)}
		}
	}
	return nil
}

// Default caps on the prefix watches (GET /v1/locks?prefix=P&index=I) one
// node serves at once: node-local, not replicated (a watch holds a
// request and a goroutine, not state). Past either cap a watch is
// refused with resource_exhausted; the watches already waiting go on.
const (
	// DefaultMaxPrefixWatchers bounds a node's concurrent prefix watches
	// (raftlockd --max-prefix-watchers; node.Config.MaxPrefixWatchers).
	DefaultMaxPrefixWatchers = 1024
	// DefaultMaxPrefixWatchersPerToken bounds those of one ACL token
	// (ACLs on; raftlockd --max-prefix-watchers-per-token;
	// node.Config.MaxPrefixWatchersPerToken): an eighth,
	// so that one looping client cannot take every watch from the others.
	DefaultMaxPrefixWatchersPerToken = 128
)

// Default caps on the blocking queries one node serves, or forwards to
// the leader, at once: every watch (GET /v1/lock?index=I, GET
// /v1/locks?index=I, prefix watches included) and every blocking
// overview (GET /v1/overview?index=I). Node-local, not replicated: a
// blocking query holds a request, a goroutine and a timer, not state.
// Past either cap a new one is refused with resource_exhausted (429:
// retry once others ended); those already waiting go on.
const (
	// DefaultMaxBlockingQueries bounds a node's concurrent blocking
	// queries (raftlockd --max-blocking-queries;
	// node.Config.MaxBlockingQueries).
	DefaultMaxBlockingQueries = 2048
	// DefaultMaxBlockingQueriesPerToken bounds those of one ACL token
	// (ACLs on; raftlockd --max-blocking-queries-per-token;
	// node.Config.MaxBlockingQueriesPerToken): an eighth, so that one
	// read-only token cannot take every watch from the others.
	DefaultMaxBlockingQueriesPerToken = 256
)

// MaxPermits bounds a semaphore's permits (POST /v1/acquire "permits"): a
// lock taken with permits N has N slots, each with its own holder, token
// and lock-delay; every slot is stored, shown and timed by the leader, so
// N stays small. A semaphore of more slots than this is a counter, not a
// lock: keep it elsewhere. The state machine refuses an acquire above it,
// so it is part of the replicated rules: every build of a cluster must
// agree on it (raising it needs a new command version). It is a multiple
// of 64 (the state machine keeps a bit per slot).
const MaxPermits = 256

// Limits of the stream protocol (transport/stream; docs/API.md, "The
// stream protocol"): the binary framing beside HTTP/JSON that carries
// many requests over one connection per node.
const (
	// StreamVersion is the version byte a stream connection opens with.
	StreamVersion = 1
	// MaxStreamHeaderBytes bounds a request frame's method, target and
	// headers together (HTTP's header limit plays the same part).
	MaxStreamHeaderBytes = 16 << 10
	// MaxStreamFrameBytes bounds a request frame: a body of MaxBodyBytes
	// and headers of MaxStreamHeaderBytes. A larger frame closes the
	// connection after a too_large goaway frame.
	MaxStreamFrameBytes = MaxBodyBytes + MaxStreamHeaderBytes
	// MaxStreamAnswerBytes bounds an answer frame (a client reads no
	// more); the large answers (a snapshot download) go over HTTP.
	MaxStreamAnswerBytes = 64 << 20
	// MaxStreamsInFlight bounds the requests one stream connection
	// carries at once, as MaxStreamsPerConn does for HTTP/2; one more is
	// answered resource_exhausted (429) and the connection stays.
	MaxStreamsInFlight = MaxStreamsPerConn
	// MaxStreamQueuedBytes bounds the answers a stream connection's
	// client has not read yet: while this many bytes wait to be written,
	// the node reads no more requests from it (the client's writes
	// block), so a client that never reads holds at most this, plus the
	// answers of its requests in flight and the write in progress.
	MaxStreamQueuedBytes = 1 << 20
)
