package fsm

import (
	"slices"
	"sort"

	"github.com/raftlock/raftlock/api"
)

// SessionRecord is an open session as replicated.
type SessionRecord struct {
	ID        string `json:"id"`
	Name      string `json:"name,omitempty"`
	TTL       int64  `json:"ttl"`
	LockDelay int64  `json:"lock_delay"`
	// Created is the leader's clock when the session was opened.
	Created int64 `json:"created"`
	// Owner is the id of the ACL token that opened it (empty with ACLs
	// off): deleting that token ends the session (revoked).
	Owner string `json:"owner,omitempty"`
	// Released are the session's last MaxRecentReleases releases (lock and
	// holder id), oldest first: a release repeated after an unknown
	// outcome finds its first attempt here and is answered as done, even
	// when the lock went to someone else in between.
	Released []ReleasedHold `json:"released,omitempty"`
	// Locks are the names of the locks it holds or waits for; nil while
	// there are none (most sessions hold no lock: an empty map would
	// cost every one of them its header).
	Locks map[string]struct{} `json:"-"`
	// Holds counts its holds and waits (one per lock and holder id): what
	// api.Limits.LocksPerSession bounds. Like Locks it is rebuilt on
	// Restore; it changes only through FSM.count.
	Holds int `json:"-"`
	// Revoked are its grants revoked while their locks' delays run
	// (Lock.Revoked, from which Load rebuilds it): what its keepalive
	// answers name.
	Revoked []RevokedGrant `json:"-"`
}

// MaxRecentReleases is how many of its latest releases a session
// remembers (SessionRecord.Released): a repeated release is recognised
// while fewer than this many other releases of the same session came
// after it. Part of the state machine: every replica keeps the same.
const MaxRecentReleases = 4

// ReleasedHold names one release of a session: the lock and the holder id
// that released it.
type ReleasedHold struct {
	Lock   string `json:"lock"`
	Holder string `json:"holder"`
}

// remember records a release of (lock, holder) in s.Released.
func (s *SessionRecord) remember(lock, holder string) {
	r := ReleasedHold{Lock: lock, Holder: holder}
	for i, x := range s.Released {
		if x == r {
			s.Released = append(s.Released[:i:i], s.Released[i+1:]...)
			break
		}
	}
	if len(s.Released) >= MaxRecentReleases {
		s.Released = append(s.Released[:0:0], s.Released[1:]...)
	}
	s.Released = append(s.Released, r)
}

// releasedRecently reports whether (lock, holder) is among s's latest
// releases.
func (s *SessionRecord) releasedRecently(lock, holder string) bool {
	for _, x := range s.Released {
		if x.Lock == lock && x.Holder == holder {
			return true
		}
	}
	return false
}

func (f *FSM) openSession(c *OpenSession) (Status, string) {
	if c.ID == "" || c.TTL <= 0 || c.LockDelay < 0 {
		return StatusInvalid, ""
	}
	if _, ok := f.sessions[c.ID]; ok {
		return StatusSessionExists, ""
	}
	u := api.Usage{Sessions: len(f.sessions) + 1}
	if c.Owner != "" {
		u.TokenSessions = f.owned[c.Owner] + 1
	}
	if err := c.Limits.Exceeded(u); err != nil {
		return StatusResourceExhausted, err.Message
	}
	if c.Owner != "" {
		f.owned[c.Owner]++
	}
	f.sessions[c.ID] = &SessionRecord{ID: c.ID, Name: c.Name, TTL: c.TTL, LockDelay: c.LockDelay,
		Created: f.now, Owner: c.Owner}
	f.emit(Event{Kind: EventSessionOpened, Session: c.ID, TTL: c.TTL, Name: c.Name})
	return StatusOK, ""
}

// count adds holds to session s's holds and waits (Holds), and both holds
// and waits (its waits alone) to its token's sums (tokenLocks, tokenWaits).
func (f *FSM) count(s *SessionRecord, holds, waits int) {
	s.Holds += holds
	if s.Owner == "" {
		return
	}
	for _, c := range [...]struct {
		m map[string]int
		d int
	}{{f.tokenLocks, holds}, {f.tokenWaits, waits}} {
		if c.d == 0 {
			continue
		}
		if c.m[s.Owner] += c.d; c.m[s.Owner] <= 0 {
			delete(c.m, s.Owner)
		}
	}
}

// disown counts a session of token owner (empty: none) closed.
func (f *FSM) disown(owner string) {
	if owner == "" {
		return
	}
	if f.owned[owner]--; f.owned[owner] <= 0 {
		delete(f.owned, owner)
	}
}

// sessionEnd says how a session ends, which decides how long its locks
// stay unavailable.
type sessionEnd uint8

const (
	// endClose: its client closed it; locks free at once.
	endClose sessionEnd = iota
	// endExpire: its lease ran out; each lock it held waits out the
	// session's lock-delay.
	endExpire
	// endRevoke: the cluster ended it while its client may still hold a
	// lease (its ACL token was deleted): each lock it held waits out the
	// session's ttl plus its lock-delay, the longest its client can go on
	// believing it holds the lock (DESIGN.md, "Server actions never
	// outrun the holder").
	endRevoke
)

// heldFor is how long a lock held by s stays unavailable after s ends so.
func (e sessionEnd) heldFor(s *SessionRecord) int64 {
	switch e {
	case endExpire:
		return s.LockDelay
	case endRevoke:
		return s.TTL + s.LockDelay
	}
	return 0
}

// removeSession ends a session: its holds are released (with the delay
// its end calls for) and its waits dropped.
func (f *FSM) removeSession(index uint64, id string, end sessionEnd) Status {
	s, ok := f.sessions[id]
	if !ok {
		return StatusSessionNotFound
	}
	delete(f.sessions, id)
	f.disown(s.Owner)
	// Its revocations go with it: no keepalive of it will be answered.
	// (The locks' delays run on.)
	for _, g := range s.Revoked {
		if l := f.locks[g.Lock]; l != nil {
			l.Revoked = slices.DeleteFunc(l.Revoked, func(r Revocation) bool { return r.Session == id })
			if len(l.Revoked) == 0 {
				l.Revoked = nil
			}
		}
	}
	delay := end.heldFor(s)
	f.count(s, -s.Holds, 0) // its waits are counted off below, as dropped
	for _, name := range sortedKeys(s.Locks) {
		l := f.locks[name]
		if l == nil {
			continue
		}
		held := false
		var slots []uint64 // a semaphore's slots it held, in grant order
		keptH := l.Holders[:0]
		for _, h := range l.Holders {
			if h.Session == id {
				held = true
				slots = append(slots, h.Slot)
				continue
			}
			keptH = append(keptH, h)
		}
		l.Holders = keptH
		keptW := l.Waiters[:0]
		for _, w := range l.Waiters {
			if w.Session == id {
				f.count(s, 0, -1)
				f.emit(Event{Kind: EventWaitEnded, Lock: name, Session: id, Holder: w.Holder, Reason: WaitSessionGone})
				continue
			}
			keptW = append(keptW, w)
		}
		l.Waiters = keptW
		switch {
		case !held || delay <= 0:
		case l.Permits > 0:
			for _, slot := range slots {
				f.delaySlot(l, slot, delay)
			}
		default:
			f.delay(l, delay)
		}
		f.changed(index, l)
	}
	f.emit(Event{Kind: EventSessionRemoved, Session: id, Name: s.Name, Expired: end == endExpire})
	return StatusOK
}

func sortedKeys(m map[string]struct{}) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func copySession(s *SessionRecord) SessionRecord {
	c := *s
	c.Released = slices.Clone(s.Released)
	c.Revoked = slices.Clone(s.Revoked)
	c.Locks = make(map[string]struct{}, len(s.Locks))
	for k := range s.Locks {
		c.Locks[k] = struct{}{}
	}
	return c
}

// Session returns a copy of session id.
func (f *FSM) Session(id string) (SessionRecord, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s, ok := f.sessions[id]
	if !ok {
		return SessionRecord{}, false
	}
	return copySession(s), true
}

// Sessions returns copies of every session, sorted by id.
func (f *FSM) Sessions() []SessionRecord {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]SessionRecord, 0, len(f.sessions))
	for _, s := range f.sessions {
		out = append(out, copySession(s))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// addLock records that the session holds or waits for lock name, making
// its lock set on the first.
func (s *SessionRecord) addLock(name string) {
	if s.Locks == nil {
		s.Locks = make(map[string]struct{}, 1)
	}
	s.Locks[name] = struct{}{}
}
