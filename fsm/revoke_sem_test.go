package fsm

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	"github.com/raftlock/raftlock/sequencer"
)

// revokeKindCmd is revokeCmd of the given kind (RevokeKindAdmin or
// RevokeKindMaxHold, as the leader proposes at a hold limit).
func revokeKindCmd(lock, session, holder string, token uint64, kind string) Command {
	c := revokeCmd(lock, session, holder, token, "r")
	c.RevokeGrant.Kind = kind
	if kind == RevokeKindMaxHold {
		c.RevokeGrant.Reason, c.RevokeGrant.By = "max_hold", ""
	}
	return c
}

// revokedTTLPlusDelay is how long openCmd's sessions (ttl 10 s) with a
// lock-delay of 5 s keep a revoked grant's lock or slot unavailable.
const revokedTTLPlusDelay = int64(10*time.Second + 5*time.Second)

// TestRevokedSlotStaysUnavailableUntilItsDelayEnds, for an operator's
// revocation and a hold limit's alike: revoking slot 0 of a semaphore of
// 2 grants no waiter in the same entry; only slot 0 waits out the
// holder's ttl + lock-delay (a slot delay; the lock itself is never
// delayed), while slot 1 stays grantable; the revoked session's
// keepalives name the grant until slot 0's delay ends, and a stale end
// (another slot, another until) changes nothing; the end hands slot 0 to
// the next waiter and forgets the revocation.
func TestRevokedSlotStaysUnavailableUntilItsDelayEnds(t *testing.T) {
	for _, kind := range []string{RevokeKindAdmin, RevokeKindMaxHold} {
		t.Run(kind, func(t *testing.T) {
			h := newHarness(t)
			for _, s := range []string{"a", "b", "w1", "w2"} {
				h.open(s, 5*time.Second)
			}
			acq := semCmd(S, "a", "h", 2, false)
			acq.Acquire.MaxHold = int64(time.Minute)
			tok := h.must(StatusGranted, acq).Token
			h.must(StatusGranted, semCmd(S, "b", "h", 2, false))
			h.must(StatusQueued, semCmd(S, "w1", "h", 2, true))

			h.must(StatusOK, revokeKindCmd(S, "a", "h", tok, kind))
			if g := h.granted(S); len(g) != 0 {
				t.Fatalf("the revocation granted %+v in its own entry", g)
			}
			until := h.now + revokedTTLPlusDelay
			l := h.lock(S)
			want := []SlotDelay{{Slot: 0, Until: until, For: revokedTTLPlusDelay}}
			if l.Delayed || !reflect.DeepEqual(l.SlotDelays, want) {
				t.Fatalf("after the revocation: delayed %v, slot delays %+v; want only slot 0 delayed, %+v", l.Delayed, l.SlotDelays, want)
			}
			var started []Event
			for _, e := range h.last {
				if e.Kind == EventDelayStarted {
					started = append(started, e)
				}
			}
			if len(started) != 1 || !started[0].Semaphore || started[0].Slot != 0 || started[0].DelayUntil != until ||
				started[0].DelayFor != revokedTTLPlusDelay {
				t.Fatalf("delay events %+v, want slot 0's for the leader's timer", started)
			}
			wantRevoked := []RevokedGrant{{Lock: S, Holder: "h", Token: tok, Kind: kind, Reason: h.lock(S).Revoked[0].Reason}}
			if got := h.f.Revoked("a"); !reflect.DeepEqual(got, wantRevoked) {
				t.Fatalf("Revoked(a) = %+v, want %+v", got, wantRevoked)
			}
			r := h.must(StatusLockBusy, semCmd(S, "w2", "t", 2, false))
			if r.Busy.DelayUntil != until {
				t.Errorf("busy %+v, want slot 0's delay end", r.Busy)
			}

			// Slot 1 stays grantable: released, it goes to the waiter.
			h.must(StatusOK, relCmd(S, "b", "h"))
			if g := h.granted(S); len(g) != 1 || g[0].Session != "w1" || g[0].Slot != 1 {
				t.Fatalf("the release of slot 1 granted %+v, want w1 in slot 1", g)
			}
			h.must(StatusQueued, semCmd(S, "w2", "h", 2, true))
			h.must(StatusOK, endSlotCmd(S, 1, until))
			h.must(StatusOK, endSlotCmd(S, 0, until-1))
			if g := h.granted(S); len(g) != 0 || len(h.lock(S).SlotDelays) != 1 || len(h.f.Revoked("a")) != 1 {
				t.Fatalf("a stale end changed the semaphore: granted %+v, lock %+v", g, h.lock(S))
			}

			h.must(StatusOK, endSlotCmd(S, 0, until))
			if g := h.granted(S); len(g) != 1 || g[0].Session != "w2" || g[0].Slot != 0 || g[0].Token <= tok {
				t.Fatalf("the end of slot 0's delay granted %+v, want w2 in slot 0", g)
			}
			if l := h.lock(S); len(l.SlotDelays) != 0 || len(l.Revoked) != 0 || l.Delayed {
				t.Fatalf("after the delay: %+v", l)
			}
			if got := h.f.Revoked("a"); got != nil {
				t.Fatalf("Revoked(a) = %+v after the slot's delay, want none", got)
			}
			checkSessionIndex(t, h.f)
		})
	}
}

// TestRevokedSemaphoreIsForgottenOnceFree: once its holders are gone and
// the revoked slot's delay has ended, the semaphore is dropped like any
// free lock, its permits forgotten, and a plain acquire of the name is
// granted (not permits_mismatch).
func TestRevokedSemaphoreIsForgottenOnceFree(t *testing.T) {
	for _, kind := range []string{RevokeKindAdmin, RevokeKindMaxHold} {
		t.Run(kind, func(t *testing.T) {
			h := newHarness(t)
			h.open("a", 5*time.Second)
			h.open("b", 5*time.Second)
			tok := h.must(StatusGranted, semCmd(S, "a", "h", 2, false)).Token
			h.must(StatusGranted, semCmd(S, "b", "h", 2, false))
			h.must(StatusOK, revokeKindCmd(S, "a", "h", tok, kind))
			h.must(StatusOK, relCmd(S, "b", "h"))
			if _, ok := h.f.Lock(S); !ok {
				t.Fatal("the semaphore was dropped while its revoked slot's delay runs")
			}
			h.must(StatusPermitsMismatch, acqCmd(S, "b", "h", sequencer.Exclusive, false))
			l := h.lock(S)
			if len(l.SlotDelays) != 1 {
				t.Fatalf("semaphore %+v, want the revoked slot's delay alone", l)
			}
			h.must(StatusOK, endSlotCmd(S, 0, l.SlotDelays[0].Until))
			if l, ok := h.f.Lock(S); ok {
				t.Fatalf("a semaphore with no holder, waiter or delay is still stored: %+v", l)
			}
			if r := h.must(StatusGranted, acqCmd(S, "b", "h", sequencer.Exclusive, false)); r.Permits != 0 || h.lock(S).Permits != 0 {
				t.Fatalf("plain grant of the freed name: %+v, lock %+v", r, h.lock(S))
			}
			if got := h.f.Revoked("a"); got != nil {
				t.Fatalf("Revoked(a) = %+v, want none", got)
			}
			checkSessionIndex(t, h.f)
		})
	}
}

// TestEachRevokedSlotIsForgottenWhenItsOwnDelayEnds: two slots of one
// session, granted by one entry (so with one token), both revoked: the
// end of one slot's delay forgets that slot's revocation only; the other
// is named until its own delay ends.
func TestEachRevokedSlotIsForgottenWhenItsOwnDelayEnds(t *testing.T) {
	h := newHarness(t)
	h.open("x", 5*time.Second)
	h.open("a", 5*time.Second)
	h.must(StatusGranted, semCmd(S, "x", "h1", 2, false))
	h.must(StatusGranted, semCmd(S, "x", "h2", 2, false))
	h.must(StatusQueued, semCmd(S, "a", "h1", 2, true))
	h.must(StatusQueued, semCmd(S, "a", "h2", 2, true))
	h.must(StatusOK, closeCmd("x"))
	l := h.lock(S)
	if len(l.Holders) != 2 || l.Holders[0].Token != l.Holders[1].Token {
		t.Fatalf("holders %+v, want both of a's, granted by one entry", l.Holders)
	}
	tok := l.Holders[0].Token
	h.must(StatusOK, revokeCmd(S, "a", "h1", tok, "r"))
	h.now += int64(time.Second)
	h.must(StatusOK, revokeCmd(S, "a", "h2", tok, "r"))
	l = h.lock(S)
	if len(l.SlotDelays) != 2 || len(l.Revoked) != 2 || l.Revoked[0].Slot != 0 || l.Revoked[1].Slot != 1 {
		t.Fatalf("after both revocations: %+v", l)
	}
	// A replica restored from a snapshot here keeps each revocation's
	// slot, and goes on the same.
	data := snapshotBytes(t, h.f)
	if data[0] != snapshotVersionLockOptions {
		t.Fatalf("snapshot version %d, want %d", data[0], snapshotVersionLockOptions)
	}
	g := newHarness(t)
	restoreInto(t, g.f, data)
	if !bytes.Equal(g.f.Dump(), h.f.Dump()) {
		t.Fatalf("restored state differs:\n%s\n%s", g.f.Dump(), h.f.Dump())
	}
	g.idx, g.now = h.idx, h.now
	want := []RevokedGrant{{Lock: S, Holder: "h2", Token: tok, Kind: RevokeKindAdmin, Reason: "r"}}
	for _, r := range []*harness{h, g} {
		r.must(StatusOK, endSlotCmd(S, 0, l.SlotDelays[0].Until))
		if got := r.f.Revoked("a"); !reflect.DeepEqual(got, want) {
			t.Fatalf("Revoked(a) = %+v after slot 0's delay, want only slot 1's %+v", got, want)
		}
		r.must(StatusOK, endSlotCmd(S, 1, l.SlotDelays[1].Until))
		if got := r.f.Revoked("a"); got != nil {
			t.Fatalf("Revoked(a) = %+v after both delays, want none", got)
		}
		if _, ok := r.f.Lock(S); ok {
			t.Fatal("the free semaphore is still stored")
		}
	}
	if !bytes.Equal(g.f.Dump(), h.f.Dump()) {
		t.Fatal("the restored replica diverged")
	}
}

// TestRevokedSessionsSlotWaitsOutTTLPlusLockDelayAlone: a session ended
// as revoked (an operator's close by handle, its token's deletion) frees
// no slot it held in the same entry: each waits out ttl + lock-delay,
// the other slots stay grantable. A revocation it had is forgotten with
// it, its slot's delay running on, and the semaphore is dropped once
// every delay has ended.
func TestRevokedSessionsSlotWaitsOutTTLPlusLockDelayAlone(t *testing.T) {
	for _, end := range []struct {
		name string
		cmd  Command
	}{
		{"close by handle", Command{Type: CmdRevokeSession, RevokeSession: &RevokeSession{ID: "a", Reason: "r"}}},
		{"token deletion", deleteTokenCmd("t1")},
	} {
		t.Run(end.name, func(t *testing.T) {
			h := newHarness(t)
			h.must(StatusOK, tokenCmd("t1", "h1", "write:"))
			h.must(StatusOK, ownedOpen("a", "t1")) // ttl 10 s, lock-delay 5 s
			h.open("b", 5*time.Second)
			h.open("w", 5*time.Second)
			tok := h.must(StatusGranted, semCmd(S, "a", "h1", 3, false)).Token // slot 0
			h.must(StatusGranted, semCmd(S, "a", "h2", 3, false))              // slot 1
			h.must(StatusGranted, semCmd(S, "b", "h", 3, false))               // slot 2
			h.must(StatusOK, revokeCmd(S, "a", "h1", tok, "r"))
			revokedUntil := h.now + revokedTTLPlusDelay
			h.must(StatusQueued, semCmd(S, "w", "h", 3, true))
			h.now += int64(time.Second)

			h.must(StatusOK, end.cmd)
			if g := h.granted(S); len(g) != 0 {
				t.Fatalf("the session's end granted %+v in its own entry", g)
			}
			want := []SlotDelay{{Slot: 0, Until: revokedUntil, For: revokedTTLPlusDelay},
				{Slot: 1, Until: h.now + revokedTTLPlusDelay, For: revokedTTLPlusDelay}}
			l := h.lock(S)
			if l.Delayed || !reflect.DeepEqual(l.SlotDelays, want) || len(l.Revoked) != 0 {
				t.Fatalf("after the end: %+v, want slot delays %+v and no revocation kept", l, want)
			}
			h.must(StatusOK, relCmd(S, "b", "h"))
			if g := h.granted(S); len(g) != 1 || g[0].Session != "w" || g[0].Slot != 2 {
				t.Fatalf("slot 2's release granted %+v, want w in slot 2", g)
			}
			h.must(StatusOK, relCmd(S, "w", "h"))
			h.must(StatusOK, endSlotCmd(S, 0, want[0].Until))
			h.must(StatusOK, endSlotCmd(S, 1, want[1].Until))
			if l, ok := h.f.Lock(S); ok {
				t.Fatalf("the free semaphore is still stored: %+v", l)
			}
			checkSessionIndex(t, h.f)
		})
	}
}

// TestRevokedReaderKeepsNewReadersAndWritersOutUntilItsDelayEnds pins
// the rule for one shared grant revoked while other readers hold: the
// other readers keep their grants; the lock (a plain lock has one delay)
// waits out the revoked holder's ttl + lock-delay, so no new reader
// joins and no writer is granted before it ends, even once the other
// readers are gone; then the waiting writer is granted.
func TestRevokedReaderKeepsNewReadersAndWritersOutUntilItsDelayEnds(t *testing.T) {
	h := newHarness(t)
	for _, s := range []string{"r1", "r2", "r3", "w"} {
		h.open(s, 5*time.Second)
	}
	tok := h.must(StatusGranted, acqCmd("a", "r1", "h", Shared, false)).Token
	h.must(StatusGranted, acqCmd("a", "r2", "h", Shared, false))
	h.must(StatusOK, revokeCmd("a", "r1", "h", tok, "r"))
	l := h.lock("a")
	if len(l.Holders) != 1 || l.Holders[0].Session != "r2" || !l.Delayed || l.DelayFor != revokedTTLPlusDelay {
		t.Fatalf("after revoking r1: %+v, want r2 holding and the lock delayed for ttl + lock-delay", l)
	}
	h.must(StatusLockBusy, acqCmd("a", "r3", "h", Shared, false))
	h.must(StatusQueued, acqCmd("a", "w", "h", Exclusive, true))
	h.must(StatusOK, relCmd("a", "r2", "h"))
	if g := h.granted("a"); len(g) != 0 {
		t.Fatalf("the last reader's release granted %+v while the revoked reader's delay runs", g)
	}
	h.must(StatusOK, endDelayCmd("a", l.DelayUntil))
	if g := h.granted("a"); len(g) != 1 || g[0].Session != "w" || g[0].Mode != Exclusive {
		t.Fatalf("the end of the delay granted %+v, want the writer", g)
	}
	if h.f.Revoked("r1") != nil {
		t.Fatal("the revocation is still named after the delay")
	}
}

// TestRestoreKeepsARevokedSlotDelayedAndNamed: a restore into the running
// cluster that keeps a session whose slot grant was revoked (after the
// backup) keeps that slot delayed, in full, and the revocation named at
// the session's keepalives until the slot's delay ends.
func TestRestoreKeepsARevokedSlotDelayedAndNamed(t *testing.T) {
	h := newHarness(t)
	h.open("k", 5*time.Second)
	h.open("w", 5*time.Second)
	h.must(StatusGranted, semCmd(S, "k", "h1", 3, false)) // slot 0, in the backup
	backup := h.f.Dump()
	tok := h.must(StatusGranted, semCmd(S, "k", "h2", 3, false)).Token // slot 1
	h.must(StatusOK, revokeCmd(S, "k", "h2", tok, "r"))
	h.now += int64(time.Second)
	h.must(StatusOK, memberCmd("n1", "r1", "h1")) // the running cluster's clock moves on
	out, rep, err := PrepareRestore(backup, 1000, h.f)
	if err != nil {
		t.Fatal(err)
	}
	if rep.SessionsKept != 2 || rep.GrantsRevoked != 0 {
		t.Fatalf("report %+v, want k and w kept", rep)
	}
	g := newHarness(t)
	if err := g.f.Load(out); err != nil {
		t.Fatal(err)
	}
	g.idx, g.now = g.f.AppliedIndex(), h.now
	l, ok := g.f.Lock(S)
	want := []SlotDelay{{Slot: 1, Until: h.now + revokedTTLPlusDelay, For: revokedTTLPlusDelay}}
	if !ok || len(l.Holders) != 1 || l.Holders[0].Slot != 0 || !reflect.DeepEqual(l.SlotDelays, want) {
		t.Fatalf("restored semaphore %+v, want k in slot 0 and slot 1 delayed in full %+v", l, want)
	}
	named := []RevokedGrant{{Lock: S, Holder: "h2", Token: tok, Kind: RevokeKindAdmin, Reason: "r"}}
	if got := g.f.Revoked("k"); !reflect.DeepEqual(got, named) {
		t.Fatalf("restored Revoked(k) = %+v, want %+v", got, named)
	}
	g.must(StatusGranted, semCmd(S, "w", "h", 3, false)) // slot 2
	if r := g.must(StatusLockBusy, semCmd(S, "w", "h2", 3, false)); r.Busy == nil {
		t.Fatal("no busy answer")
	}
	g.must(StatusOK, endSlotCmd(S, 1, want[0].Until))
	if got := g.f.Revoked("k"); got != nil {
		t.Fatalf("Revoked(k) = %+v after the slot's delay, want none", got)
	}
	if r := g.must(StatusGranted, semCmd(S, "w", "h2", 3, false)); r.Slot != 1 {
		t.Fatalf("granted slot %d, want the revoked slot 1 once its delay ended", r.Slot)
	}
}
