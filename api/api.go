package api

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/raftlock/raftlock/sequencer"
)

// Limits and defaults of the session and lock API. They are part of the
// documented contract (README "Limits and defaults").
const (
	// MinTTL and MaxTTL bound a session's lease.
	MinTTL = 1 * time.Second
	MaxTTL = 5 * time.Minute
	// DefaultTTL is the lease of a session opened without one.
	DefaultTTL = 15 * time.Second
	// DefaultLockDelay is the lock-delay of a session opened without one.
	DefaultLockDelay = 10 * time.Second
	// MaxLockDelay bounds a session's lock-delay.
	MaxLockDelay = 60 * time.Second
	// NoLockDelay as OpenRequest.LockDelay asks for a session whose locks
	// come free at once when it expires (a zero LockDelay takes the
	// default). On the wire it is "lock_delay":"0s".
	NoLockDelay time.Duration = -1
	// MaxWait bounds one waiting acquire.
	MaxWait = 10 * time.Minute
	// DefaultWatchWait is how long a watch (a blocking lock read) waits for
	// a change when the caller names no wait; MaxWatchWait bounds it.
	DefaultWatchWait = 5 * time.Minute
	MaxWatchWait     = 10 * time.Minute
	// MaxSessionNameBytes bounds a session's descriptive name.
	MaxSessionNameBytes = 256
	// MaxHolderBytes bounds a holder id.
	MaxHolderBytes = 128
	// MaxValueBytes bounds the value a holder sets on a lock.
	MaxValueBytes = 4096
	// DefaultLocksPage is how many locks one page of a listing holds when
	// the caller names no limit; MaxLocksPage bounds the limit.
	DefaultLocksPage = 1000
	MaxLocksPage     = 10000
)

// Code is a stable, machine-readable error code (API.md).
type Code string

// The error codes of the API. They never change meaning.
const (
	CodeInvalidArgument Code = "invalid_argument"
	CodeSessionNotFound Code = "session_not_found"
	CodeLockBusy        Code = "lock_busy"
	CodeNotHolder       Code = "not_holder"
	CodeWaitTimeout     Code = "wait_timeout"
	// CodeWaitCancelled answers a waiting acquire whose wait its own holder
	// ended (a release by the queued holder).
	CodeWaitCancelled  Code = "wait_cancelled"
	CodeNoLeader       Code = "no_leader"
	CodeUnknownOutcome Code = "unknown_outcome"
	CodeTooLarge       Code = "too_large"
	// CodeResourceExhausted refuses a request that would take the cluster
	// past one of its Limits; nothing changed.
	CodeResourceExhausted Code = "resource_exhausted"
	CodeInternal          Code = "internal"
	// CodeUnauthenticated (ACLs on): no token, a malformed one or one the
	// cluster does not know (401).
	CodeUnauthenticated Code = "unauthenticated"
	// CodePermissionDenied (ACLs on): the token's rules do not allow the
	// call, or the session belongs to another token (403).
	CodePermissionDenied Code = "permission_denied"
	CodeNotFound         Code = "not_found"
	CodeMethodNotAllowed Code = "method_not_allowed"
	// CodeUnreachable is the client's own (never on the wire, no HTTP
	// status): no node could be connected to for a while (a client made
	// with client.WithFailFast).
	CodeUnreachable Code = "unreachable"
	// CodeAlreadyHeld is the client's own too (never on the wire): a
	// Session asked for a lock it already holds, or is acquiring (Go
	// session.Session, Python Session). Locks are not re-entrant: one
	// grant per session and lock name in the clients (DESIGN.md,
	// "Re-entrancy").
	CodeAlreadyHeld Code = "already_held"
)

// Error is an API error: a stable code and a human message. Two Errors match
// under errors.Is when their codes are equal, so callers test
// errors.Is(err, session.ErrLockBusy).
type Error struct {
	Code    Code
	Message string
}

// Error implements error.
func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Is reports whether target is an *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Sentinel errors, one per code, for errors.Is.
var (
	ErrInvalidArgument = &Error{Code: CodeInvalidArgument, Message: "invalid argument"}
	ErrSessionNotFound = &Error{Code: CodeSessionNotFound, Message: "session not found"}
	ErrLockBusy        = &Error{Code: CodeLockBusy, Message: "lock is busy"}
	ErrNotHolder       = &Error{Code: CodeNotHolder, Message: "not a holder of the lock"}
	ErrWaitTimeout     = &Error{Code: CodeWaitTimeout, Message: "wait timed out"}
	ErrWaitCancelled   = &Error{Code: CodeWaitCancelled, Message: "wait cancelled by its holder"}
	ErrNoLeader        = &Error{Code: CodeNoLeader, Message: "no leader"}
	ErrUnknownOutcome  = &Error{Code: CodeUnknownOutcome, Message: "outcome unknown: leadership lost mid-write; retry the same request"}
	ErrTooLarge        = &Error{Code: CodeTooLarge, Message: "too large"}
	// ErrResourceExhausted: a limit of the cluster (Limits) was reached.
	ErrResourceExhausted = &Error{Code: CodeResourceExhausted, Message: "resource exhausted"}
	ErrUnreachable       = &Error{Code: CodeUnreachable, Message: "no node of the cluster could be reached"}
	ErrAlreadyHeld       = &Error{Code: CodeAlreadyHeld, Message: "this session already holds or is acquiring the lock"}
)

// CodeOf returns the code of err: that of an *Error in its chain, CodeInternal
// otherwise (and "" for nil).
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// OpenRequest asks for a new session. Zero durations take the defaults;
// LockDelay NoLockDelay asks for none. Durations marked explicit
// (Explicit, as the wire marks a field present in the body) are taken as
// they are: an explicit zero TTL is refused, an explicit zero LockDelay is
// none.
type OpenRequest struct {
	Name      string
	TTL       time.Duration
	LockDelay time.Duration
	// ttlSet and lockDelaySet mark TTL and LockDelay explicit (Explicit).
	ttlSet, lockDelaySet bool
}

// Info describes an open session.
type Info struct {
	ID        string
	Name      string
	TTL       time.Duration
	LockDelay time.Duration
	// Locks are the names of the locks the session holds, sorted.
	Locks []string
}

// AcquireRequest asks for a lock on behalf of (Session, Holder). Holder is
// generated once per lock handle by the client; a retried request with the
// same holder returns the same grant. Wait zero means try once.
type AcquireRequest struct {
	Name    string
	Session string
	Holder  string
	Mode    sequencer.Mode
	Wait    time.Duration
	Value   string
	// MaxHold is the grant's hold limit (zero: none; MinMaxHold to
	// MaxMaxHold): the leader revokes the grant that long after it was
	// made (DESIGN.md, "Hold limits").
	MaxHold time.Duration
	// Permits, when above 0, takes one slot of the semaphore Name of that
	// many slots (1 to MaxPermits; exclusive mode only): every holder and
	// waiter of the lock must ask for the same permits. 0: a plain lock.
	Permits uint64
}

// Grant is a successful acquisition.
type Grant struct {
	Name      string
	Mode      sequencer.Mode
	Token     sequencer.Token
	Sequencer sequencer.Sequencer
	// Term is the Raft term of the leader that answered.
	Term uint64
	// Permits is the semaphore's permits (0: a plain lock) and Slot the
	// slot granted (Sequencer names it too).
	Permits uint64
	Slot    uint64
}

// ReleaseRequest gives a lock up.
type ReleaseRequest struct {
	Name    string
	Session string
	Holder  string
}

// Holder is one holder of a lock, as any reader may know it: its session
// is named by its handle (SessionHandle) and its name, never by its id (a
// secret capability).
type Holder struct {
	SessionHandle string
	SessionName   string
	Holder        string
	Token         sequencer.Token
	Value         string
	// ReleaseRequested says who asked the holder to release the grant
	// (nil: nobody).
	ReleaseRequested *ReleaseRequestInfo
	// Slot is the semaphore slot held (meaningful when the lock's Permits
	// is above 0).
	Slot uint64
}

// ReleaseRequestInfo is who asked a holder to release its grant (by
// session handle and name, never the id, and holder id), and when.
type ReleaseRequestInfo struct {
	SessionHandle string
	SessionName   string
	Holder        string
	At            time.Time
}

// SlotDelay is the lock-delay of one slot of a semaphore: the slot's holder
// expired, and the slot is not granted before Until (as stamped by the
// leader that started it; a later leader may run it longer).
type SlotDelay struct {
	Slot  uint64
	Until time.Time
}

// QueuedHolder is one waiter in a lock's queue.
type QueuedHolder struct {
	Holder string
	Mode   sequencer.Mode
}

// LockState is the state of one lock as the leader sees it.
type LockState struct {
	Name    string
	Mode    sequencer.Mode
	Holders []Holder
	Waiters int
	// Queue lists the waiters in FIFO order (holder ids and modes; never
	// session ids).
	Queue []QueuedHolder
	// DelayUntil is when the lock's lock-delay ends (zero: none).
	DelayUntil time.Time
	// Index is the Raft index of the last change to the lock (for a free
	// lock whose history the cluster keeps, the entry that freed it). For a
	// free lock the cluster keeps nothing of, it is the index of the last
	// entry applied when the state was read. Either way it only grows, so it
	// can be passed to WatchLock.
	Index uint64
	// Grants is the lock's recent history: its last grants (at most 32),
	// in grant order, the current holders' included. Tokens never
	// decrease; the shared grants one entry makes share its token. A free
	// lock keeps its history while the cluster's bound on free histories
	// allows (DESIGN.md, "Grant history").
	Grants []PastGrant
	// GrantsSince says how far back Grants reaches: every grant of the
	// lock whose token is at least GrantsSince is in Grants (so a grant
	// with a lower token may be missing). Zero means the answer carries no
	// history at all (a server from before histories).
	GrantsSince sequencer.Token
	// Permits is the semaphore's permits (0: a plain lock, or a free one):
	// at most Permits holders, each in its own slot (Holder.Slot).
	// SlotDelays lists its slots in lock-delay, by slot; a semaphore's
	// DelayUntil stays zero.
	Permits    uint64
	SlotDelays []SlotDelay
}

// PastGrant is one grant in a lock's history (LockState.Grants): what any
// reader may know of it. The holder's session is named by its
// descriptive name, never by its id.
type PastGrant struct {
	Token       sequencer.Token
	Mode        sequencer.Mode
	Holder      string
	Value       string
	SessionName string
	// Permits is the lock's permits when granted (0: a plain lock) and
	// Slot the slot granted.
	Permits uint64
	Slot    uint64
}

// LocksChange is the answer of a prefix watch (GET
// /v1/locks?prefix=P&index=I&wait=D): the locks under the prefix whose
// last change is above the watcher's index, in the order of those changes,
// each in its current state (one that became free is answered free: no
// holders, no waiters, no delay), so that every change is answered once.
// Reset is true when the watcher's index is 0 or older than what the
// cluster still remembers (a change it may have missed was forgotten, or a
// restore replaced the state): Locks is then every lock under the prefix
// (held, waited for or delayed), the whole state the watcher replaces its
// own with. Index is what the watcher passes next; it never goes below
// the index it passed.
//
// A reset is in name order, in pages of at most MaxAnswerBytes: Next,
// when not empty, is the last name of this page, and the rest is read
// page by page (GET /v1/locks?prefix=P&index=Index&after=Next; Node and
// client.Client ResetPage) before watching on from Index. Those pages
// leave out the locks changed above Index: the watch from Index answers
// them, once. A change answer over MaxAnswerBytes stops after a change
// index (the locks one entry changed are never split): its Index is that
// change's, and the rest follows from it.
type LocksChange struct {
	Locks []LockState
	Reset bool
	Next  string
	Index uint64
}

// SequencerCheck is the cluster's answer about a sequencer.
type SequencerCheck struct {
	Valid        bool
	CurrentToken sequencer.Token
}

// LocksQuery asks for one page of a listing: at most Limit locks (zero:
// DefaultLocksPage; at most MaxLocksPage) whose names start with Prefix and
// sort after After, in name order.
type LocksQuery struct {
	Prefix string
	After  string
	Limit  int
}

// LocksPage is one page of a listing. Next is the cursor of the next page
// (pass it as LocksQuery.After), empty after the last one. Paging by name
// lists every lock that exists throughout exactly once, in order, however
// the others change meanwhile.
type LocksPage struct {
	Locks []LockState
	Next  string
}

// Backend is what a session and its locks run on: the HTTP client of a
// standalone cluster (client.Client) or an in-process replica
// (node.Node.Backend). Every method blocks at most until ctx is done;
// errors carry a Code.
//
// Retries are the Backend's, once per call path: a call that surely was
// not served (no_leader, a refused connection) is retried, at the same or
// another node, with backoff until ctx is done; so is a call whose outcome
// is unknown (unknown_outcome, a connection lost after sending), since
// the calls are safe to repeat: Acquire (with a holder id; one without is
// not retried then) and Release by their holder id, reads, KeepAlive and
// CloseSession by nature, and OpenSession because a session a lost
// attempt may have opened is never used and expires after its TTL. An error returned is therefore the answer (or ctx's end,
// then reported with the last transient cause); callers such as
// session.Session do not retry it.
type Backend interface {
	OpenSession(ctx context.Context, req OpenRequest) (Info, error)
	// KeepAlive extends the session's lease; its answer names the
	// session's revoked grants (KeepAliveAnswer).
	KeepAlive(ctx context.Context, id string) (KeepAliveAnswer, error)
	CloseSession(ctx context.Context, id string) error
	SessionInfo(ctx context.Context, id string) (Info, error)
	Acquire(ctx context.Context, req AcquireRequest) (Grant, error)
	Release(ctx context.Context, req ReleaseRequest) error
	LockState(ctx context.Context, name string) (LockState, error)
	Locks(ctx context.Context, prefix string) ([]LockState, error)
	CheckSequencer(ctx context.Context, seq string) (SequencerCheck, error)
	// WatchLock is a blocking read: it answers the lock's state as soon as
	// its Index is above index, or the current state once wait has passed
	// (zero: DefaultWatchWait; at most MaxWatchWait). Index 0 answers at
	// once. A free lock may be answered with a larger Index but unchanged
	// state when other locks change; callers compare states.
	WatchLock(ctx context.Context, name string, index uint64, wait time.Duration) (LockState, error)
}
