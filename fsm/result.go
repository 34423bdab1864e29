package fsm

import (
	"fmt"

	"github.com/raftlock/raftlock/sequencer"
)

// Status is the business outcome of applying one command.
type Status uint8

// Outcomes of Apply. They are values, not failures of the state machine.
const (
	StatusOK Status = iota
	// StatusGranted: the acquire holds the lock (now, or already did).
	StatusGranted
	// StatusQueued: the acquire waits in the lock's FIFO queue.
	StatusQueued
	StatusSessionNotFound
	StatusLockBusy
	StatusNotHolder
	// StatusNotWaiting: a cancelled wait was no longer queued.
	StatusNotWaiting
	// StatusSessionExists: an open with an id already in use.
	StatusSessionExists
	// StatusInvalid: the command's content is out of range (the leader
	// validates before proposing, so this only guards the state).
	StatusInvalid
	// StatusModeMismatch: the holder already holds or waits for the lock
	// in the other mode (Result.Mode says which).
	StatusModeMismatch
	// StatusResourceExhausted: the command would pass one of the limits
	// it carries (Result.Refusal says which); nothing changed.
	StatusResourceExhausted
	// StatusAlreadyBootstrapped: an ACL bootstrap after the first.
	StatusAlreadyBootstrapped
	// StatusTokenNotFound: a deleted token's id is unknown.
	StatusTokenNotFound
	// StatusTokenExists: a created token's id or hash is in use.
	StatusTokenExists
	// StatusCorrupt: the entry, or one before it, failed to decode or its
	// checksum (FSM.Halted): nothing was applied, nor will be.
	StatusCorrupt
	// StatusPermitsMismatch: the acquire's permits differ from those of
	// the stored lock (Result.Permits says the lock's; 0: a plain lock);
	// nothing changed.
	StatusPermitsMismatch
)

// String names the status.
func (s Status) String() string {
	names := [...]string{"ok", "granted", "queued", "session_not_found", "lock_busy",
		"not_holder", "not_waiting", "session_exists", "invalid", "mode_mismatch", "resource_exhausted",
		"already_bootstrapped", "token_not_found", "token_exists", "corrupt", "permits_mismatch"}
	if int(s) < len(names) {
		return names[s]
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// Result is what Apply returns for one command (raft.ApplyFuture.Response).
type Result struct {
	Status Status
	// Token is the fencing token of a grant (StatusGranted).
	Token uint64
	// Mode is the mode the lock is held in (StatusGranted).
	Mode sequencer.Mode
	// Index is the log index of the entry.
	Index uint64
	// Busy says why the lock was busy (StatusLockBusy), as the entry found
	// it; nil otherwise.
	Busy *Busy
	// Refusal says which limit a command would pass
	// (StatusResourceExhausted).
	Refusal string
	// Permits is the semaphore's permits of an acquire (0: a plain lock);
	// on StatusPermitsMismatch, the stored lock's. Slot is the granted
	// slot (StatusGranted on a semaphore).
	Permits uint64
	Slot    uint64
}

// Busy describes a lock an acquire found busy, from the state the entry
// found: its holders (by session name and holder id, never a session id),
// its lock-delay and its queue.
type Busy struct {
	// Mode is the mode the lock is held in (0: free).
	Mode    sequencer.Mode
	Holders []BusyHolder
	// DelayUntil is the end of the lock's lock-delay as stamped by the
	// leader that started it (Lock.DelayUntil); 0 without one.
	DelayUntil int64
	// Waiters is the length of the lock's queue; Place is the asking
	// holder's place in it (1: first), 0 when it is not queued.
	Waiters int
	Place   int
	// Permits is the lock's permits (0: a plain lock).
	Permits uint64
}

// BusyHolder is one holder of a busy lock, as any reader may know it.
type BusyHolder struct {
	SessionName string
	Holder      string
}
