package fsm

import (
	"cmp"
	"slices"
	"sort"
	"strings"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/sequencer"
)

// Holder is one holder of a lock.
type Holder struct {
	Session string `json:"session"`
	Holder  string `json:"holder"`
	Token   uint64 `json:"token"`
	Value   string `json:"value,omitempty"`
	// MaxHold is the grant's hold limit (Acquire.MaxHold, nanoseconds; 0:
	// none): the leader revokes the grant (RevokeGrant, kind max_hold)
	// that long after it learns of the grant, every new leader again in
	// full from its promotion.
	MaxHold int64 `json:"max_hold,omitempty"`
	// ReleaseRequested says who asked the holder to release the grant
	// (RequestRelease; nil: nobody), until the grant ends.
	ReleaseRequested *ReleaseRequest `json:"release_requested,omitempty"`
	// Slot is the semaphore slot the holder holds (0 to the lock's
	// Permits-1); 0 and meaningless on a plain lock (Permits 0).
	Slot uint64 `json:"slot,omitempty"`
}

// SlotDelay is the lock-delay of one slot of a semaphore: the slot's
// holder expired, and the slot stays ungrantable until the leader ends
// the delay (EndDelay names Slot and Until). Until and For are as a plain
// lock's DelayUntil and DelayFor.
type SlotDelay struct {
	Slot  uint64 `json:"slot"`
	Until int64  `json:"until"`
	For   int64  `json:"for,omitempty"`
}

// Lock is one lock. A lock with no holders, no waiters and no delay is not
// stored as a lock; if it was ever granted, its history is kept apart (see
// LockRecord) until newer free histories push it out (MaxFreeGrants), or
// the lock is taken again and carries it on.
type Lock struct {
	Name    string         `json:"name"`
	Mode    sequencer.Mode `json:"mode"`
	Holders []Holder       `json:"holders,omitempty"`
	Waiters []Waiter       `json:"waiters,omitempty"`
	// Delayed is true while the lock-delay of an expired holder runs.
	// DelayUntil is the wall clock of the leader that proposed the expiry
	// (Command.Now) plus the delay's length: it names the delay (EndDelay
	// carries it) and is shown to clients, but no timer is based on it,
	// since another node's clock may differ. DelayFor is that length in
	// nanoseconds, set together with DelayUntil: the leader that starts the
	// delay, and every new leader from its promotion on, times DelayFor on
	// its own monotonic clock. A delayed lock with DelayFor 0 was recorded
	// before the length was replicated: its length is unknown.
	Delayed    bool  `json:"delayed,omitempty"`
	DelayUntil int64 `json:"delay_until,omitempty"`
	DelayFor   int64 `json:"delay_for,omitempty"`
	// Index is the log index of the lock's last change.
	Index uint64 `json:"index"`
	// Grants is the lock's history: its last MaxGrantHistory grants, in
	// grant order (tokens never decrease; the shared grants one entry makes
	// share its token), the current holders' grants included.
	// GrantsSince says how far back it reaches: every grant of the lock
	// whose token is at least GrantsSince is in Grants. A lock stored anew
	// starts it one above the last entry that forgot grants (see
	// LockRecord); it moves to one above the token of each grant dropped
	// from the history. It is 0 on a lock recorded before histories were
	// kept, until its next grant.
	Grants      []PastGrant `json:"grants,omitempty"`
	GrantsSince uint64      `json:"grants_since,omitempty"`
	// Revoked are the grants revoked while the lock's delay runs
	// (RevokeGrant; on a semaphore, each while its slot's delay runs):
	// kept until that delay ends, for their clients' keepalives.
	Revoked []Revocation `json:"revoked,omitempty"`
	// Permits, when above 0, makes the lock a semaphore of that many
	// slots: at most Permits holders (exclusive mode), each in its own
	// slot (Holder.Slot). Every holder and waiter agrees on it while the
	// lock is stored; a free lock forgets it. A semaphore's lock-delays
	// are per slot (SlotDelays, sorted by slot); Delayed stays false.
	Permits    uint64      `json:"permits,omitempty"`
	SlotDelays []SlotDelay `json:"slot_delays,omitempty"`
}

func compatible(l *Lock, m sequencer.Mode) bool {
	return len(l.Holders) == 0 || (l.Mode == sequencer.Shared && m == sequencer.Shared)
}

// canGrant reports whether l can take one more holder of mode m now:
// a semaphore while it has a free slot out of lock-delay, a plain lock
// when out of lock-delay and compatible with m.
func canGrant(l *Lock, m sequencer.Mode) bool {
	if l.Permits > 0 {
		_, ok := freeSlot(l)
		return ok
	}
	return !l.Delayed && compatible(l, m)
}

// freeSlot returns the lowest slot of semaphore l that is neither held
// nor in lock-delay.
func freeSlot(l *Lock) (uint64, bool) {
	if uint64(len(l.Holders)) >= l.Permits {
		return 0, false
	}
	var used [api.MaxPermits / 64]uint64 // a bit per slot; Permits <= MaxPermits (acquire)
	mark := func(s uint64) {
		if s < api.MaxPermits {
			used[s/64] |= 1 << (s % 64)
		}
	}
	for _, h := range l.Holders {
		mark(h.Slot)
	}
	for _, d := range l.SlotDelays {
		mark(d.Slot)
	}
	for s := uint64(0); s < min(l.Permits, api.MaxPermits); s++ {
		if used[s/64]&(1<<(s%64)) == 0 {
			return s, true
		}
	}
	return 0, false
}

// inDelay reports whether a lock-delay of l runs: a plain lock's, or any
// slot's of a semaphore.
func (l *Lock) inDelay() bool {
	return l.Delayed || len(l.SlotDelays) > 0
}

func (f *FSM) acquire(index uint64, c *Acquire) Result {
	r := Result{Index: index, Permits: c.Permits}
	if c.Lock == "" || c.Holder == "" || !c.Mode.Valid() ||
		(c.Permits > 0 && (c.Mode != sequencer.Exclusive || c.Permits > api.MaxPermits)) {
		r.Status = StatusInvalid
		return r
	}
	s, ok := f.sessions[c.Session]
	if !ok {
		r.Status = StatusSessionNotFound
		return r
	}
	l := f.locks[c.Lock]
	if l != nil && l.Permits != c.Permits {
		// Every holder and waiter of a stored lock agrees on its permits
		// (0: a plain lock), a retry included.
		r.Status, r.Permits = StatusPermitsMismatch, l.Permits
		return r
	}
	if l != nil {
		for _, h := range l.Holders {
			if h.Session == c.Session && h.Holder == c.Holder {
				// A retried acquire: the same grant, never a second one,
				// and never one of a mode it did not ask for.
				r.Status, r.Token, r.Mode, r.Slot = StatusGranted, h.Token, l.Mode, h.Slot
				if l.Mode != c.Mode {
					r.Status, r.Token = StatusModeMismatch, 0
				}
				return r
			}
		}
		for i := range l.Waiters {
			w := &l.Waiters[i]
			if w.Session != c.Session || w.Holder != c.Holder {
				continue
			}
			// A retry by a queued holder keeps its place: a try finds the
			// lock busy, a wait sets the wait again from now.
			switch {
			case w.Mode != c.Mode:
				r.Status, r.Mode = StatusModeMismatch, w.Mode
			case !c.Wait:
				r.Status, r.Busy = StatusLockBusy, f.busy(l, i+1)
			default:
				w.WaitFor, w.WaitSet = c.WaitFor, index
				f.emit(Event{Kind: EventWaitSet, Lock: l.Name, Session: w.Session, Holder: w.Holder, WaitFor: w.WaitFor, Index: index})
				r.Status = StatusQueued
			}
			return r
		}
	}
	grantable := f.hold == nil && (l == nil || (len(l.Waiters) == 0 && canGrant(l, c.Mode)))
	if !grantable && !c.Wait {
		r.Status, r.Busy = StatusLockBusy, f.busy(l, 0)
		return r
	}
	// What the acquire would add, checked before anything changes.
	var u api.Usage
	if l == nil {
		u.Locks = len(f.locks) + 1
	}
	u.SessionLocks = s.Holds + 1
	if s.Owner != "" {
		u.TokenLocks = f.tokenLocks[s.Owner] + 1
	}
	if !grantable {
		u.Waiters = 1 // a free lock, but the restore hold runs
		if l != nil {
			u.Waiters = len(l.Waiters) + 1
		}
		if s.Owner != "" {
			u.TokenWaiters = f.tokenWaits[s.Owner] + 1
		}
	}
	if err := c.Limits.Exceeded(u); err != nil {
		r.Status, r.Refusal = StatusResourceExhausted, err.Message
		return r
	}
	if l == nil {
		// A free lock: granted below, it carries on the history it left
		// behind, or starts one, complete since the state machine last
		// forgot grants.
		if l = f.takeFree(c.Lock); l == nil {
			l = &Lock{Name: c.Lock, GrantsSince: f.forgot + 1}
		}
		l.Permits = c.Permits
	}
	f.locks[c.Lock] = l
	s.addLock(c.Lock)
	if grantable {
		f.count(s, 1, 0)
		h := f.grant(index, l, Holder{Session: c.Session, Holder: c.Holder, Value: c.Value, MaxHold: c.MaxHold}, c.Mode)
		f.changed(index, l)
		r.Status, r.Token, r.Mode, r.Slot = StatusGranted, index, c.Mode, h.Slot
		return r
	}
	f.count(s, 1, 1)
	l.Waiters = append(l.Waiters, Waiter{Session: c.Session, Holder: c.Holder, Mode: c.Mode, Value: c.Value,
		WaitFor: c.WaitFor, WaitSet: index, MaxHold: c.MaxHold})
	f.emit(Event{Kind: EventWaitSet, Lock: c.Lock, Session: c.Session, Holder: c.Holder, WaitFor: c.WaitFor, Index: index})
	f.changed(index, l)
	r.Status = StatusQueued
	return r
}

// busy describes the busy lock l for an acquire whose holder waits at
// place in its queue (0: not queued).
func (f *FSM) busy(l *Lock, place int) *Busy {
	b := &Busy{}
	if f.hold != nil {
		b.DelayUntil = f.hold.Until
	}
	if l == nil {
		return b // free, but the restore hold runs
	}
	b.Waiters, b.Place = len(l.Waiters), place
	if len(l.Holders) > 0 {
		b.Mode = l.Mode
	}
	if l.Delayed {
		b.DelayUntil = max(b.DelayUntil, l.DelayUntil)
	}
	if _, free := freeSlot(l); l.Permits > 0 && !free && len(l.SlotDelays) > 0 {
		// The first slot delay to end (by the stamped clocks).
		first := l.SlotDelays[0].Until
		for _, d := range l.SlotDelays {
			first = min(first, d.Until)
		}
		b.DelayUntil = max(b.DelayUntil, first)
	}
	b.Permits = l.Permits
	for _, h := range l.Holders {
		var name string
		if s := f.sessions[h.Session]; s != nil {
			name = s.Name
		}
		b.Holders = append(b.Holders, BusyHolder{SessionName: name, Holder: h.Holder})
	}
	return b
}

// grant makes h a holder of l in mode m with the entry's index as token
// (and, on a semaphore, the lowest free slot: the caller checked that one
// is free), and returns it.
func (f *FSM) grant(index uint64, l *Lock, h Holder, m sequencer.Mode) Holder {
	h.Token = index
	if l.Permits > 0 {
		h.Slot, _ = freeSlot(l)
	}
	l.Mode = m
	l.Holders = append(l.Holders, h)
	f.record(l, h, m)
	f.emit(Event{Kind: EventGranted, Lock: l.Name, Session: h.Session, Holder: h.Holder, Token: index, Mode: m,
		MaxHold: h.MaxHold, Slot: h.Slot, Semaphore: l.Permits > 0})
	return h
}

// changed grants what can be granted, records the change and drops the lock
// if nothing is left of it.
func (f *FSM) changed(index uint64, l *Lock) {
	f.grantWaiters(index, l)
	l.Index = index
	if len(l.Waiters) == 0 {
		l.Waiters = nil
	}
	if len(l.Holders) == 0 && len(l.Waiters) == 0 && !l.inDelay() {
		delete(f.locks, l.Name)
		f.keepFree(index, l)
	}
	f.emit(Event{Kind: EventLockChanged, Lock: l.Name, Index: index})
}

// forget drops name from the session's set unless it still holds or waits.
func (f *FSM) forget(l *Lock, session string) {
	s := f.sessions[session]
	if s == nil {
		return
	}
	for _, h := range l.Holders {
		if h.Session == session {
			return
		}
	}
	for _, w := range l.Waiters {
		if w.Session == session {
			return
		}
	}
	delete(s.Locks, l.Name)
	if len(s.Locks) == 0 {
		s.Locks = nil // its last lock: give the set's memory back
	}
}

func (f *FSM) release(index uint64, c *LockRef) Status {
	s, ok := f.sessions[c.Session]
	if !ok {
		return StatusSessionNotFound
	}
	l := f.locks[c.Lock]
	if l == nil {
		return StatusOK // a repeated release of a free lock
	}
	for i, h := range l.Holders {
		if h.Session == c.Session && h.Holder == c.Holder {
			l.Holders = append(l.Holders[:i:i], l.Holders[i+1:]...)
			f.emit(Event{Kind: EventReleased, Lock: l.Name, Session: h.Session, Holder: h.Holder, Token: h.Token, Mode: l.Mode,
				Slot: h.Slot, Semaphore: l.Permits > 0})
			f.count(s, -1, 0)
			s.remember(c.Lock, c.Holder)
			f.forget(l, c.Session)
			f.changed(index, l)
			return StatusOK
		}
	}
	if f.dequeue(l, c, WaitCancelled) {
		s.remember(c.Lock, c.Holder)
		f.changed(index, l)
		return StatusOK
	}
	if len(l.Holders) > 0 && !s.releasedRecently(c.Lock, c.Holder) {
		return StatusNotHolder
	}
	return StatusOK // a repeated release: the first one took effect
}

// delay makes l unavailable for d nanoseconds from the state machine's
// clock, unless a delay ending later (by the stamped clocks) runs already:
// the one ending last wins, its length with it.
func (f *FSM) delay(l *Lock, d int64) {
	until := f.now + d
	if !l.Delayed || until > l.DelayUntil {
		l.Delayed, l.DelayUntil, l.DelayFor = true, until, d
		f.emit(Event{Kind: EventDelayStarted, Lock: l.Name, DelayUntil: until, DelayFor: d})
	}
}

// delaySlot puts slot of semaphore l into lock-delay for d nanoseconds
// from the state machine's clock, unless a delay of that slot ending
// later runs already (as delay).
func (f *FSM) delaySlot(l *Lock, slot uint64, d int64) {
	until := f.now + d
	i, found := slices.BinarySearchFunc(l.SlotDelays, slot, func(sd SlotDelay, s uint64) int { return cmp.Compare(sd.Slot, s) })
	switch {
	case found && until <= l.SlotDelays[i].Until:
		return
	case found:
		l.SlotDelays[i].Until, l.SlotDelays[i].For = until, d
	default:
		l.SlotDelays = slices.Insert(l.SlotDelays, i, SlotDelay{Slot: slot, Until: until, For: d})
	}
	f.emit(Event{Kind: EventDelayStarted, Lock: l.Name, DelayUntil: until, DelayFor: d, Slot: slot, Semaphore: true})
}

func (f *FSM) endDelay(index uint64, c *EndDelay) Status {
	l := f.locks[c.Lock]
	if l != nil && l.Permits > 0 {
		i := slices.IndexFunc(l.SlotDelays, func(d SlotDelay) bool { return d.Slot == c.Slot && d.Until == c.Until })
		if i < 0 {
			return StatusOK // already ended, or extended by a later expiry
		}
		l.SlotDelays = slices.Delete(l.SlotDelays, i, i+1)
		if len(l.SlotDelays) == 0 {
			l.SlotDelays = nil
		}
		f.clearRevoked(l, c.Slot)
		f.changed(index, l)
		return StatusOK
	}
	if l == nil || !l.Delayed || l.DelayUntil != c.Until || c.Slot != 0 {
		return StatusOK // already ended, or extended by a later expiry
	}
	l.Delayed, l.DelayUntil, l.DelayFor = false, 0, 0
	f.clearRevoked(l, 0)
	f.changed(index, l)
	return StatusOK
}

func copyLock(l *Lock) Lock {
	c := *l
	c.Holders = append([]Holder(nil), l.Holders...)
	for i := range c.Holders {
		if r := c.Holders[i].ReleaseRequested; r != nil {
			cr := *r
			c.Holders[i].ReleaseRequested = &cr
		}
	}
	c.Waiters = append([]Waiter(nil), l.Waiters...)
	c.Grants = append([]PastGrant(nil), l.Grants...)
	c.Revoked = append([]Revocation(nil), l.Revoked...)
	c.SlotDelays = slices.Clone(l.SlotDelays)
	return c
}

// Lock returns a copy of the named lock; a free lock is not found.
func (f *FSM) Lock(name string) (Lock, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	l, ok := f.locks[name]
	if !ok {
		return Lock{}, false
	}
	return copyLock(l), true
}

// LockAt returns a copy of one lock together with the index of the last
// entry applied, read atomically: a change to the lock after that index is
// not yet reflected in the copy, and every change up to it is.
func (f *FSM) LockAt(name string) (l Lock, ok bool, applied uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if cur, found := f.locks[name]; found {
		l, ok = copyLock(cur), true
	}
	return l, ok, f.applied
}

// LockRecord returns a copy of what the state machine keeps of one lock,
// together with the index of the last entry applied, read atomically (as
// LockAt): the lock if it is stored; else, for a free lock whose history
// is still kept, that history as a Lock with no holders, waiters or delay,
// whose Index is the entry that freed it. Else ok is false (the lock was
// never granted, or its history was dropped: MaxFreeGrants) and l is an
// empty history of name whose GrantsSince is one above the last entry
// that forgot grants: the lock had no grant since.
func (f *FSM) LockRecord(name string) (l Lock, ok bool, applied uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if cur, found := f.locks[name]; found {
		return copyLock(cur), true, f.applied
	}
	if e := f.freeAt[name]; e != nil {
		return copyLock(e.Value.(*Lock)), true, f.applied
	}
	return Lock{Name: name, GrantsSince: f.forgot + 1}, false, f.applied
}

// Locks returns copies of the locks whose names start with prefix, sorted.
func (f *FSM) Locks(prefix string) []Lock {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := []Lock{}
	for name, l := range f.locks {
		if strings.HasPrefix(name, prefix) {
			out = append(out, copyLock(l))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// LockCount returns how many locks are stored: held, waited for or in
// lock-delay (the free histories are not counted).
func (f *FSM) LockCount() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.locks)
}
