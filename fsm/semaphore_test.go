package fsm

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/sequencer"
)

const S = "sem"

func semCmd(lock, session, holder string, permits uint64, wait bool) Command {
	c := acqCmd(lock, session, holder, sequencer.Exclusive, wait)
	c.Acquire.Permits = permits
	return c
}

func endSlotCmd(lock string, slot uint64, until int64) Command {
	c := endDelayCmd(lock, until)
	c.EndDelay.Slot = slot
	return c
}

// slotsOf returns the lock's holders' slots by holder session.
func slotsOf(l Lock) map[string]uint64 {
	out := map[string]uint64{}
	for _, h := range l.Holders {
		out[h.Session] = h.Slot
	}
	return out
}

func TestSemaphoreAdmitsAtMostPermitsHolders(t *testing.T) {
	h := newHarness(t)
	for _, s := range []string{"a", "b", "c", "d"} {
		h.open(s, time.Second)
	}
	for i, s := range []string{"a", "b", "c"} {
		r := h.must(StatusGranted, semCmd(S, s, "h", 3, false))
		if r.Token != h.idx || r.Slot != uint64(i) || r.Permits != 3 {
			t.Fatalf("grant %d: %+v, want token %d slot %d permits 3", i, r, h.idx, i)
		}
		if g := h.granted(S); len(g) != 1 || g[0].Slot != uint64(i) {
			t.Fatalf("grant events %+v", g)
		}
	}
	r := h.must(StatusLockBusy, semCmd(S, "d", "h", 3, false))
	if r.Busy == nil || len(r.Busy.Holders) != 3 || r.Busy.Permits != 3 {
		t.Fatalf("busy %+v", r.Busy)
	}
	l := h.lock(S)
	if l.Permits != 3 || len(l.Holders) != 3 || l.Mode != sequencer.Exclusive {
		t.Fatalf("lock %+v", l)
	}
	for i, g := range l.Grants {
		if g.Permits != 3 || g.Slot != uint64(i) {
			t.Fatalf("history %+v", l.Grants)
		}
	}
}

func TestSemaphoreReleaseFreesSlotAtOnceLowestFirst(t *testing.T) {
	h := newHarness(t)
	for _, s := range []string{"a", "b", "c", "d"} {
		h.open(s, time.Second)
	}
	for _, s := range []string{"a", "b", "c"} {
		h.must(StatusGranted, semCmd(S, s, "h", 3, false))
	}
	h.must(StatusOK, relCmd(S, "b", "h"))
	if l := h.lock(S); len(l.SlotDelays) != 0 || len(l.Holders) != 2 {
		t.Fatalf("after a release: %+v", l)
	}
	if r := h.must(StatusGranted, semCmd(S, "d", "h", 3, false)); r.Slot != 1 {
		t.Fatalf("granted slot %d, want the freed slot 1", r.Slot)
	}
	for _, s := range []string{"a", "c", "d"} {
		h.must(StatusOK, relCmd(S, s, "h"))
	}
	if _, ok := h.f.Lock(S); ok {
		t.Fatal("a semaphore with no holders, waiters or delays is still stored")
	}
	// Free, it forgets its permits: a plain lock may take the name.
	if r := h.must(StatusGranted, acqCmd(S, "a", "h", sequencer.Exclusive, false)); r.Slot != 0 || h.lock(S).Permits != 0 {
		t.Fatalf("plain grant of a freed semaphore: %+v %+v", r, h.lock(S))
	}
}

func TestSemaphorePermitsMismatchChangesNothing(t *testing.T) {
	h := newHarness(t)
	h.open("a", time.Second)
	h.open("b", time.Second)
	h.must(StatusGranted, semCmd(S, "a", "h", 2, false))
	h.must(StatusGranted, acqCmd("plain", "a", "h", sequencer.Exclusive, false))
	locks, sessions := h.f.Locks(""), h.f.Sessions()
	for _, c := range []Command{
		semCmd(S, "b", "h", 3, true),                   // other permits
		acqCmd(S, "b", "h", sequencer.Exclusive, true), // plain acquire of a semaphore
		semCmd(S, "a", "h", 3, false),                  // the holder's retry with other permits
		semCmd("plain", "b", "h", 2, true),             // semaphore acquire of a plain lock
	} {
		r := h.must(StatusPermitsMismatch, c)
		want := uint64(2)
		if c.Acquire.Lock == "plain" {
			want = 0
		}
		if r.Permits != want {
			t.Fatalf("%s: mismatch names permits %d, want %d", describe(c), r.Permits, want)
		}
		if len(h.last) != 0 {
			t.Fatalf("a refused acquire emitted %+v", h.last)
		}
	}
	if !reflect.DeepEqual(locks, h.f.Locks("")) || !reflect.DeepEqual(sessions, h.f.Sessions()) {
		t.Fatalf("a refused acquire changed the state: %s", h.f.Dump())
	}
}

func TestSemaphoreInvalidPermits(t *testing.T) {
	h := newHarness(t)
	h.open("a", time.Second)
	shared := acqCmd(S, "a", "h", sequencer.Shared, false)
	shared.Acquire.Permits = 2
	h.must(StatusInvalid, shared)
	h.must(StatusInvalid, semCmd(S, "a", "h", api.MaxPermits+1, false))
	h.must(StatusGranted, semCmd(S, "a", "h", api.MaxPermits, false))
}

func TestSemaphoreFIFOAcrossPermits(t *testing.T) {
	h := newHarness(t)
	for _, s := range []string{"a", "b", "w1", "w2", "late"} {
		h.open(s, time.Second)
	}
	h.must(StatusGranted, semCmd(S, "a", "h", 2, false))
	h.must(StatusGranted, semCmd(S, "b", "h", 2, false))
	h.must(StatusQueued, semCmd(S, "w1", "h", 2, true))
	h.must(StatusQueued, semCmd(S, "w2", "h", 2, true))
	// A newcomer finds waiters: it queues (a try is busy) even after a
	// slot frees, since the head takes it first.
	h.must(StatusOK, relCmd(S, "a", "h"))
	if g := h.granted(S); len(g) != 1 || g[0].Session != "w1" || g[0].Slot != 0 {
		t.Fatalf("release granted %+v, want w1 in slot 0", g)
	}
	h.must(StatusLockBusy, semCmd(S, "late", "h", 2, false))
	h.must(StatusQueued, semCmd(S, "late", "h", 2, true))
	h.must(StatusOK, relCmd(S, "b", "h"))
	h.must(StatusOK, relCmd(S, "w1", "h"))
	l := h.lock(S)
	if got := slotsOf(l); len(got) != 2 || got["w2"] != 1 || got["late"] != 0 {
		t.Fatalf("holders %+v, want w2 in slot 1 then late in slot 0", l.Holders)
	}
}

func TestSemaphoreExpiryDelaysOnlyItsSlot(t *testing.T) {
	h := newHarness(t)
	for _, s := range []string{"a", "b", "c", "w"} {
		h.open(s, 5*time.Second)
	}
	h.must(StatusGranted, semCmd(S, "a", "h", 2, false))
	h.must(StatusGranted, semCmd(S, "b", "h", 2, false))
	h.must(StatusOK, expireCmd("a"))
	until := h.now + int64(5*time.Second)
	l := h.lock(S)
	if l.Delayed || len(l.SlotDelays) != 1 || l.SlotDelays[0] != (SlotDelay{Slot: 0, Until: until, For: int64(5 * time.Second)}) {
		t.Fatalf("after slot 0's expiry: %+v", l)
	}
	var started []Event
	for _, e := range h.last {
		if e.Kind == EventDelayStarted {
			started = append(started, e)
		}
	}
	if len(started) != 1 || started[0].Slot != 0 || started[0].DelayUntil != until {
		t.Fatalf("delay events %+v", started)
	}
	// Slot 0 is in lock-delay: releasing slot 1 lets the next in, into 1.
	h.must(StatusQueued, semCmd(S, "c", "h", 2, true))
	h.must(StatusOK, relCmd(S, "b", "h"))
	if r := h.lock(S); slotsOf(r)["c"] != 1 || len(r.Holders) != 1 {
		t.Fatalf("holders %+v, want c in slot 1 (slot 0 delayed)", r.Holders)
	}
	h.must(StatusQueued, semCmd(S, "w", "h", 2, true))
	// A stale end (another slot, another until) is a no-op.
	h.must(StatusOK, endSlotCmd(S, 1, until))
	h.must(StatusOK, endSlotCmd(S, 0, until-1))
	if len(h.lock(S).SlotDelays) != 1 || len(h.granted(S)) != 0 {
		t.Fatalf("a stale end changed the lock: %+v", h.lock(S))
	}
	h.must(StatusOK, endSlotCmd(S, 0, until))
	if g := h.granted(S); len(g) != 1 || g[0].Session != "w" || g[0].Slot != 0 {
		t.Fatalf("end of slot 0's delay granted %+v, want w in slot 0", g)
	}
	if l := h.lock(S); len(l.SlotDelays) != 0 {
		t.Fatalf("delays left: %+v", l.SlotDelays)
	}
}

func TestSemaphoreSessionOfTwoSlotsDelaysBoth(t *testing.T) {
	h := newHarness(t)
	h.open("a", 5*time.Second)
	h.open("b", 5*time.Second)
	h.must(StatusGranted, semCmd(S, "a", "h1", 3, false))
	h.must(StatusGranted, semCmd(S, "b", "h", 3, false))
	h.must(StatusGranted, semCmd(S, "a", "h2", 3, false))
	h.must(StatusOK, expireCmd("a"))
	l := h.lock(S)
	if len(l.SlotDelays) != 2 || l.SlotDelays[0].Slot != 0 || l.SlotDelays[1].Slot != 2 {
		t.Fatalf("slot delays %+v, want slots 0 and 2", l.SlotDelays)
	}
	// Only slot 1 is held and the others wait out their delays: busy.
	h.open("c", 0)
	r := h.must(StatusLockBusy, semCmd(S, "c", "h", 3, false))
	if r.Busy.DelayUntil != l.SlotDelays[0].Until {
		t.Fatalf("busy %+v, want the first slot delay's end", r.Busy)
	}
	// Every holder gone, the lock stays stored for its delays alone.
	h.must(StatusOK, relCmd(S, "b", "h"))
	h.must(StatusOK, endSlotCmd(S, 0, l.SlotDelays[0].Until))
	if _, ok := h.f.Lock(S); !ok {
		t.Fatal("a semaphore with a slot in lock-delay was dropped")
	}
	h.must(StatusOK, endSlotCmd(S, 2, l.SlotDelays[1].Until))
	if _, ok := h.f.Lock(S); ok {
		t.Fatal("a semaphore with nothing left is still stored")
	}
}

func TestSemaphoreCloseReleasesWithoutDelay(t *testing.T) {
	h := newHarness(t)
	h.open("a", 5*time.Second)
	h.open("w", 5*time.Second)
	h.must(StatusGranted, semCmd(S, "a", "h", 1, false))
	h.must(StatusQueued, semCmd(S, "w", "h", 1, true))
	h.must(StatusOK, closeCmd("a"))
	if g := h.granted(S); len(g) != 1 || g[0].Session != "w" || g[0].Slot != 0 {
		t.Fatalf("close granted %+v", g)
	}
}

func TestSemaphoreRetryReturnsSameSlot(t *testing.T) {
	h := newHarness(t)
	h.open("a", time.Second)
	h.open("b", time.Second)
	h.must(StatusGranted, semCmd(S, "a", "h", 2, false))
	first := h.must(StatusGranted, semCmd(S, "b", "h", 2, false))
	again := h.must(StatusGranted, semCmd(S, "b", "h", 2, true))
	if again.Token != first.Token || again.Slot != 1 || len(h.lock(S).Holders) != 2 {
		t.Fatalf("retry %+v, first %+v", again, first)
	}
}

func TestSemaphoreSnapshotVersionAndRoundTrip(t *testing.T) {
	h := newHarness(t)
	h.open("a", 5*time.Second)
	h.open("b", 5*time.Second)
	if d := snapshotBytes(t, h.f); d[0] == snapshotVersionLockOptions {
		t.Fatal("a state without semaphores was written as version 4")
	}
	h.must(StatusGranted, semCmd(S, "a", "h", 2, false))
	h.must(StatusGranted, semCmd(S, "b", "h", 2, false))
	h.must(StatusOK, expireCmd("a"))
	data := snapshotBytes(t, h.f)
	if data[0] != snapshotVersionLockOptions {
		t.Fatalf("a state with a semaphore written as version %d", data[0])
	}
	c := New(nil)
	restoreInto(t, c, data)
	if !bytes.Equal(c.Dump(), h.f.Dump()) {
		t.Fatalf("restored state differs:\n%s\n%s", c.Dump(), h.f.Dump())
	}
	// Its history alone (the lock freed) still needs version 4.
	h.must(StatusOK, relCmd(S, "b", "h"))
	h.must(StatusOK, endSlotCmd(S, 0, h.lock(S).SlotDelays[0].Until))
	if d := snapshotBytes(t, h.f); d[0] != snapshotVersionLockOptions {
		t.Fatalf("a free semaphore history written as version %d", d[0])
	}
}

func TestSemaphoreCommandsNeedVersion5(t *testing.T) {
	for _, c := range []Command{semCmd(S, "a", "h", 2, false), endSlotCmd(S, 1, 5)} {
		if _, err := c.EncodeAs(VersionTokenLimits); err == nil {
			t.Fatalf("%s encoded in version 4", describe(c))
		}
	}
}

// TestRestoreRevokedSlotWaitsOutTTLAndLockDelay pins the reconciliation
// of a semaphore: a slot grant the restore takes away leaves that slot
// (and only it) unavailable for its holder's ttl + lock-delay, a running
// slot delay goes on in full, and a kept grant keeps its slot.
func TestRestoreRevokedSlotWaitsOutTTLAndLockDelay(t *testing.T) {
	h := newHarness(t)
	h.open("kept", 2*time.Second)
	h.open("gone", 3*time.Second)
	h.open("exp", 4*time.Second)
	h.must(StatusGranted, semCmd(S, "kept", "h", 4, false)) // slot 0
	backup := h.f.Dump()
	h.must(StatusGranted, semCmd(S, "gone", "h", 4, false)) // slot 1, after the backup
	h.must(StatusGranted, semCmd(S, "exp", "h", 4, false))  // slot 2
	h.must(StatusOK, expireCmd("exp"))
	out, rep, err := PrepareRestore(backup, 1000, h.f)
	if err != nil {
		t.Fatal(err)
	}
	if rep.GrantsRevoked != 1 || rep.SessionsKept != 1 {
		t.Fatalf("report %+v", rep)
	}
	f := New(nil)
	if err := f.Load(out); err != nil {
		t.Fatal(err)
	}
	l, ok := f.Lock(S)
	if !ok || l.Permits != 4 || len(l.Holders) != 1 || l.Holders[0].Slot != 0 {
		t.Fatalf("restored lock %+v", l)
	}
	want := []SlotDelay{{Slot: 1, Until: h.now + int64(10*time.Second+3*time.Second), For: int64(13 * time.Second)},
		{Slot: 2, Until: h.now + int64(4*time.Second), For: int64(4 * time.Second)}}
	if !reflect.DeepEqual(l.SlotDelays, want) {
		t.Fatalf("slot delays %+v, want %+v", l.SlotDelays, want)
	}
	if out[0] != snapshotVersionLockOptions {
		t.Fatalf("prepared state of version %d", out[0])
	}
}

// TestGoldenSemaphoreSnapshot pins the snapshot of a state holding a
// semaphore (version 4): its slots, slot delays and the history's permits
// and slots. A replica must keep restoring it to the same state;
// regenerate with -update only for a deliberate format change.
func TestGoldenSemaphoreSnapshot(t *testing.T) {
	h := newHarness(t)
	h.open("a", 5*time.Second)
	h.open("b", 5*time.Second)
	h.open("w", 5*time.Second)
	h.must(StatusGranted, semCmd(S, "a", "h", 3, false))
	h.must(StatusGranted, semCmd(S, "b", "h", 3, false))
	h.must(StatusGranted, semCmd(S, "a", "h2", 3, false))
	h.must(StatusQueued, semCmd(S, "w", "h", 3, true))
	h.must(StatusOK, expireCmd("a"))
	got := snapshotBytes(t, h.f)
	path := filepath.Join(goldenDir, "snapshot-v4-semaphore.json")
	if *update {
		if err := os.WriteFile(path, append(append([]byte(nil), got...), '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	want = bytes.TrimSuffix(want, []byte("\n"))
	if !bytes.Equal(got, want) {
		t.Fatalf("snapshot format changed:\n got %s\nwant %s", got, want)
	}
	g := New(nil)
	restoreInto(t, g, want)
	if !bytes.Equal(g.Dump(), want) {
		t.Fatalf("golden snapshot does not restore to itself:\n%s", g.Dump())
	}
	if l, _ := g.Lock(S); l.Permits != 3 || len(l.SlotDelays) != 2 || len(l.Holders) != 1 || len(l.Waiters) != 1 {
		t.Fatalf("restored semaphore %+v", l)
	}
	checkSessionIndex(t, g)
}
