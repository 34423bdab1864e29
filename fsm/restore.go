package fsm

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/raftlock/raftlock/api"
)

// Summary describes a serialised state (a Dump): what a backup holds.
type Summary struct {
	// Applied is the index of the last entry the state had applied.
	Applied uint64 `json:"applied"`
	// Sessions, Locks (held, waited for, in lock-delay or kept free with
	// their history), Members and Tokens (ACL) count the state's records.
	Sessions int `json:"sessions"`
	Locks    int `json:"locks"`
	Held     int `json:"held"`
	Members  int `json:"members"`
	Tokens   int `json:"acl_tokens"`
	// Bootstrapped: the ACL bootstrap had happened.
	Bootstrapped bool `json:"acl_bootstrapped"`
}

// Inspect decodes a Dump completely, as Restore would, and summarises it.
// An error means Restore would refuse it.
func Inspect(data []byte) (Summary, error) {
	f := New(nil)
	if err := f.Load(data); err != nil {
		return Summary{}, err
	}
	return f.summary(), nil
}

func (f *FSM) summary() Summary {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := Summary{Applied: f.applied, Sessions: len(f.sessions), Locks: len(f.locks), Members: len(f.members),
		Tokens: len(f.tokens), Bootstrapped: f.bootstrapped}
	for _, l := range f.locks {
		if len(l.Holders) > 0 {
			s.Held++
		}
	}
	return s
}

// RestoreReport says what a restore's reconciliation did (PrepareRestore,
// PrepareNewCluster).
type RestoreReport struct {
	// SessionsKept are the backup's sessions restored: those the running
	// cluster has too, holding the same grants. SessionsEnded are the
	// sessions of either state that the restore ends.
	SessionsKept  int `json:"sessions_kept"`
	SessionsEnded int `json:"sessions_ended"`
	// GrantsRevoked counts the running cluster's grants the restore takes
	// away: each lock stays unavailable for its holder's ttl + lock-delay.
	// GrantsDropped counts the backup's grants not restored: their holders'
	// clients no longer hold them (or were never told they do).
	GrantsRevoked int `json:"grants_revoked"`
	GrantsDropped int `json:"grants_dropped"`
	// HoldFor is the new cluster's restore hold (FSM.Hold), nanoseconds.
	HoldFor int64 `json:"hold_for,omitempty"`
	// State summarises the prepared state (its final decode, Inspect).
	State Summary `json:"state"`
}

// PrepareRestore returns a Dump (data, a backup's state) prepared to be
// restored into the running cluster whose state machine is current (it
// must not change meanwhile: the leader refuses proposals and drains Raft
// first), whose log may have passed floor. The restore must not break the
// client's promise (DESIGN.md, "Server actions never outrun the holder"),
// so the backup is reconciled with what the clients of the running cluster
// believe:
//
//   - a backup's session is restored only if the running cluster has it
//     too, holding exactly the same grants (lock, holder id, token, mode);
//     every other session, of either state, ends: its client learns it at
//     its next request (session_not_found);
//   - a grant of the running cluster that the restored state lacks is
//     revoked: its lock stays unavailable for its holder's ttl +
//     lock-delay, the longest its client can go on believing it holds it;
//     a lock-delay the running cluster runs goes on in full;
//   - a backup's grant whose session ends is dropped (its client released
//     it since, or is told its session is over), and so is a backup's
//     waiter that no longer waits in the running cluster (its client gave
//     up the place); waits of the running cluster the backup lacks are
//     asked again by their clients' next request;
//   - ACL tokens and the member table are the running cluster's (a
//     restore never brings back a deleted token, nor removes one created
//     since);
//   - tokens up to floor may have been issued that the state does not
//     record, so the applied index becomes at least floor (a lock's index
//     never goes backwards, and every lock's index is floor: a watcher
//     waiting on it wakes), every lock history, held or free, says it is
//     complete only from floor+1 (GrantsSince), and so does the state for
//     locks it has no record of (forgot). The restore itself puts every
//     later entry, hence every later token, above floor (node's restore).
//
// data is decoded completely first: an error means the state would not
// restore, and nothing is prepared.
func PrepareRestore(data []byte, floor uint64, current *FSM) ([]byte, RestoreReport, error) {
	r := New(nil)
	if err := r.Load(data); err != nil {
		return nil, RestoreReport{}, err
	}
	current.mu.RLock()
	defer current.mu.RUnlock()
	r.mu.Lock()
	rep := r.reconcile(current)
	r.members = maps.Clone(current.members)
	r.tokens, r.byHash = make(map[string]*Token), make(map[string]*Token)
	for id, t := range current.tokens {
		c := *t
		c.Rules = slices.Clone(t.Rules)
		r.tokens[id], r.byHash[c.Hash] = &c, &c
	}
	r.bootstrapped = current.bootstrapped
	r.raiseTo(floor)
	out := r.dumpLocked()
	r.mu.Unlock()
	sum, err := Inspect(out)
	if err != nil {
		return nil, RestoreReport{}, fmt.Errorf("fsm: prepare restore: the state no longer decodes: %w", err)
	}
	rep.State = sum
	return out, rep, nil
}

// PrepareNewCluster returns a Dump (data, a backup's state) prepared to be
// the first state of a brand-new cluster (raftlockd --restore), whose
// members are members. That cluster cannot know what the old one granted
// after the backup, nor which of the backup's grants its clients still
// believe they hold, so: no session is restored (every client of the old
// cluster is told its session is over at its first request to the new
// one), no grant or waiter either, and a restore hold of holdFor
// nanoseconds (FSM.Hold; 0: none) keeps every lock from being granted
// until the clients that cannot reach the new cluster have reached the end
// of their lease plus lock-delay. Lock histories, ACL tokens and the
// bootstrap are the backup's. The applied index and histories are raised
// to floor as by PrepareRestore.
func PrepareNewCluster(data []byte, floor uint64, members []Member, holdFor int64) ([]byte, RestoreReport, error) {
	r := New(nil)
	if err := r.Load(data); err != nil {
		return nil, RestoreReport{}, err
	}
	empty := New(nil)
	r.mu.Lock()
	rep := r.reconcile(empty)
	r.members = make(map[string]Member, len(members))
	for _, m := range members {
		r.members[m.ID] = m
	}
	if holdFor > 0 {
		r.hold = &Hold{Until: r.now + holdFor, For: holdFor}
		rep.HoldFor = holdFor
	}
	r.raiseTo(floor)
	out := r.dumpLocked()
	r.mu.Unlock()
	sum, err := Inspect(out)
	if err != nil {
		return nil, RestoreReport{}, fmt.Errorf("fsm: prepare new cluster: the state no longer decodes: %w", err)
	}
	rep.State = sum
	return out, rep, nil
}

// grantKeys lists session id's grants in f (lock, holder id, token, mode),
// sorted: two states agree on a session when their lists are equal.
func (f *FSM) grantKeys(id string) []string {
	s := f.sessions[id]
	if s == nil {
		return nil
	}
	var out []string
	for name := range s.Locks {
		l := f.locks[name]
		if l == nil {
			continue
		}
		for _, h := range l.Holders {
			if h.Session == id {
				out = append(out, fmt.Sprintf("%q %q %d %d %d %d", name, h.Holder, h.Token, l.Mode, l.Permits, h.Slot))
			}
		}
	}
	sort.Strings(out)
	return out
}

// reconcile makes f (a backup's state, f.mu held) agree with what the
// clients of cur (cur.mu held for reading) believe: see PrepareRestore.
// It writes no entry, grants nothing and emits nothing.
func (f *FSM) reconcile(cur *FSM) RestoreReport {
	var rep RestoreReport
	f.now = max(f.now, cur.now)
	kept := make(map[string]bool)
	for id := range f.sessions {
		if _, ok := cur.sessions[id]; ok && slices.Equal(f.grantKeys(id), cur.grantKeys(id)) {
			kept[id] = true
		}
	}
	waiting := func(lock, session, holder string) bool {
		if l := cur.locks[lock]; l != nil {
			for _, w := range l.Waiters {
				if w.Session == session && w.Holder == holder {
					return true
				}
			}
		}
		return false
	}
	for _, l := range f.locks {
		l.Revoked = nil // the running cluster's revocations are kept below
		holders := l.Holders[:0]
		for _, h := range l.Holders {
			if kept[h.Session] {
				holders = append(holders, h)
			} else {
				rep.GrantsDropped++
			}
		}
		l.Holders = holders
		waiters := l.Waiters[:0]
		for _, w := range l.Waiters {
			if kept[w.Session] && waiting(l.Name, w.Session, w.Holder) {
				waiters = append(waiters, w)
			}
		}
		l.Waiters = waiters
	}
	// Sessions: the kept ones as the running cluster has them now (the
	// same grants; its memory of releases is the newer).
	for id := range cur.sessions {
		if !kept[id] {
			rep.SessionsEnded++
		}
	}
	for id := range f.sessions {
		if _, both := cur.sessions[id]; !both && !kept[id] {
			rep.SessionsEnded++
		}
	}
	f.sessions = make(map[string]*SessionRecord, len(kept))
	for id := range kept {
		c := copySession(cur.sessions[id])
		c.Locks, c.Holds = nil, 0
		f.sessions[id] = &c
		rep.SessionsKept++
	}
	// Revocations, and the running cluster's lock-delays, in name order.
	names := make([]string, 0, len(cur.locks))
	for name := range cur.locks {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		cl := cur.locks[name]
		if cl.Permits > 0 {
			f.reconcileSlots(cur, cl, kept, &rep)
			continue
		}
		var d int64
		if cl.Delayed {
			d = cl.DelayFor
			if d <= 0 {
				d = int64(api.MaxLockDelay) // recorded before lengths were
			}
		}
		for _, h := range cl.Holders {
			if kept[h.Session] {
				continue
			}
			rep.GrantsRevoked++
			if s := cur.sessions[h.Session]; s != nil {
				d = max(d, s.TTL+s.LockDelay)
			}
		}
		if d == 0 {
			continue
		}
		l := f.lockOfKind(name, 0)
		f.delay(l, d)
		// A kept session's revoked grant is still named at its
		// keepalives while the delay runs (Lock.Revoked).
		for _, r := range cl.Revoked {
			if kept[r.Session] {
				l.Revoked = append(l.Revoked, r)
			}
		}
	}
	// Whatever is left of a lock: free ones become free histories; a
	// lock whose waiters could be granted now (none can be: a kept waiter
	// waited in the running cluster behind a holder or a delay that the
	// restored state keeps) loses them rather than be granted below the
	// floor.
	for name, l := range f.locks {
		switch {
		case l.Permits > 0 && len(l.Waiters) > 0 && canGrant(l, l.Waiters[0].Mode):
			l.Waiters = nil // a semaphore with a grantable slot
		case l.Permits == 0 && len(l.Holders) == 0 && !l.Delayed:
			l.Waiters = nil
		}
		if len(l.Waiters) == 0 {
			l.Waiters = nil
		}
		if len(l.Holders) == 0 && len(l.Waiters) == 0 && !l.inDelay() {
			delete(f.locks, name)
			f.keepFree(f.applied, l)
		}
	}
	// Session lock sets, hold counts and per-token counts are not
	// rebuilt here: the prepared state is a Dump, and Load rebuilds them.
	return rep
}

// raiseTo raises the applied index, every lock's index and every history
// to floor (f.mu held): see PrepareRestore.
func (f *FSM) raiseTo(floor uint64) {
	f.applied = max(f.applied, floor)
	f.forgot = max(f.forgot, floor)
	f.dropChange(floor) // a prefix watcher from before the restore re-lists
	raise := func(l *Lock) {
		l.GrantsSince = max(l.GrantsSince, floor+1)
		l.Index = max(l.Index, floor)
	}
	for _, l := range f.locks {
		raise(l)
	}
	for e := f.free.Front(); e != nil; e = e.Next() {
		raise(e.Value.(*Lock))
	}
}

// reconcileSlots carries semaphore cl of the running cluster into f (as
// reconcile does for a plain lock): each slot whose grant is revoked
// waits out its holder's ttl + lock-delay, each slot delay cl runs goes
// on in full (a revoked slot's with it, its revocation still named to a
// kept session), and the other slots are untouched.
func (f *FSM) reconcileSlots(cur *FSM, cl *Lock, kept map[string]bool, rep *RestoreReport) {
	delays := make(map[uint64]int64)
	for _, sd := range cl.SlotDelays {
		d := sd.For
		if d <= 0 {
			d = int64(api.MaxLockDelay)
		}
		delays[sd.Slot] = d
	}
	for _, h := range cl.Holders {
		if kept[h.Session] {
			continue
		}
		rep.GrantsRevoked++
		if s := cur.sessions[h.Session]; s != nil {
			delays[h.Slot] = max(delays[h.Slot], s.TTL+s.LockDelay)
		}
	}
	if len(delays) == 0 {
		return
	}
	l := f.lockOfKind(cl.Name, cl.Permits)
	slots := make([]uint64, 0, len(delays))
	for slot := range delays {
		slots = append(slots, slot)
	}
	slices.Sort(slots)
	for _, slot := range slots {
		if delays[slot] > 0 {
			f.delaySlot(l, slot, delays[slot])
		}
	}
	// A kept session's revoked slot grant is still named at its
	// keepalives while that slot's delay runs (Lock.Revoked).
	for _, r := range cl.Revoked {
		if kept[r.Session] && delays[r.Slot] > 0 {
			l.Revoked = append(l.Revoked, r)
		}
	}
}

// lockOfKind returns f's stored lock name (f.mu held), storing it if it is
// not (from its free history, if one is kept), as a lock of the given
// permits (0: plain). A stored lock of another kind has no kept holder
// (a kept session holds the same grants in both states, permits and
// slots included), so it becomes that kind, its delays and waiters
// dropped: the running cluster's delays are what count.
func (f *FSM) lockOfKind(name string, permits uint64) *Lock {
	l := f.locks[name]
	if l == nil {
		if l = f.takeFree(name); l == nil {
			l = &Lock{Name: name, GrantsSince: f.forgot + 1}
		}
		l.Permits = permits
		f.locks[name] = l
	}
	if l.Permits != permits {
		l.Permits, l.Waiters = permits, nil
		l.Delayed, l.DelayUntil, l.DelayFor, l.SlotDelays = false, 0, 0, nil
	}
	return l
}
