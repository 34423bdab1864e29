package apitest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/sequencer"
)

// lock takes the fake's lock and applies what the clock has made due.
func (b *Backend) lock() {
	b.mu.Lock()
	b.sweepLocked()
}

// unlock arms the timer for the next deadline and lets the lock go.
func (b *Backend) unlock() {
	b.armLocked()
	b.mu.Unlock()
}

// waitLocked lets the lock go until the state changes, ctx is done or
// (with the real clock) deadline passes (zero: none), and takes it again;
// meanwhile the call, of method, counts as waiting.
func (b *Backend) waitLocked(ctx context.Context, method string, deadline time.Time) error {
	changed := b.changed
	var expired <-chan time.Time
	if b.real && !deadline.IsZero() {
		t := time.NewTimer(deadline.Sub(b.now()))
		defer t.Stop()
		expired = t.C
	}
	b.waiting[method]++
	b.unlock()
	defer func() {
		b.lock()
		b.waiting[method]--
	}()
	select {
	case <-changed:
	case <-expired:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

func (b *Backend) notifyLocked() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// applyLocked applies c to the state machine as the next log entry,
// stamped with the fake's clock as a leader stamps it. The entry takes
// the next index only if it changed something (an event other than a
// wait set again); then every blocked call looks again.
func (b *Backend) applyLocked(c fsm.Command) fsm.Result {
	c.Now = b.now().UnixNano()
	b.dirty = false
	r := b.fsm.ApplyCommand(b.index+1, c)
	if b.dirty {
		b.index++
		b.notifyLocked()
	}
	return r
}

// onEvent follows the state machine's events (called from Apply, with
// b.mu held by the applying call): it marks the entry a change, counts
// grants and ends the places whose wait ended.
func (b *Backend) onEvent(e fsm.Event) {
	if e.Kind != fsm.EventWaitSet {
		b.dirty = true
	}
	switch e.Kind {
	case fsm.EventGranted:
		b.grants++
		if w := b.takePlace(e); w != nil {
			w.token, w.mode, w.slot = sequencer.Token(e.Token), e.Mode, e.Slot
		}
	case fsm.EventWaitEnded:
		w := b.takePlace(e)
		if w == nil {
			return
		}
		switch e.Reason {
		case fsm.WaitCancelled:
			w.err = api.Errorf(api.CodeWaitCancelled, "acquire %s: the wait was cancelled by its holder (released while queued)", e.Lock)
		case fsm.WaitTimedOut:
			w.err = api.Errorf(api.CodeWaitTimeout, "acquire %s: not granted within %v; no longer queued", e.Lock, w.wait)
		default:
			w.err = api.Errorf(api.CodeSessionNotFound, "acquire %s: the wait ended: session closed or expired", e.Lock)
		}
	}
}

// takePlace marks the place of e's (lock, session, holder) done and
// forgets it; nil if it was not queued.
func (b *Backend) takePlace(e fsm.Event) *waiter {
	k := place{e.Lock, e.Session, e.Holder}
	w := b.places[k]
	if w != nil {
		delete(b.places, k)
		w.done = true
	}
	return w
}

// unexpected is the error of a state machine outcome the fake's own
// checks should have made impossible.
func unexpected(op string, r fsm.Result) error {
	return fmt.Errorf("apitest: %s: unexpected outcome %s", op, r.Status)
}

func (b *Backend) sessionLocked(id string) (fsm.SessionRecord, error) {
	if err := api.CheckSessionID(id); err != nil {
		return fsm.SessionRecord{}, err
	}
	s, ok := b.fsm.Session(id)
	if !ok {
		return fsm.SessionRecord{}, api.Errorf(api.CodeSessionNotFound, "session (handle %s): unknown, closed or expired", api.SessionHandle(id))
	}
	return s, nil
}

func (b *Backend) infoLocked(id string) api.Info {
	s, _ := b.fsm.Session(id)
	info := api.Info{ID: s.ID, Name: s.Name, TTL: time.Duration(s.TTL), LockDelay: time.Duration(s.LockDelay), Locks: []string{}}
	for _, name := range slices.Sorted(maps.Keys(s.Locks)) {
		if l, ok := b.fsm.Lock(name); ok && slices.ContainsFunc(l.Holders, func(h fsm.Holder) bool { return h.Session == id }) {
			info.Locks = append(info.Locks, name)
		}
	}
	return info
}

func (b *Backend) grant(name string, tok sequencer.Token, m sequencer.Mode, permits, slot uint64) api.Grant {
	g := api.Grant{Name: name, Mode: m, Token: tok,
		Sequencer: sequencer.Sequencer{Name: name, Mode: m, Token: tok}, Term: b.term}
	if permits > 0 {
		g.Permits, g.Slot = permits, slot
		g.Sequencer.Semaphore, g.Sequencer.Slot, g.Sequencer.Permits = true, slot, permits
	}
	return g
}

// acquireLocked proposes an acquire: a grant, an error, or the place (new
// or kept) whose outcome the request waits for.
func (b *Backend) acquireLocked(req api.AcquireRequest) (*waiter, api.Grant, error) {
	if _, err := b.sessionLocked(req.Session); err != nil {
		return nil, api.Grant{}, err
	}
	r := b.applyLocked(fsm.Command{Type: fsm.CmdAcquire, Acquire: &fsm.Acquire{Lock: req.Name, Session: req.Session,
		Holder: req.Holder, Mode: req.Mode, Wait: req.Wait > 0, WaitFor: int64(req.Wait), Value: req.Value, Permits: req.Permits}})
	switch r.Status {
	case fsm.StatusGranted:
		return nil, b.grant(req.Name, sequencer.Token(r.Token), r.Mode, req.Permits, r.Slot), nil
	case fsm.StatusPermitsMismatch:
		return nil, api.Grant{}, api.Errorf(api.CodeInvalidArgument, "acquire %s: the lock has permits %d; this acquire asks for %d",
			req.Name, r.Permits, req.Permits)
	case fsm.StatusModeMismatch:
		return nil, api.Grant{}, api.Errorf(api.CodeInvalidArgument, "acquire %s: holder %s already holds or waits for the lock in %s mode; it asked for %s",
			req.Name, req.Holder, r.Mode, req.Mode)
	case fsm.StatusLockBusy:
		return nil, api.Grant{}, api.Errorf(api.CodeLockBusy, "acquire %s: lock is held or in its lock-delay", req.Name)
	case fsm.StatusQueued:
		k := place{req.Name, req.Session, req.Holder}
		w := b.places[k]
		if w == nil {
			w = &waiter{}
			b.places[k] = w
		}
		w.wait, w.deadline = req.Wait, b.now().Add(req.Wait)
		return w, api.Grant{}, nil
	}
	return nil, api.Grant{}, unexpected("acquire "+req.Name, r)
}

// endSessionLocked closes or (expire) expires a session in one entry: its
// holds are released, on expiry into its lock-delay, and its waits end.
func (b *Backend) endSessionLocked(id string, expire bool) {
	delete(b.leases, id)
	c := fsm.Command{Type: fsm.CmdCloseSession, CloseSession: &fsm.SessionRef{ID: id}}
	if expire {
		c = fsm.Command{Type: fsm.CmdExpireSession, ExpireSession: &fsm.SessionRef{ID: id}}
	}
	b.applyLocked(c)
}

// sweepLocked proposes what is due by the clock, as a leader's timers
// would: expiries (unless WithoutExpiry), ends of lock-delays, waits that
// ran out.
func (b *Backend) sweepLocked() {
	now := b.now()
	if b.expire {
		for _, id := range slices.Sorted(maps.Keys(b.leases)) {
			if !now.Before(b.leases[id]) {
				b.endSessionLocked(id, true)
			}
		}
	}
	for _, l := range b.fsm.Locks("") {
		if l.Delayed && !now.Before(time.Unix(0, l.DelayUntil)) {
			b.applyLocked(fsm.Command{Type: fsm.CmdEndDelay, EndDelay: &fsm.EndDelay{Lock: l.Name, Until: l.DelayUntil}})
		}
		for _, d := range l.SlotDelays {
			if !now.Before(time.Unix(0, d.Until)) {
				b.applyLocked(fsm.Command{Type: fsm.CmdEndDelay, EndDelay: &fsm.EndDelay{Lock: l.Name, Until: d.Until, Slot: d.Slot}})
			}
		}
		for _, w := range l.Waiters {
			if p := b.places[place{l.Name, w.Session, w.Holder}]; p != nil && !now.Before(p.deadline) {
				b.applyLocked(fsm.Command{Type: fsm.CmdCancelWait, CancelWait: &fsm.LockRef{Lock: l.Name,
					Session: w.Session, Holder: w.Holder, WaitSet: w.WaitSet}})
			}
		}
	}
}

// armLocked sets the real timer (none with an injected clock) to sweep at
// the next deadline.
func (b *Backend) armLocked() {
	if !b.real {
		return
	}
	var due time.Time
	next := func(t time.Time) {
		if !t.IsZero() && (due.IsZero() || t.Before(due)) {
			due = t
		}
	}
	if b.expire {
		for _, d := range b.leases {
			next(d)
		}
	}
	for _, l := range b.fsm.Locks("") {
		if l.Delayed {
			next(time.Unix(0, l.DelayUntil))
		}
		for _, d := range l.SlotDelays {
			next(time.Unix(0, d.Until))
		}
	}
	for _, w := range b.places {
		next(w.deadline)
	}
	if due.Equal(b.timerDue) {
		return
	}
	if b.timer != nil {
		b.timer.Stop()
	}
	b.timer, b.timerDue = nil, due
	if !due.IsZero() {
		b.timer = time.AfterFunc(due.Sub(b.now()), b.Sweep)
	}
}

// stateLocked describes a lock as the contract does: a free one with no
// holders and the current index.
func (b *Backend) stateLocked(name string) api.LockState {
	l, ok := b.fsm.Lock(name)
	if !ok {
		return api.LockState{Name: name, Holders: []api.Holder{}, Index: b.index}
	}
	return b.stateOf(l)
}

// stateOf describes a stored lock as readers see it: sessions by handle
// and name, never by id.
func (b *Backend) stateOf(l fsm.Lock) api.LockState {
	st := api.LockState{Name: l.Name, Mode: l.Mode, Holders: []api.Holder{}, Waiters: len(l.Waiters), Index: l.Index,
		Permits: l.Permits}
	for _, d := range l.SlotDelays {
		st.SlotDelays = append(st.SlotDelays, api.SlotDelay{Slot: d.Slot, Until: time.Unix(0, d.Until).UTC()})
	}
	if len(l.Holders) == 0 {
		st.Mode = 0
	}
	for _, h := range l.Holders {
		ah := api.Holder{SessionHandle: api.SessionHandle(h.Session), Holder: h.Holder, Token: sequencer.Token(h.Token), Value: h.Value,
			Slot: h.Slot}
		if s, ok := b.fsm.Session(h.Session); ok {
			ah.SessionName = s.Name
		}
		st.Holders = append(st.Holders, ah)
	}
	for _, w := range l.Waiters {
		st.Queue = append(st.Queue, api.QueuedHolder{Holder: w.Holder, Mode: w.Mode})
	}
	if l.Delayed {
		st.DelayUntil = time.Unix(0, l.DelayUntil).UTC()
	}
	return st
}
