package node

import (
	"context"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/fsm"
)

// The timers of one term: each ends a lock-delay, a wait or the restore
// hold with a proposal. They run on this node's monotonic clock, are armed
// for their full length when the term starts (restartLockTimers) and as
// the state machine starts delays and waits (onEvent), and all stop when
// the term ends.

// leaderTimer is a timer of the leader whose end is a proposal: the end of
// a lock-delay, or of a wait that ran out. Keys are comparable values.
type leaderTimer interface {
	// command is the proposal made when the timer fires (idempotent).
	command() *fsm.Command
	// what names the timer in logs.
	what() string
}

// delayKey names a lock-delay: the lock, the DelayUntil that EndDelay
// carries and, on a semaphore, the slot (two slots of one expired session
// share their until).
type delayKey struct {
	lock  string
	until int64
	slot  uint64
}

func (k delayKey) command() *fsm.Command {
	return &fsm.Command{Type: fsm.CmdEndDelay, EndDelay: &fsm.EndDelay{Lock: k.lock, Until: k.until, Slot: k.slot}}
}

func (k delayKey) what() string { return "end lock-delay of " + k.lock }

// holdKey names the restore hold (fsm.Hold) by the Until that EndHold
// carries.
type holdKey struct{ until int64 }

func (k holdKey) command() *fsm.Command {
	return &fsm.Command{Type: fsm.CmdEndHold, EndHold: &fsm.EndHold{Until: k.until}}
}

func (k holdKey) what() string { return "end the restore hold" }

// waitTimerKey names one wait: the waiter and the index that set it.
type waitTimerKey struct {
	waitKey
	set uint64
}

func (k waitTimerKey) command() *fsm.Command {
	return &fsm.Command{Type: fsm.CmdCancelWait, CancelWait: &fsm.LockRef{Lock: k.lock, Session: k.session,
		Holder: k.holder, WaitSet: k.set}}
}

func (k waitTimerKey) what() string { return "end the wait on " + k.lock }

// holdLimitKey names a grant's hold limit: when its timer fires the
// leader revokes the grant (kind max_hold); a grant that ended meanwhile
// is not found and nothing changes.
type holdLimitKey struct {
	lock, session, holder string
	token                 uint64
}

func (k holdLimitKey) command() *fsm.Command {
	return &fsm.Command{Type: fsm.CmdRevokeGrant, RevokeGrant: &fsm.RevokeGrant{Lock: k.lock, Session: k.session,
		Holder: k.holder, Token: k.token, Kind: fsm.RevokeKindMaxHold, Reason: "max_hold"}}
}

func (k holdLimitKey) what() string { return "revoke the grant of " + k.lock + " at its hold limit" }

// delayLength is how long a leader times a lock-delay whose replicated
// length is delayFor (fsm.Lock.DelayFor, nanoseconds), from when it arms the
// timer. A length of 0 is unknown (state written before lengths were
// replicated): such a delay waits api.MaxLockDelay, the longest any
// lock-delay can be, for a delay may run long but never short.
func delayLength(delayFor int64) time.Duration {
	if delayFor <= 0 {
		return api.MaxLockDelay
	}
	return time.Duration(delayFor)
}

// restartedDelay is a lock-delay that a new leader times again.
type restartedDelay struct {
	key delayKey
	d   time.Duration
}

// delaysToRestart lists the lock-delays running in locks (the state a new
// leader takes over), each to be timed for its full length.
func delaysToRestart(locks []fsm.Lock) []restartedDelay {
	var out []restartedDelay
	for _, l := range locks {
		if l.Delayed {
			out = append(out, restartedDelay{delayKey{l.Name, l.DelayUntil, 0}, delayLength(l.DelayFor)})
		}
		for _, d := range l.SlotDelays {
			out = append(out, restartedDelay{delayKey{l.Name, d.Until, d.Slot}, delayLength(d.For)})
		}
	}
	return out
}

// endDelaysNow ends every running lock-delay at once: the broken build of
// the fault switch revoke-without-notice (Faults), which frees the locks an
// operator's action revoked before their holders can know. Never called
// otherwise.
func (t *leaderTerm) endDelaysNow() {
	for _, r := range delaysToRestart(t.n.fsm.Locks("")) {
		t.mu.Lock()
		if tm, ok := t.timers[r.key]; ok {
			tm.Stop()
			delete(t.timers, r.key)
			delete(t.timerDue, r.key)
		}
		t.mu.Unlock()
		t.scheduleTimer(r.key, 0)
	}
}

// armDelay schedules the end of the lock-delay k after d, on this node's
// monotonic clock. k.until names the delay in the log (EndDelay carries
// it); it is a wall-clock value stamped by whichever leader started the
// delay and is never compared with this node's clock: d is the delay's
// length, timed in full by the leader that starts it and again by every
// new leader (a delay runs long after a failover, never short).
func (t *leaderTerm) armDelay(k delayKey, d time.Duration) {
	if t.n.cfg.Faults.skipLockDelay() {
		d = 0
	}
	t.scheduleTimer(k, d)
}

// waitLength is how long a leader times a wait whose replicated length is
// waitFor (nanoseconds) from when it arms the timer; 0 (a wait recorded
// before lengths were replicated) waits api.MaxWait.
func waitLength(waitFor int64) time.Duration {
	if waitFor <= 0 {
		return api.MaxWait
	}
	return time.Duration(waitFor)
}

// timerRetry is how soon the leader proposes a timer's end again after a
// proposal failed.
const timerRetry = 100 * time.Millisecond

// scheduleTimer proposes k's command after d, unless a timer for k is
// armed already or the term has ended. A proposal that fails while the
// term lasts (not serving yet right after a promotion, when a timer armed
// by an entry applied before the Barrier fires at once under
// SkipLockDelay; an apply queue that stays full) is tried again after
// timerRetry: the commands are idempotent, and a delay or a wait that is
// never ended would last until the next leader change. end stops the
// timers.
func (t *leaderTerm) scheduleTimer(k leaderTimer, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.timers[k]; ok || t.ended {
		return
	}
	t.timerDue[k] = time.Now().Add(d)
	t.timers[k] = time.AfterFunc(d, func() {
		t.mu.Lock()
		delete(t.timers, k)
		delete(t.timerDue, k)
		t.mu.Unlock()
		if _, err := t.n.propose(context.Background(), k.command()); err != nil {
			t.n.log.Warn(k.what()+" failed; trying again", "retry_in", timerRetry, "error", err)
			t.scheduleTimer(k, timerRetry)
		}
	})
}

// due reports when k's timer fires, if it is armed.
func (t *leaderTerm) due(k leaderTimer) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	due, armed := t.timerDue[k]
	return due, armed
}

// stopTimersLocked stops every timer (t.mu held).
func (t *leaderTerm) stopTimersLocked() {
	for k, tm := range t.timers {
		tm.Stop()
		delete(t.timers, k)
		delete(t.timerDue, k)
	}
}

// restartLockTimers arms the timers of every lock-delay and every wait
// for their full length: a new leader's, and a restore's (the deadlines
// were another node's clock, or the backup's).
func (t *leaderTerm) restartLockTimers() {
	n := t.n
	if h, ok := n.fsm.Hold(); ok {
		t.scheduleTimer(holdKey{h.Until}, time.Duration(h.For))
	}
	locks := n.fsm.Locks("")
	for _, r := range delaysToRestart(locks) {
		t.armDelay(r.key, r.d)
	}
	for _, l := range locks {
		for _, h := range l.Holders {
			if h.MaxHold > 0 {
				t.scheduleTimer(holdLimitKey{l.Name, h.Session, h.Holder, h.Token}, time.Duration(h.MaxHold))
			}
		}
		for _, w := range l.Waiters {
			t.scheduleTimer(waitTimerKey{waitKey{l.Name, w.Session, w.Holder}, w.WaitSet}, waitLength(w.WaitFor))
		}
	}
}
