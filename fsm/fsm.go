package fsm

import (
	"container/list"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/api"
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
)

// String names the status.
func (s Status) String() string {
	names := [...]string{"ok", "granted", "queued", "session_not_found", "lock_busy",
		"not_holder", "not_waiting", "session_exists", "invalid", "mode_mismatch", "resource_exhausted",
		"already_bootstrapped", "token_not_found", "token_exists", "corrupt"}
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
}

// BusyHolder is one holder of a busy lock, as any reader may know it.
type BusyHolder struct {
	SessionName string
	Holder      string
}

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

// Hold is a cluster-wide pause of grants, set by a restore into a brand-new
// cluster (raftlockd --restore): that cluster cannot know which locks the
// old one granted after the backup, nor to whom, so no lock is granted
// until every client of the old cluster has either been told or reached
// the end of its lease plus its lock-delay. Acquires find every lock busy
// (a wait keeps its place) until an EndHold entry ends it. Like a
// lock-delay, Until (the stamped wall clock of the restore plus For) names
// it, and For is its length, timed by the leader on its own monotonic
// clock and again in full by every new leader.
type Hold struct {
	Until int64 `json:"until"`
	For   int64 `json:"for"`
}

// Holder is one holder of a lock.
type Holder struct {
	Session string `json:"session"`
	Holder  string `json:"holder"`
	Token   uint64 `json:"token"`
	Value   string `json:"value,omitempty"`
}

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

// Bounds of the grant histories. They are part of the state machine: every
// replica of a cluster must apply the same ones.
const (
	// MaxGrantHistory bounds a lock's history: it keeps its last
	// MaxGrantHistory grants.
	MaxGrantHistory = 32
	// MaxFreeGrants bounds the histories that free locks leave behind:
	// together they hold at most MaxFreeGrants grants, and the history of
	// the lock freed longest ago goes first.
	MaxFreeGrants = 4096
)

// PastGrant is one grant in a lock's history: what a reader may know of
// it. It names the holder's session by its name, never by its id (a
// secret capability).
type PastGrant struct {
	Token       uint64         `json:"token"`
	Mode        sequencer.Mode `json:"mode"`
	Holder      string         `json:"holder"`
	Value       string         `json:"value,omitempty"`
	SessionName string         `json:"session_name,omitempty"`
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
}

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
	// EventDelayStarted: Lock is delayed until DelayUntil, for DelayFor.
	EventDelayStarted
	// EventLockChanged: Lock changed at Index.
	EventLockChanged
	// EventRestored: the whole state was replaced from a snapshot.
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
	// Now is the state machine's clock at the entry: the wall clock of the
	// leader that proposed it (never going backwards); set by emit.
	Now int64
}

// CorruptEntryError is why a state machine halted: log entry Index could
// not be decoded, or failed its checksum (Err wraps ErrDecode, and
// ErrChecksum for a checksum).
type CorruptEntryError struct {
	Index uint64
	Err   error
}

func (e *CorruptEntryError) Error() string {
	return fmt.Sprintf("log entry %d is corrupt: %v", e.Index, e.Err)
}

func (e *CorruptEntryError) Unwrap() error { return e.Err }

// FSM is the replicated lock state machine. It implements raft.FSM. Reads
// are safe concurrently with Apply.
type FSM struct {
	onEvent func(Event)

	mu       sync.RWMutex
	sessions map[string]*SessionRecord
	locks    map[string]*Lock
	members  map[string]Member
	// tokens are the ACL tokens by id, byHash the same by secret hash;
	// bootstrapped: the management token was created (once per cluster,
	// or once more per reset: bootstrapIndex is the log index of the last,
	// the reset index).
	tokens       map[string]*Token
	byHash       map[string]*Token
	bootstrapped bool
	// bootstrapIndex: see bootstrapped (0 in a state restored from a
	// snapshot written before it was kept).
	bootstrapIndex uint64
	// owned counts the open sessions of each ACL token (by token id), for
	// api.Limits.SessionsPerToken; rebuilt on Load.
	owned   map[string]int
	now     int64
	applied uint64
	// tokenLocks and tokenWaits count the holds and waits, and the waits
	// alone, of each ACL token's sessions, for api.Limits.LocksPerToken
	// and WaitersPerToken; changed only through count, rebuilt on Load.
	tokenLocks, tokenWaits map[string]int
	// free holds the histories of free locks (*Lock values with no
	// holders, waiters or delay), least recently freed first; freeAt
	// finds them by name and freeGrants counts their grants.
	free       *list.List
	freeAt     map[string]*list.Element
	freeGrants int
	// forgot is the last log index at which the state machine forgot
	// grants: an entry that dropped a free history, or the applied index
	// of a snapshot written before histories were kept. A lock it has no
	// record of was granted no token above forgot.
	forgot uint64
	// hold is the restore hold of a cluster restored from a backup into
	// a new cluster (nil: none): no lock is granted while it runs.
	hold *Hold
	// halted is set by the first corrupt entry: from it on nothing is
	// applied, and no snapshot is taken (one would claim the entries the
	// state lacks).
	halted *CorruptEntryError
	// digest chains every command entry applied since digestOrigin (see
	// Digest); recent keeps the last digests by index.
	digest       [32]byte
	digestOrigin uint64
	recent       digestRing
	// hasher is reused by chain (f.mu held): one SHA-256 state, not one
	// per entry.
	hasher hash.Hash
}

// New returns an empty state machine. onEvent, if not nil, is called
// synchronously from Apply and Restore, with the state lock held: it must not
// block or call back into the FSM.
func New(onEvent func(Event)) *FSM {
	f := &FSM{onEvent: onEvent}
	f.reset()
	return f
}

func (f *FSM) reset() {
	f.sessions = make(map[string]*SessionRecord)
	f.locks = make(map[string]*Lock)
	f.members = make(map[string]Member)
	f.tokens, f.byHash, f.bootstrapped = make(map[string]*Token), make(map[string]*Token), false
	f.bootstrapIndex = 0
	f.owned = make(map[string]int)
	f.tokenLocks, f.tokenWaits = make(map[string]int), make(map[string]int)
	f.now, f.applied = 0, 0
	f.free, f.freeAt, f.freeGrants = list.New(), make(map[string]*list.Element), 0
	f.forgot = 0
	f.hold = nil
	f.halted = nil
	f.digest, f.digestOrigin, f.recent = [32]byte{}, 0, digestRing{}
}

func (f *FSM) emit(e Event) {
	if f.onEvent != nil {
		e.Now = f.now
		f.onEvent(e)
	}
}

// Apply applies one committed log entry. An entry that cannot be decoded,
// or fails its checksum, halts the state machine: it is not applied, nor
// is any entry after it (StatusCorrupt), an EventHalted says which entry
// and why, and Snapshot refuses from then on. A corrupt log stops the
// replica; it never diverges it.
func (f *FSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	cmd, err := Decode(l.Data)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applyDecoded(l, cmd, err)
}

// ApplyBatch applies a batch of committed entries, in order, as Apply
// would one by one (raft.BatchingFSM): decoded before the state is
// locked, applied under one lock. Raft hands over every batch it commits
// at once, up to MaxAppendEntries entries. Entries that are not commands
// (configurations) answer nil.
func (f *FSM) ApplyBatch(logs []*raft.Log) []any {
	type decoded struct {
		cmd Command
		err error
	}
	var buf [16]decoded
	ds := buf[:0]
	for _, l := range logs {
		var d decoded
		if l.Type == raft.LogCommand {
			d.cmd, d.err = Decode(l.Data)
		}
		ds = append(ds, d)
	}
	out := make([]any, len(logs))
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, l := range logs {
		if l.Type == raft.LogCommand {
			out[i] = f.applyDecoded(l, ds[i].cmd, ds[i].err)
		}
	}
	return out
}

// applyDecoded applies command entry l, decoded as cmd (or err), with f.mu
// held.
func (f *FSM) applyDecoded(l *raft.Log, cmd Command, err error) Result {
	if f.halted != nil {
		return Result{Status: StatusCorrupt}
	}
	if err != nil {
		f.halted = &CorruptEntryError{Index: l.Index, Err: err}
		f.emit(Event{Kind: EventHalted, Index: l.Index, Err: f.halted})
		return Result{Status: StatusCorrupt}
	}
	f.chain(l.Index, l.Data)
	return f.apply(l.Index, cmd)
}

// Halted returns the corrupt entry that halted the state machine (nil if
// none).
func (f *FSM) Halted() error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.halted == nil {
		return nil
	}
	return f.halted
}

// ApplyCommand applies a decoded command at the given index (tests and
// benchmarks feed entries straight in).
func (f *FSM) ApplyCommand(index uint64, cmd Command) Result {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.apply(index, cmd)
}

func (f *FSM) apply(index uint64, cmd Command) Result {
	if index > f.applied {
		f.applied = index
	}
	if cmd.Now > f.now {
		f.now = cmd.Now
	}
	s, ok := commands[cmd.Type]
	if !ok {
		return Result{Index: index, Status: StatusInvalid}
	}
	return s.apply(f, index, &cmd)
}

// setMember records a member's addresses.
func (f *FSM) setMember(_ uint64, m *Member) Status {
	f.members[m.ID] = *m
	return StatusOK
}

// aclBootstrap creates the management token, once per cluster.
func (f *FSM) aclBootstrap(index uint64, t *Token) Status {
	if f.bootstrapped {
		return StatusAlreadyBootstrapped
	}
	st := f.createToken(t)
	if st == StatusOK {
		f.bootstrapped, f.bootstrapIndex = true, index
	}
	return st
}

// aclBootstrapReset bootstraps once more, only with the current reset
// index: a reset file left behind never allows a second one.
func (f *FSM) aclBootstrapReset(index uint64, c *ACLBootstrapReset) Status {
	if f.bootstrapped && c.ResetIndex != f.bootstrapIndex {
		return StatusAlreadyBootstrapped
	}
	st := f.createToken(&c.Token)
	if st == StatusOK {
		f.bootstrapped, f.bootstrapIndex = true, index
	}
	return st
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
	delay := end.heldFor(s)
	f.count(s, -s.Holds, 0) // its waits are counted off below, as dropped
	for _, name := range sortedKeys(s.Locks) {
		l := f.locks[name]
		if l == nil {
			continue
		}
		held := false
		keptH := l.Holders[:0]
		for _, h := range l.Holders {
			if h.Session == id {
				held = true
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
		if held && delay > 0 {
			f.delay(l, delay)
		}
		f.changed(index, l)
	}
	f.emit(Event{Kind: EventSessionRemoved, Session: id, Name: s.Name, Expired: end == endExpire})
	return StatusOK
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

func (f *FSM) createToken(t *Token) Status {
	if t.ID == "" || t.Hash == "" || len(t.Rules) == 0 {
		return StatusInvalid
	}
	if _, ok := f.tokens[t.ID]; ok {
		return StatusTokenExists
	}
	if _, ok := f.byHash[t.Hash]; ok {
		return StatusTokenExists
	}
	tok := *t
	tok.Rules = slices.Clone(t.Rules)
	tok.Created = f.now
	f.tokens[tok.ID], f.byHash[tok.Hash] = &tok, &tok
	return StatusOK
}

// deleteToken deletes a token and ends its sessions, in session id order,
// as revoked (endRevoke): their clients cannot keep them alive any more,
// but each may hold a lease for up to its ttl and believe it holds its
// locks until its lock-delay has passed too, so the locks wait that out.
func (f *FSM) deleteToken(index uint64, id string) Status {
	t, ok := f.tokens[id]
	if !ok {
		return StatusTokenNotFound
	}
	delete(f.tokens, id)
	delete(f.byHash, t.Hash)
	var owned []string
	for sid, s := range f.sessions {
		if s.Owner == id {
			owned = append(owned, sid)
		}
	}
	sort.Strings(owned)
	for _, sid := range owned {
		f.removeSession(index, sid, endRevoke)
	}
	return StatusOK
}

// TokenByHash returns the token whose secret hashes to hash.
func (f *FSM) TokenByHash(hash string) (Token, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t, ok := f.byHash[hash]
	if !ok {
		return Token{}, false
	}
	out := *t
	out.Rules = slices.Clone(t.Rules)
	return out, true
}

// Tokens returns the ACL tokens, by id.
func (f *FSM) Tokens() []Token {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]Token, 0, len(f.tokens))
	for _, t := range f.tokens {
		c := *t
		c.Rules = slices.Clone(t.Rules)
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// ACLBootstrapResetIndex is the reset index of the ACL bootstrap: the log
// index of the last bootstrap (0 if none, or if the state comes from a
// snapshot written before it was kept).
func (f *FSM) ACLBootstrapResetIndex() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.bootstrapIndex
}

// ACLBootstrapped reports whether the management token was created.
func (f *FSM) ACLBootstrapped() bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.bootstrapped
}

func compatible(l *Lock, m sequencer.Mode) bool {
	return len(l.Holders) == 0 || (l.Mode == sequencer.Shared && m == sequencer.Shared)
}

func (f *FSM) acquire(index uint64, c *Acquire) Result {
	r := Result{Index: index}
	if c.Lock == "" || c.Holder == "" || !c.Mode.Valid() {
		r.Status = StatusInvalid
		return r
	}
	s, ok := f.sessions[c.Session]
	if !ok {
		r.Status = StatusSessionNotFound
		return r
	}
	l := f.locks[c.Lock]
	if l != nil {
		for _, h := range l.Holders {
			if h.Session == c.Session && h.Holder == c.Holder {
				// A retried acquire: the same grant, never a second one,
				// and never one of a mode it did not ask for.
				r.Status, r.Token, r.Mode = StatusGranted, h.Token, l.Mode
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
	grantable := f.hold == nil && (l == nil || (!l.Delayed && len(l.Waiters) == 0 && compatible(l, c.Mode)))
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
	}
	f.locks[c.Lock] = l
	s.addLock(c.Lock)
	if grantable {
		f.count(s, 1, 0)
		f.grant(index, l, Holder{Session: c.Session, Holder: c.Holder, Value: c.Value}, c.Mode)
		f.changed(index, l)
		r.Status, r.Token, r.Mode = StatusGranted, index, c.Mode
		return r
	}
	f.count(s, 1, 1)
	l.Waiters = append(l.Waiters, Waiter{Session: c.Session, Holder: c.Holder, Mode: c.Mode, Value: c.Value,
		WaitFor: c.WaitFor, WaitSet: index})
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
	for _, h := range l.Holders {
		var name string
		if s := f.sessions[h.Session]; s != nil {
			name = s.Name
		}
		b.Holders = append(b.Holders, BusyHolder{SessionName: name, Holder: h.Holder})
	}
	return b
}

// grant makes h a holder of l in mode m with the entry's index as token.
func (f *FSM) grant(index uint64, l *Lock, h Holder, m sequencer.Mode) {
	h.Token = index
	l.Mode = m
	l.Holders = append(l.Holders, h)
	f.record(l, h, m)
	f.emit(Event{Kind: EventGranted, Lock: l.Name, Session: h.Session, Holder: h.Holder, Token: index, Mode: m})
}

// record appends a grant to l's history and drops the oldest grants beyond
// MaxGrantHistory. The session is named by its name, never its id.
func (f *FSM) record(l *Lock, h Holder, m sequencer.Mode) {
	var name string
	if s := f.sessions[h.Session]; s != nil {
		name = s.Name
	}
	if l.GrantsSince == 0 {
		// Recorded before histories: complete since the snapshot that
		// forgot them.
		l.GrantsSince = f.forgot + 1
	}
	l.Grants = append(l.Grants, PastGrant{Token: h.Token, Mode: m, Holder: h.Holder, Value: h.Value, SessionName: name})
	if n := len(l.Grants) - MaxGrantHistory; n > 0 {
		l.GrantsSince = l.Grants[n-1].Token + 1
		copy(l.Grants, l.Grants[n:])
		clear(l.Grants[MaxGrantHistory:])
		l.Grants = l.Grants[:MaxGrantHistory]
	}
}

// keepFree keeps the history of a lock that has just become free at entry
// index (if it has one), and drops the histories freed longest ago while
// the free ones hold more than MaxFreeGrants grants.
func (f *FSM) keepFree(index uint64, l *Lock) {
	if len(l.Grants) == 0 {
		return
	}
	if e := f.freeAt[l.Name]; e != nil {
		f.dropFree(e) // not reached: a stored lock has no free history
	}
	l.Holders, l.Waiters = nil, nil
	f.freeAt[l.Name] = f.free.PushBack(l)
	f.freeGrants += len(l.Grants)
	for f.freeGrants > MaxFreeGrants {
		f.dropFree(f.free.Front())
		f.forgot = max(f.forgot, index)
	}
}

// takeFree removes the history the free lock name left behind and returns
// it as the lock to store again (nil if none is kept).
func (f *FSM) takeFree(name string) *Lock {
	e := f.freeAt[name]
	if e == nil {
		return nil
	}
	l := e.Value.(*Lock)
	f.dropFree(e)
	return l
}

func (f *FSM) dropFree(e *list.Element) {
	l := f.free.Remove(e).(*Lock)
	delete(f.freeAt, l.Name)
	f.freeGrants -= len(l.Grants)
}

// grantWaiters grants l to the head of its queue, in FIFO order, as far as
// modes allow: one exclusive waiter, or a run of shared ones. Waiters whose
// session is gone are skipped.
func (f *FSM) grantWaiters(index uint64, l *Lock) {
	for len(l.Waiters) > 0 && !l.Delayed && f.hold == nil {
		w := l.Waiters[0]
		ws, ok := f.sessions[w.Session]
		if !ok {
			l.Waiters = l.Waiters[1:]
			f.emit(Event{Kind: EventWaitEnded, Lock: l.Name, Session: w.Session, Holder: w.Holder, Reason: WaitSessionGone})
			continue
		}
		if !compatible(l, w.Mode) {
			return
		}
		l.Waiters = l.Waiters[1:]
		f.count(ws, 0, -1)
		f.grant(index, l, Holder{Session: w.Session, Holder: w.Holder, Value: w.Value}, w.Mode)
	}
}

// changed grants what can be granted, records the change and drops the lock
// if nothing is left of it.
func (f *FSM) changed(index uint64, l *Lock) {
	f.grantWaiters(index, l)
	l.Index = index
	if len(l.Waiters) == 0 {
		l.Waiters = nil
	}
	if len(l.Holders) == 0 && len(l.Waiters) == 0 && !l.Delayed {
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
			f.emit(Event{Kind: EventReleased, Lock: l.Name, Session: h.Session, Holder: h.Holder, Token: h.Token, Mode: l.Mode})
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
			r.Status, r.Token, r.Mode = StatusGranted, h.Token, l.Mode
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

func (f *FSM) endDelay(index uint64, c *EndDelay) Status {
	l := f.locks[c.Lock]
	if l == nil || !l.Delayed || l.DelayUntil != c.Until {
		return StatusOK // already ended, or extended by a later expiry
	}
	l.Delayed, l.DelayUntil, l.DelayFor = false, 0, 0
	f.changed(index, l)
	return StatusOK
}

// endHold ends the restore hold if it is still the one that ends at
// c.Until, and grants the waiters it held back, lock by lock in name order.
func (f *FSM) endHold(index uint64, c *EndHold) {
	if f.hold == nil || f.hold.Until != c.Until {
		return // ended already
	}
	f.hold = nil
	names := make([]string, 0, len(f.locks))
	for name, l := range f.locks {
		if len(l.Waiters) > 0 {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		f.changed(index, f.locks[name])
	}
	f.emit(Event{Kind: EventHoldEnded, Index: index})
}

// Hold returns the restore hold, if one runs.
func (f *FSM) Hold() (Hold, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.hold == nil {
		return Hold{}, false
	}
	return *f.hold, true
}

func sortedKeys(m map[string]struct{}) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// --- reads ---

// AppliedIndex is the index of the last entry applied.
func (f *FSM) AppliedIndex() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.applied
}

func copyLock(l *Lock) Lock {
	c := *l
	c.Holders = append([]Holder(nil), l.Holders...)
	c.Waiters = append([]Waiter(nil), l.Waiters...)
	c.Grants = append([]PastGrant(nil), l.Grants...)
	return c
}

func copySession(s *SessionRecord) SessionRecord {
	c := *s
	c.Released = slices.Clone(s.Released)
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

// LocksPage returns copies of at most limit locks whose names start with
// prefix and sort after after, in name order, and the cursor of the next
// page: the last name returned when more follow, else "".
func (f *FSM) LocksPage(prefix, after string, limit int) ([]Lock, string) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	names := []string{}
	for name := range f.locks {
		if name > after && strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	next := ""
	if len(names) > limit {
		names = names[:limit]
		next = names[limit-1]
	}
	out := make([]Lock, 0, len(names))
	for _, name := range names {
		out = append(out, copyLock(f.locks[name]))
	}
	return out, next
}

// Members returns the recorded member addresses, sorted by id.
func (f *FSM) Members() []Member {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]Member, 0, len(f.members))
	for _, m := range f.members {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// --- snapshots ---

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
	if len(data) < 1 || (data[0] != snapshotVersion && data[0] != snapshotVersionACL && data[0] != snapshotVersionHold) {
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
	for _, m := range st.Members {
		f.members[m.ID] = m
	}
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
	f.emit(Event{Kind: EventRestored})
	return nil
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

// CommandsRead returns the highest command version every member of ids
// reads, by their member records: VersionJSON if any has no record or an
// old build's (Member.Commands 0), at most Version.
func (f *FSM) CommandsRead(ids []string) byte {
	f.mu.RLock()
	defer f.mu.RUnlock()
	v := Version
	for _, id := range ids {
		m, ok := f.members[id]
		if !ok || m.Commands < VersionJSON {
			return VersionJSON
		}
		v = min(v, m.Commands)
	}
	return v
}
