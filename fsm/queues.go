package fsm

import (
	"github.com/raftlock/raftlock/sequencer"
)

// Waiter is one queued acquire. Its place belongs to (Session, Holder)
// until it is granted, its wait runs out, its session ends or it is
// released or cancelled; a retried acquire keeps it.
type Waiter struct {
	Session string         `json:"session"`
	Holder  string         `json:"holder"`
	Mode    sequencer.Mode `json:"mode"`
	Value   string         `json:"value,omitempty"`
	// WaitFor is how long the waiter keeps its place, in nanoseconds (0:
	// recorded before waits were replicated; the leader uses
	// api.MaxWait), and WaitSet the log index of the acquire that set
	// it: a retried wait sets both again. The leader times WaitFor on its
	// own monotonic clock from the moment it learns of the wait (a new
	// leader from its promotion): a wait may run long after a failover,
	// never forever. WaitSet names the wait in the CancelWait that ends it.
	WaitFor int64  `json:"wait_for,omitempty"`
	WaitSet uint64 `json:"wait_set,omitempty"`
	// MaxHold is the hold limit its grant will have (Holder.MaxHold).
	MaxHold int64 `json:"max_hold,omitempty"`
}

// WaitEnd says why a wait ended without a grant.
type WaitEnd uint8

// Why waits end.
const (
	// WaitSessionGone: the waiter's session was closed or expired.
	WaitSessionGone WaitEnd = iota + 1
	// WaitTimedOut: the wait ran out.
	WaitTimedOut
	// WaitCancelled: the holder released or cancelled its own wait.
	WaitCancelled
)

// grantWaiters grants l to the head of its queue, in FIFO order, as far as
// modes allow: one exclusive waiter, or a run of shared ones; on a
// semaphore, one waiter per free slot out of lock-delay. Waiters whose
// session is gone are skipped.
func (f *FSM) grantWaiters(index uint64, l *Lock) {
	for len(l.Waiters) > 0 && f.hold == nil {
		w := l.Waiters[0]
		ws, ok := f.sessions[w.Session]
		if !ok {
			l.Waiters = l.Waiters[1:]
			f.emit(Event{Kind: EventWaitEnded, Lock: l.Name, Session: w.Session, Holder: w.Holder, Reason: WaitSessionGone})
			continue
		}
		if !canGrant(l, w.Mode) {
			return
		}
		l.Waiters = l.Waiters[1:]
		f.count(ws, 0, -1)
		f.grant(index, l, Holder{Session: w.Session, Holder: w.Holder, Value: w.Value, MaxHold: w.MaxHold}, w.Mode)
	}
}

// dequeue removes (Session, Holder) from l's queue, for the given reason.
// With c.WaitSet set it removes the waiter only if its wait is still the
// one set at that index.
func (f *FSM) dequeue(l *Lock, c *LockRef, why WaitEnd) bool {
	for i, w := range l.Waiters {
		if w.Session == c.Session && w.Holder == c.Holder {
			if c.WaitSet != 0 && w.WaitSet != c.WaitSet {
				return false
			}
			l.Waiters = append(l.Waiters[:i:i], l.Waiters[i+1:]...)
			if s := f.sessions[c.Session]; s != nil {
				f.count(s, -1, -1)
			}
			f.forget(l, c.Session)
			f.emit(Event{Kind: EventWaitEnded, Lock: l.Name, Session: c.Session, Holder: c.Holder, Reason: why})
			return true
		}
	}
	return false
}

// cancelWait ends a wait: the wait set at c.WaitSet ran out, or (WaitSet
// zero) it is cancelled explicitly. If the waiter was granted meanwhile,
// the result says so with its token (the caller then holds the lock).
func (f *FSM) cancelWait(index uint64, c *LockRef) Result {
	r := Result{Index: index, Status: StatusNotWaiting}
	l := f.locks[c.Lock]
	if l == nil {
		return r
	}
	for _, h := range l.Holders {
		if h.Session == c.Session && h.Holder == c.Holder {
			r.Status, r.Token, r.Mode, r.Slot, r.Permits = StatusGranted, h.Token, l.Mode, h.Slot, l.Permits
			return r
		}
	}
	why := WaitCancelled
	if c.WaitSet != 0 {
		why = WaitTimedOut
	}
	if f.dequeue(l, c, why) {
		f.changed(index, l)
		r.Status = StatusOK
	}
	return r
}
