package fsm

import (
	"container/list"
	"fmt"
	"hash"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

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
	// membersGen counts the changes of members (MembersGeneration); not
	// part of the state: it only tells a reader its copy is stale.
	membersGen atomic.Uint64
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
	// watchFloor is the highest change a prefix watcher may have missed
	// for good (watch.go): the index of the last change of any lock the
	// state dropped without keeping a record, or a restore's floor.
	watchFloor uint64
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
	f.membersGen.Add(1)
	f.tokens, f.byHash, f.bootstrapped = make(map[string]*Token), make(map[string]*Token), false
	f.bootstrapIndex = 0
	f.owned = make(map[string]int)
	f.tokenLocks, f.tokenWaits = make(map[string]int), make(map[string]int)
	f.now, f.applied = 0, 0
	f.free, f.freeAt, f.freeGrants = list.New(), make(map[string]*list.Element), 0
	f.forgot = 0
	f.watchFloor = 0
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

// ApplyCommand applies a decoded command at the given index, outside the
// digest chain (tests, benchmarks and the test fake api/apitest feed
// entries straight in).
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
	return s.apply(f, index, cmd)
}

// AppliedIndex is the index of the last entry applied.
func (f *FSM) AppliedIndex() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.applied
}
