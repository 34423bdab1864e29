package fsm

import (
	"github.com/raftlock/raftlock/sequencer"
)

// EventKind classifies an Event.
type EventKind uint8

// Kinds of events.
const (
	// EventGranted: (Session, Holder) now holds Lock with Token.
	EventGranted EventKind = iota + 1
	// EventWaitEnded: the wait of (Session, Holder) on Lock ended without a
	// grant (cancelled, or its session is gone).
	EventWaitEnded
	// EventSessionOpened: Session exists (TTL set).
	EventSessionOpened
	// EventSessionRemoved: Session was closed or expired.
	EventSessionRemoved
	// EventDelayStarted: Lock (on a semaphore: its Slot) is delayed
	// until DelayUntil, for DelayFor.
	EventDelayStarted
	// EventLockChanged: Lock changed at Index.
	EventLockChanged
	// EventRestored: the whole state was replaced from a snapshot, whose
	// applied index is Index.
	EventRestored
	// EventWaitSet: (Session, Holder) waits on Lock for WaitFor
	// nanoseconds, a wait set at log index Index (a new waiter or a
	// retried wait).
	EventWaitSet
	// EventHalted: entry Index is corrupt (Err says how); the state
	// machine applies nothing from it on (FSM.Halted).
	EventHalted
	// EventReleased: (Session, Holder) released its hold of Lock (granted
	// with Token): an explicit release; a closed or expired session's
	// holds are not reported so.
	EventReleased
	// EventHoldEnded: the restore hold ended at Index (FSM.Hold).
	EventHoldEnded
	// EventRevoked: the grant of (Session, Holder) on Lock (Token) was
	// revoked (RevokeKind, RevokeReason, By: RevokeGrant).
	EventRevoked
	// EventReleaseRequested: the holder (Session, Holder) of Lock's grant
	// Token was asked to release it.
	EventReleaseRequested
)

// Event tells the local replica what an entry changed, so that the leader can
// answer waiting requests and arm timers. Events never feed back into state.
type Event struct {
	Kind       EventKind
	Lock       string
	Session    string
	Holder     string
	Token      uint64
	Mode       sequencer.Mode
	TTL        int64
	DelayUntil int64
	// DelayFor is the length of the delay (EventDelayStarted), in
	// nanoseconds.
	DelayFor int64
	Index    uint64
	// WaitFor is the length of a wait (EventWaitSet), in nanoseconds.
	WaitFor int64
	// Reason says why a wait ended (EventWaitEnded).
	Reason WaitEnd
	// Err is why the state machine halted (EventHalted).
	Err error
	// Name is the session's name (EventSessionOpened,
	// EventSessionRemoved); Expired says the session expired rather than
	// being closed (EventSessionRemoved).
	Name    string
	Expired bool
	// RevokeKind, RevokeReason and By describe a revocation
	// (EventRevoked): RevokeGrant's Kind, Reason and By.
	RevokeKind, RevokeReason, By string
	// MaxHold is the hold limit of a grant (EventGranted), nanoseconds
	// (0: none).
	MaxHold int64
	// Slot is the semaphore slot granted (EventGranted), released
	// (EventReleased) or put into lock-delay (EventDelayStarted);
	// Semaphore says the lock is a semaphore (Slot 0 and false: a plain
	// lock).
	Slot      uint64
	Semaphore bool
	// Now is the state machine's clock at the entry: the wall clock of the
	// leader that proposed it (never going backwards); set by emit.
	Now int64
}
