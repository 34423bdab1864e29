package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/sequencer"
)

// t0 is the leader clock of the first command of a harness.
const t0 = int64(1_700_000_000_000_000_000)

// harness feeds log entries straight into FSM.Apply, one index per entry,
// and records the events each entry emitted.
type harness struct {
	t      testing.TB
	f      *FSM
	idx    uint64 // index of the last entry applied
	now    int64  // leader clock stamped into the next command
	events []Event
	last   []Event // events of the last entry
}

func newHarness(t testing.TB) *harness {
	h := &harness{t: t, now: t0}
	h.f = New(func(e Event) { h.events = append(h.events, e) })
	return h
}

// apply encodes c (stamped with h.now), applies it at the next index and
// returns its Result.
func (h *harness) apply(c Command) Result {
	h.t.Helper()
	c.Now = h.now
	data, err := c.Encode()
	if err != nil {
		h.t.Fatalf("encode %s: %v", c.Type, err)
	}
	h.idx++
	n := len(h.events)
	resp := h.f.Apply(&raft.Log{Index: h.idx, Term: 1, Type: raft.LogCommand, Data: data})
	h.last = append([]Event(nil), h.events[n:]...)
	r, ok := resp.(Result)
	if !ok {
		h.t.Fatalf("Apply(%s) returned %T, want Result", c.Type, resp)
	}
	if r.Index != h.idx {
		h.t.Fatalf("Apply(%s) Result.Index = %d, want %d", c.Type, r.Index, h.idx)
	}
	return r
}

// must applies c and fails unless the status is want.
func (h *harness) must(want Status, c Command) Result {
	h.t.Helper()
	r := h.apply(c)
	if r.Status != want {
		h.t.Fatalf("entry %d %s %s: status %s, want %s", h.idx, c.Type, describe(c), r.Status, want)
	}
	return r
}

func (h *harness) open(id string, lockDelay time.Duration) {
	h.t.Helper()
	h.must(StatusOK, openCmd(id, lockDelay))
}

// lock returns the lock or a zero Lock (free).
func (h *harness) lock(name string) Lock {
	l, _ := h.f.Lock(name)
	return l
}

// granted returns the EventGranted events of the last entry for lock.
func (h *harness) granted(lock string) []Event {
	var out []Event
	for _, e := range h.last {
		if e.Kind == EventGranted && e.Lock == lock {
			out = append(out, e)
		}
	}
	return out
}

// lastHas reports whether the last entry emitted an event matching e on
// Kind, Lock, Session and Holder.
func (h *harness) lastHas(kind EventKind, lock, session, holder string) bool {
	for _, e := range h.last {
		if e.Kind == kind && e.Lock == lock && e.Session == session && e.Holder == holder {
			return true
		}
	}
	return false
}

func describe(c Command) string {
	p, _, err := c.variant(false)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%+v", p)
}

// --- command constructors ---

func openCmd(id string, lockDelay time.Duration) Command {
	return Command{Type: CmdOpenSession, OpenSession: &OpenSession{ID: id, Name: "n-" + id,
		TTL: int64(10 * time.Second), LockDelay: int64(lockDelay)}}
}

func closeCmd(id string) Command {
	return Command{Type: CmdCloseSession, CloseSession: &SessionRef{ID: id}}
}

func expireCmd(id string) Command {
	return Command{Type: CmdExpireSession, ExpireSession: &SessionRef{ID: id}}
}

func acqCmd(lock, session, holder string, m sequencer.Mode, wait bool) Command {
	return Command{Type: CmdAcquire, Acquire: &Acquire{Lock: lock, Session: session, Holder: holder, Mode: m, Wait: wait}}
}

func relCmd(lock, session, holder string) Command {
	return Command{Type: CmdRelease, Release: &LockRef{Lock: lock, Session: session, Holder: holder}}
}

func cancelCmd(lock, session, holder string) Command {
	return Command{Type: CmdCancelWait, CancelWait: &LockRef{Lock: lock, Session: session, Holder: holder}}
}

func endDelayCmd(lock string, until int64) Command {
	return Command{Type: CmdEndDelay, EndDelay: &EndDelay{Lock: lock, Until: until}}
}

func memberCmd(id, raftAddr, httpAddr string) Command {
	return Command{Type: CmdSetMember, SetMember: &Member{ID: id, RaftAddr: raftAddr, HTTPAddr: httpAddr}}
}

// --- snapshots ---

// memSink is an in-memory raft.SnapshotSink.
type memSink struct {
	bytes.Buffer
	closed, cancelled bool
	failWrite         bool
}

func (s *memSink) Write(p []byte) (int, error) {
	if s.failWrite {
		return 0, errors.New("disk full")
	}
	return s.Buffer.Write(p)
}
func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Close() error  { s.closed = true; return nil }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }

var _ raft.SnapshotSink = (*memSink)(nil)

// snapshotBytes runs Snapshot and Persist into a memSink.
func snapshotBytes(t testing.TB, f *FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	defer snap.Release()
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatalf("Persist: %v", err)
	}
	if !sink.closed || sink.cancelled {
		t.Fatalf("Persist: sink closed=%v cancelled=%v, want closed only", sink.closed, sink.cancelled)
	}
	return sink.Bytes()
}

// restoreInto restores data into f through the raft.FSM interface.
func restoreInto(t testing.TB, f *FSM, data []byte) {
	t.Helper()
	if err := f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatalf("Restore: %v", err)
	}
}

// --- internal consistency ---

// checkSessionIndex verifies that every session's Locks set is exactly the
// set of locks it holds or waits for. The set is not persisted (it is
// rebuilt by Restore), so a drift would make a restored replica diverge.
func checkSessionIndex(t testing.TB, f *FSM) {
	t.Helper()
	f.mu.RLock()
	defer f.mu.RUnlock()
	want := make(map[string][]string)
	holds := make(map[string]int)
	for name, l := range f.locks {
		for _, h := range l.Holders {
			holds[h.Session]++
		}
		for _, w := range l.Waiters {
			holds[w.Session]++
		}
		seen := map[string]bool{}
		for _, h := range l.Holders {
			if !seen[h.Session] {
				seen[h.Session] = true
				want[h.Session] = append(want[h.Session], name)
			}
		}
		for _, w := range l.Waiters {
			if !seen[w.Session] {
				seen[w.Session] = true
				want[w.Session] = append(want[w.Session], name)
			}
		}
	}
	for id, s := range f.sessions {
		if s.Holds != holds[id] {
			t.Fatalf("session %s: Holds %d, but it holds or waits %d times", id, s.Holds, holds[id])
		}
		got := sortedKeys(s.Locks)
		w := want[id]
		sort.Strings(w)
		if len(got) == 0 && len(w) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, w) {
			t.Fatalf("session %s: Locks index %v, but it holds or waits for %v", id, got, w)
		}
	}
	owned := make(map[string]int)
	for _, s := range f.sessions {
		if s.Owner != "" {
			owned[s.Owner]++
		}
	}
	if !reflect.DeepEqual(owned, f.owned) {
		t.Fatalf("sessions per token %v, but the sessions are owned %v", f.owned, owned)
	}
	// The per-token sums: holds and waits, and waits alone, of each
	// token's sessions.
	tokenLocks, tokenWaits := map[string]int{}, map[string]int{}
	for _, l := range f.locks {
		for _, h := range l.Holders {
			if s := f.sessions[h.Session]; s != nil && s.Owner != "" {
				tokenLocks[s.Owner]++
			}
		}
		for _, w := range l.Waiters {
			if s := f.sessions[w.Session]; s != nil && s.Owner != "" {
				tokenLocks[s.Owner]++
				tokenWaits[s.Owner]++
			}
		}
	}
	if !reflect.DeepEqual(tokenLocks, f.tokenLocks) || !reflect.DeepEqual(tokenWaits, f.tokenWaits) {
		t.Fatalf("per-token locks %v and waits %v, but the token's sessions hold or wait %v and wait %v",
			f.tokenLocks, f.tokenWaits, tokenLocks, tokenWaits)
	}
}

// The two modes, short for the tests.
const (
	Exclusive = sequencer.Exclusive
	Shared    = sequencer.Shared
)
