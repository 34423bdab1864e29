package fsm

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"github.com/hashicorp/raft"
)

// snapshotVersion is the first byte of a persisted snapshot.
const snapshotVersion byte = 1

// snapshotVersionACL is the first byte of a snapshot that holds ACL state
// (tokens, or the bootstrap): the same format, but a build that predates
// ACLs would ignore the tokens and restore an open cluster, so it must
// refuse the snapshot instead. A state without ACLs is still written as
// version 1, which every build reads.
const snapshotVersionACL byte = 2

// snapshotVersionHold marks a snapshot whose state holds a restore hold
// (FSM.Hold): a build without holds would grant locks during it, so it
// must refuse the snapshot. Any other state is written as before.
const snapshotVersionHold byte = 3

// snapshotVersionLockOptions marks a snapshot whose state holds a lock
// option an older build would drop: a semaphore (a lock of permits, its
// slots and slot delays, or a grant of one in a history), which such a
// build would restore as one exclusive lock; a revocation still in its
// delay (Lock.Revoked), which it would not tell the revoked client at its
// keepalive (which then goes on believing it holds the lock); a hold
// limit (Holder.MaxHold, Waiter.MaxHold), which it would never end; or a
// release request. So such a build must refuse it. Any other state is
// written as before.
const snapshotVersionLockOptions byte = 4

// state is the serialised form of the whole state machine. Slices are sorted
// so that equal states serialise to equal bytes.
type state struct {
	Sessions []SessionRecord `json:"sessions"`
	Locks    []Lock          `json:"locks"`
	Members  []Member        `json:"members"`
	Now      int64           `json:"now"`
	Applied  uint64          `json:"applied"`
	// Free is the histories free locks left behind, least recently freed
	// first (the order in which they are dropped).
	Free []Lock `json:"free,omitempty"`
	// Forgot is FSM.forgot. Every snapshot written since histories are
	// kept has it; one without it was written before, and forgot every
	// grant up to its applied index.
	Forgot *uint64 `json:"forgot,omitempty"`
	// WatchFloor is FSM.watchFloor (watch.go), written only when it is
	// not Forgot: absent, it is Forgot (a snapshot from before prefix
	// watches has none; it forgot no free history after Forgot, and a
	// lock it freed without a history since Forgot was freed by a build
	// that served no watcher).
	WatchFloor *uint64 `json:"watch_floor,omitempty"`
	// Tokens are the ACL tokens (hashes, never secrets), by id;
	// Bootstrapped: the ACL bootstrap happened. Both absent from a
	// snapshot written before ACLs: none, not bootstrapped.
	Tokens       []Token `json:"tokens,omitempty"`
	Bootstrapped bool    `json:"acl_bootstrapped,omitempty"`
	// BootstrapIndex is FSM.bootstrapIndex, the ACL bootstrap's reset
	// index (absent: 0, from a snapshot written before it was kept).
	BootstrapIndex uint64 `json:"acl_bootstrap_index,omitempty"`
	// Digest (hex) is FSM.Digest at Applied, chained since DigestOrigin;
	// absent from a snapshot written before digests: the chain then
	// starts again at Applied.
	Digest       string `json:"digest,omitempty"`
	DigestOrigin uint64 `json:"digest_origin,omitempty"`
	// Hold is FSM.hold: only in a snapshot of version
	// snapshotVersionHold, which a build without holds refuses.
	Hold *Hold `json:"hold,omitempty"`
}

// Dump returns the canonical serialisation of the state (what snapshots
// persist): equal states give equal bytes.
func (f *FSM) Dump() []byte {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.dumpLocked()
}

func (f *FSM) dumpLocked() []byte {
	st := state{Now: f.now, Applied: f.applied, Members: []Member{}, Locks: []Lock{}, Sessions: []SessionRecord{}}
	for _, s := range f.sessions {
		st.Sessions = append(st.Sessions, *s)
	}
	sort.Slice(st.Sessions, func(i, j int) bool { return st.Sessions[i].ID < st.Sessions[j].ID })
	for _, l := range f.locks {
		st.Locks = append(st.Locks, *l)
	}
	sort.Slice(st.Locks, func(i, j int) bool { return st.Locks[i].Name < st.Locks[j].Name })
	for _, m := range f.members {
		st.Members = append(st.Members, m)
	}
	sort.Slice(st.Members, func(i, j int) bool { return st.Members[i].ID < st.Members[j].ID })
	for e := f.free.Front(); e != nil; e = e.Next() {
		st.Free = append(st.Free, *e.Value.(*Lock))
	}
	forgot := f.forgot
	st.Forgot = &forgot
	if f.watchFloor != f.forgot {
		watchFloor := f.watchFloor
		st.WatchFloor = &watchFloor
	}
	for _, t := range f.tokens {
		st.Tokens = append(st.Tokens, *t)
	}
	sort.Slice(st.Tokens, func(i, j int) bool { return st.Tokens[i].ID < st.Tokens[j].ID })
	st.Bootstrapped, st.BootstrapIndex = f.bootstrapped, f.bootstrapIndex
	if f.digest != ([32]byte{}) {
		// Zero: nothing chained since the origin, which Load takes as
		// the applied index (so a snapshot of a state that applied
		// nothing since restores to the same bytes).
		st.Digest, st.DigestOrigin = hex.EncodeToString(f.digest[:]), f.digestOrigin
	}
	if f.hold != nil {
		h := *f.hold
		st.Hold = &h
	}
	b, err := json.Marshal(st)
	if err != nil {
		panic(fmt.Sprintf("fsm: marshal state: %v", err)) // plain structs: cannot fail
	}
	v := snapshotVersion
	switch {
	case st.hasLockOptions() || hasSemaphores(st.Locks) || hasSemaphores(st.Free):
		v = snapshotVersionLockOptions
	case st.Hold != nil:
		v = snapshotVersionHold
	case len(st.Tokens) > 0 || st.Bootstrapped:
		v = snapshotVersionACL
	}
	return append([]byte{v}, b...)
}

// Snapshot serialises the state in memory; Persist only writes the bytes,
// so Apply may run concurrently with Persist.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.halted != nil {
		return nil, fmt.Errorf("fsm: no snapshot of a halted state machine: %w", f.halted)
	}
	return &snapshot{data: f.dumpLocked()}, nil
}

// Restore replaces the whole state with a snapshot's (never merges).
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("fsm: read snapshot: %w", err)
	}
	return f.Load(data)
}

// Load replaces the state with a Dump's.
func (f *FSM) Load(data []byte) error {
	if len(data) < 1 || (data[0] != snapshotVersion && data[0] != snapshotVersionACL && data[0] != snapshotVersionHold &&
		data[0] != snapshotVersionLockOptions) {
		return fmt.Errorf("fsm: snapshot: unknown format version")
	}
	var st state
	if err := json.Unmarshal(data[1:], &st); err != nil {
		return fmt.Errorf("fsm: decode snapshot: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reset()
	f.now, f.applied = st.Now, st.Applied
	for i := range st.Sessions {
		s := st.Sessions[i]
		s.Locks = nil
		f.sessions[s.ID] = &s
		if s.Owner != "" {
			f.owned[s.Owner]++
		}
	}
	for i := range st.Locks {
		l := st.Locks[i]
		f.locks[l.Name] = &l
		for _, r := range l.Revoked {
			if s := f.sessions[r.Session]; s != nil {
				s.Revoked = append(s.Revoked, RevokedGrant{Lock: l.Name, Holder: r.Holder, Token: r.Token, Kind: r.Kind, Reason: r.Reason})
			}
		}
		for _, h := range l.Holders {
			if s := f.sessions[h.Session]; s != nil {
				s.addLock(l.Name)
				f.count(s, 1, 0)
			}
		}
		for _, w := range l.Waiters {
			if s := f.sessions[w.Session]; s != nil {
				s.addLock(l.Name)
				f.count(s, 1, 1)
			}
		}
	}
	if st.Forgot != nil {
		f.forgot = *st.Forgot
	} else {
		f.forgot = st.Applied // written before histories were kept
	}
	for i := range st.Free {
		l := st.Free[i]
		if _, stored := f.locks[l.Name]; !stored {
			f.keepFree(st.Applied, &l)
		}
	}
	if st.WatchFloor != nil {
		f.watchFloor = max(f.watchFloor, *st.WatchFloor)
	} else {
		f.watchFloor = max(f.watchFloor, f.forgot)
	}
	for _, m := range st.Members {
		f.members[m.ID] = m
	}
	f.membersGen.Add(1)
	for i := range st.Tokens {
		t := st.Tokens[i]
		f.tokens[t.ID], f.byHash[t.Hash] = &t, &t
	}
	f.bootstrapped = st.Bootstrapped
	if st.Hold != nil {
		h := *st.Hold
		f.hold = &h
	}
	f.bootstrapped, f.bootstrapIndex = st.Bootstrapped, st.BootstrapIndex
	f.digestOrigin = st.Applied
	if d, err := hex.DecodeString(st.Digest); err == nil && len(d) == len(f.digest) {
		copy(f.digest[:], d)
		f.digestOrigin = st.DigestOrigin
	}
	f.recent.add(st.Applied, f.digest)
	f.emit(Event{Kind: EventRestored, Index: f.applied})
	return nil
}

// hasLockOptions reports whether the state holds what only a snapshot of
// snapshotVersionLockOptions carries: a revocation in its delay, a hold
// limit.
func (st *state) hasLockOptions() bool {
	for _, l := range st.Locks {
		if len(l.Revoked) > 0 {
			return true
		}
		for _, h := range l.Holders {
			if h.MaxHold > 0 || h.ReleaseRequested != nil {
				return true
			}
		}
		for _, w := range l.Waiters {
			if w.MaxHold > 0 {
				return true
			}
		}
	}
	return false
}

// hasSemaphores reports whether any of locks is a semaphore or keeps a
// semaphore's grant in its history (snapshotVersionLockOptions).
func hasSemaphores(locks []Lock) bool {
	for i := range locks {
		if locks[i].Permits > 0 {
			return true
		}
		for _, g := range locks[i].Grants {
			if g.Permits > 0 {
				return true
			}
		}
	}
	return false
}

type snapshot struct{ data []byte }

func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s.data); err != nil {
		sink.Cancel()
		return fmt.Errorf("fsm: write snapshot: %w", err)
	}
	return sink.Close()
}

func (s *snapshot) Release() {}
