package fsm

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/raftlock/raftlock/sequencer"
)

func revokeCmd(lock, session, holder string, token uint64, reason string) Command {
	return Command{Type: CmdRevokeGrant, RevokeGrant: &RevokeGrant{Lock: lock, Session: session, Holder: holder,
		Token: token, Kind: RevokeKindAdmin, Reason: reason, By: "tok-1"}}
}

// TestRevokeEndsTheGrantAtOnceAndDelaysTheLockForTTLPlusLockDelay: the
// revoked grant is gone at once (no holder, so no sequencer check passes),
// its session stays open, the waiter is granted only when the delay of the
// session's ttl + lock-delay ends, and the revocation is named for the
// session (its keepalives) until then.
func TestRevokeEndsTheGrantAtOnceAndDelaysTheLockForTTLPlusLockDelay(t *testing.T) {
	h := newHarness(t)
	h.open("s1", 5*time.Second)
	h.open("s2", 5*time.Second)
	tok := h.must(StatusGranted, acqCmd("a", "s1", "h", sequencer.Exclusive, false)).Token
	h.must(StatusQueued, acqCmd("a", "s2", "w", sequencer.Exclusive, true))
	h.must(StatusOK, revokeCmd("a", "s1", "h", tok, "stuck"))
	if !h.lastHas(EventRevoked, "a", "s1", "h") {
		t.Errorf("no EventRevoked: %+v", h.last)
	}
	for _, e := range h.last {
		if e.Kind == EventRevoked && (e.Token != tok || e.RevokeReason != "stuck" || e.By != "tok-1" || e.RevokeKind != RevokeKindAdmin) {
			t.Errorf("EventRevoked = %+v", e)
		}
	}
	const d = int64(10e9 + 5e9) // openCmd: ttl 10 s, lock-delay 5 s
	l := h.lock("a")
	if len(l.Holders) != 0 || !l.Delayed || l.DelayFor != d || l.DelayUntil != h.now+d {
		t.Fatalf("lock a = %+v, want no holder and delayed for ttl+lock-delay", l)
	}
	if len(l.Waiters) != 1 || l.Waiters[0].Session != "s2" {
		t.Errorf("lock a = %+v, want s2 still waiting", l)
	}
	if _, ok := h.f.Session("s1"); !ok {
		t.Error("the revoked holder's session was closed")
	}
	want := []RevokedGrant{{Lock: "a", Holder: "h", Token: tok, Kind: RevokeKindAdmin, Reason: "stuck"}}
	if got := h.f.Revoked("s1"); !reflect.DeepEqual(got, want) {
		t.Errorf("Revoked(s1) = %+v, want %+v", got, want)
	}
	if h.f.Revoked("s2") != nil {
		t.Error("another session is told of the revocation")
	}
	// A repeated or stale revocation changes nothing.
	before := h.f.Dump()
	h.must(StatusNotHolder, revokeCmd("a", "s1", "h", tok, "again"))
	if after := h.f.Dump(); !bytes.Equal(before[len(before)-200:], after[len(after)-200:]) {
		t.Log("state moved only in its applied index")
	}
	h.must(StatusOK, endDelayCmd("a", h.lock("a").DelayUntil))
	if l := h.lock("a"); len(l.Holders) != 1 || l.Holders[0].Session != "s2" || len(l.Revoked) != 0 {
		t.Errorf("lock a = %+v, want granted to s2 and its revocations forgotten once the delay ended", l)
	}
	if got := h.f.Revoked("s1"); got != nil {
		t.Errorf("Revoked(s1) = %+v after the delay, want none", got)
	}
	checkSessionIndex(t, h.f)
}

// TestRevokeOfAGrantNotHeldChangesNothing: an unknown lock, another
// holder, another token, an unknown session and an incomplete command are
// refused, and the state is unchanged.
func TestRevokeOfAGrantNotHeldChangesNothing(t *testing.T) {
	h := newHarness(t)
	h.open("s1", 0)
	tok := h.must(StatusGranted, acqCmd("a", "s1", "h", sequencer.Exclusive, false)).Token
	for _, c := range []struct {
		name string
		cmd  Command
		want Status
	}{
		{"unknown lock", revokeCmd("b", "s1", "h", tok, "x"), StatusNotHolder},
		{"other holder", revokeCmd("a", "s1", "other", tok, "x"), StatusNotHolder},
		{"other token", revokeCmd("a", "s1", "h", tok+1, "x"), StatusNotHolder},
		{"unknown session", revokeCmd("a", "s9", "h", tok, "x"), StatusNotHolder},
		{"no token", revokeCmd("a", "s1", "h", 0, "x"), StatusInvalid},
	} {
		before := h.f.Dump()
		h.must(c.want, c.cmd)
		after := h.f.Dump()
		// Only the applied index (and the digest chain) moves.
		g, w := New(nil), New(nil)
		restoreInto(t, g, before)
		restoreInto(t, w, after)
		if !reflect.DeepEqual(g.Locks(""), w.Locks("")) || !reflect.DeepEqual(g.Sessions(), w.Sessions()) {
			t.Errorf("%s changed the state", c.name)
		}
	}
}

// TestRevokedSharedGrantLeavesTheOtherHolders: revoking one of two shared
// grants keeps the other, and a new shared acquire waits out the delay.
func TestRevokedSharedGrantLeavesTheOtherHolders(t *testing.T) {
	h := newHarness(t)
	h.open("s1", time.Second)
	h.open("s2", time.Second)
	h.open("s3", time.Second)
	t1 := h.must(StatusGranted, acqCmd("a", "s1", "h", sequencer.Shared, false)).Token
	h.must(StatusGranted, acqCmd("a", "s2", "h", sequencer.Shared, false))
	h.must(StatusOK, revokeCmd("a", "s1", "h", t1, ""))
	if l := h.lock("a"); len(l.Holders) != 1 || l.Holders[0].Session != "s2" || !l.Delayed {
		t.Fatalf("lock a = %+v", l)
	}
	h.must(StatusLockBusy, acqCmd("a", "s3", "h", sequencer.Shared, false))
	checkSessionIndex(t, h.f)
}

// TestRevocationSurvivesSnapshotAndOlderBuildsRefuseIt: a state holding a
// revocation in its delay snapshots as version 4 and restores to the same
// bytes, the session's revocations rebuilt.
func TestRevocationSurvivesSnapshotAndOlderBuildsRefuseIt(t *testing.T) {
	h := newHarness(t)
	h.open("s1", time.Second)
	tok := h.must(StatusGranted, acqCmd("a", "s1", "h", sequencer.Exclusive, false)).Token
	h.must(StatusOK, revokeCmd("a", "s1", "h", tok, "r"))
	data := snapshotBytes(t, h.f)
	if data[0] != snapshotVersionLockOptions {
		t.Fatalf("snapshot version %d, want %d", data[0], snapshotVersionLockOptions)
	}
	g := New(nil)
	restoreInto(t, g, data)
	if !bytes.Equal(g.Dump(), h.f.Dump()) {
		t.Fatalf("restored state differs")
	}
	if got := g.Revoked("s1"); len(got) != 1 || got[0].Token != tok {
		t.Errorf("restored Revoked(s1) = %+v", got)
	}
	h.must(StatusOK, endDelayCmd("a", h.lock("a").DelayUntil))
	if v := snapshotBytes(t, h.f)[0]; v == snapshotVersionLockOptions {
		t.Errorf("a state without revocations still snapshots as version %d", v)
	}
}

// TestRevokeIsWrittenOnlyInVersion5: older replicas cannot read it.
func TestRevokeIsWrittenOnlyInVersion5(t *testing.T) {
	c := revokeCmd("a", "s", "h", 7, "why")
	c.Now = 42
	for _, v := range []byte{VersionJSON, VersionBinary, VersionTokenLimits} {
		if _, err := c.EncodeAs(v); err == nil {
			t.Errorf("revoke encoded in version %d", v)
		}
	}
	data, err := c.EncodeAs(VersionLockOptions)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(data)
	if err != nil || !reflect.DeepEqual(got, c) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
}

// TestRevokedSessionHoldsItsLocksForTTLPlusLockDelay: an operator's close
// by handle ends the session as a token deletion does.
func TestRevokedSessionHoldsItsLocksForTTLPlusLockDelay(t *testing.T) {
	h := newHarness(t)
	h.open("s1", 5*time.Second)
	h.open("s2", 5*time.Second)
	h.must(StatusGranted, acqCmd("a", "s1", "h", sequencer.Exclusive, false))
	h.must(StatusQueued, acqCmd("a", "s2", "w", sequencer.Exclusive, true))
	h.must(StatusOK, Command{Type: CmdRevokeSession, RevokeSession: &RevokeSession{ID: "s1", Reason: "r"}})
	if _, ok := h.f.Session("s1"); ok {
		t.Fatal("the session is still open")
	}
	const d = int64(10e9 + 5e9)
	if l := h.lock("a"); len(l.Holders) != 0 || !l.Delayed || l.DelayFor != d {
		t.Fatalf("lock a = %+v, want delayed for ttl+lock-delay", l)
	}
	h.must(StatusSessionNotFound, Command{Type: CmdRevokeSession, RevokeSession: &RevokeSession{ID: "s1"}})
	checkSessionIndex(t, h.f)
}

// TestHoldLimitIsKeptOnTheGrantAndRevokedAsMaxHold: an acquire's max_hold
// is kept on its grant (straight away, or from its place in the queue),
// announced with the grant for the leader's timer, snapshotted as
// version 4, and its revocation is of kind max_hold.
func TestHoldLimitIsKeptOnTheGrantAndRevokedAsMaxHold(t *testing.T) {
	h := newHarness(t)
	h.open("s1", time.Second)
	h.open("s2", time.Second)
	a := acqCmd("a", "s1", "h", sequencer.Exclusive, false)
	a.Acquire.MaxHold = int64(30 * time.Second)
	tok := h.must(StatusGranted, a).Token
	if g := h.granted("a"); len(g) != 1 || g[0].MaxHold != int64(30*time.Second) {
		t.Fatalf("grant events %+v, want the hold limit", g)
	}
	w := acqCmd("a", "s2", "w", sequencer.Exclusive, true)
	w.Acquire.MaxHold = int64(time.Minute)
	h.must(StatusQueued, w)
	if v := snapshotBytes(t, h.f)[0]; v != snapshotVersionLockOptions {
		t.Errorf("a state with hold limits snapshots as version %d", v)
	}
	r := revokeCmd("a", "s1", "h", tok, "")
	r.RevokeGrant.Kind = RevokeKindMaxHold
	h.must(StatusOK, r)
	if got := h.f.Revoked("s1"); len(got) != 1 || got[0].Kind != RevokeKindMaxHold {
		t.Errorf("Revoked(s1) = %+v", got)
	}
	h.must(StatusOK, endDelayCmd("a", h.lock("a").DelayUntil))
	if g := h.granted("a"); len(g) != 1 || g[0].MaxHold != int64(time.Minute) {
		t.Fatalf("the waiter's grant events %+v, want its hold limit", g)
	}
	if l := h.lock("a"); l.Holders[0].MaxHold != int64(time.Minute) {
		t.Errorf("lock a = %+v", l)
	}
}

// TestRequestReleaseMarksTheGrantUntilItEnds: a waiter's request marks
// the holder's grant (who, when), which its session's keepalive names,
// until the grant ends; a lock not held or an unknown asker changes
// nothing.
func TestRequestReleaseMarksTheGrantUntilItEnds(t *testing.T) {
	h := newHarness(t)
	h.open("s1", time.Second)
	h.open("s2", time.Second)
	rr := func(lock, session, holder string) Command {
		return Command{Type: CmdRequestRelease, RequestRelease: &RequestRelease{Lock: lock, Session: session, Holder: holder}}
	}
	h.must(StatusNotHolder, rr("a", "s2", "w"))
	tok := h.must(StatusGranted, acqCmd("a", "s1", "h", sequencer.Exclusive, false)).Token
	h.must(StatusQueued, acqCmd("a", "s2", "w", sequencer.Exclusive, true))
	h.must(StatusSessionNotFound, rr("a", "s9", "w"))
	if h.f.ReleaseRequests("s1") != nil {
		t.Fatal("a release requested before anyone asked")
	}
	h.must(StatusOK, rr("a", "s2", "w"))
	if !h.lastHas(EventReleaseRequested, "a", "s1", "h") {
		t.Errorf("no EventReleaseRequested: %+v", h.last)
	}
	got := h.f.ReleaseRequests("s1")
	if len(got) != 1 || got[0].Token != tok || got[0].Request.Session != "s2" || got[0].Request.Holder != "w" || got[0].Request.At != h.now {
		t.Fatalf("ReleaseRequests(s1) = %+v", got)
	}
	if v := snapshotBytes(t, h.f)[0]; v != snapshotVersionLockOptions {
		t.Errorf("snapshot version %d with a release request", v)
	}
	h.must(StatusOK, relCmd("a", "s1", "h"))
	if got := h.f.ReleaseRequests("s1"); got != nil {
		t.Errorf("after the release: %+v", got)
	}
	if l := h.lock("a"); len(l.Holders) != 1 || l.Holders[0].Session != "s2" || l.Holders[0].ReleaseRequested != nil {
		t.Errorf("the next grant carries the old request: %+v", l)
	}
}

// TestRandomRevocationsKeepTheirRules applies random acquires, releases,
// expiries, revocations (current, stale and of hold limits), release
// requests and ends of delays, and checks after every entry: a lock with a
// revocation kept is in its delay (nothing is granted before the revoked
// client was told); a session's revocations are exactly its locks'; the
// session index holds; and a snapshot restores to the same bytes.
func TestRandomRevocationsKeepTheirRules(t *testing.T) {
	rng := rand.New(rand.NewPCG(32, 14))
	h := newHarness(t)
	sessions := []string{"s1", "s2", "s3", "s4"}
	for _, s := range sessions {
		h.open(s, time.Duration(rng.IntN(3))*time.Second)
	}
	locks := []string{"a", "b", "c"}
	for step := range 3000 {
		pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
		var c Command
		switch p := rng.IntN(100); {
		case p < 35:
			c = acqCmd(pick(locks), pick(sessions), pick([]string{"h1", "h2"}), Exclusive, rng.IntN(2) == 0)
			if rng.IntN(3) == 0 {
				c.Acquire.MaxHold = int64(time.Minute)
			}
		case p < 50:
			c = relCmd(pick(locks), pick(sessions), pick([]string{"h1", "h2"}))
		case p < 70:
			l := h.lock(pick(locks))
			if len(l.Holders) > 0 && rng.IntN(4) > 0 {
				hd := l.Holders[rng.IntN(len(l.Holders))]
				c = revokeCmd(l.Name, hd.Session, hd.Holder, hd.Token, "r")
				if rng.IntN(3) == 0 {
					c.RevokeGrant.Token-- // stale
				}
				if rng.IntN(4) == 0 {
					c.RevokeGrant.Kind = RevokeKindMaxHold
				}
			} else {
				c = revokeCmd(pick(locks), pick(sessions), "h1", uint64(rng.IntN(int(h.idx)+1)), "r")
			}
		case p < 78:
			c = Command{Type: CmdRequestRelease, RequestRelease: &RequestRelease{Lock: pick(locks), Session: pick(sessions), Holder: "w"}}
		case p < 93:
			l := h.lock(pick(locks))
			until := l.DelayUntil
			if rng.IntN(5) == 0 {
				until++
			}
			c = endDelayCmd(l.Name, until)
			if l.Name == "" {
				c = endDelayCmd(pick(locks), 0)
			}
		case p < 97:
			s := pick(sessions)
			c = expireCmd(s)
			h.apply(c)
			h.open(s, time.Second)
			continue
		default:
			s := pick(sessions)
			h.apply(Command{Type: CmdRevokeSession, RevokeSession: &RevokeSession{ID: s}})
			h.open(s, time.Second)
			continue
		}
		h.apply(c)
		h.now += int64(time.Millisecond)
		want := map[string]int{}
		for _, l := range h.f.Locks("") {
			if len(l.Revoked) > 0 && !l.Delayed {
				t.Fatalf("step %d: lock %s keeps revocations %+v out of its delay", step, l.Name, l.Revoked)
			}
			for _, r := range l.Revoked {
				if _, ok := h.f.Session(r.Session); ok {
					want[r.Session]++
				}
			}
			for _, hd := range l.Holders {
				if hd.ReleaseRequested != nil && hd.ReleaseRequested.Session == hd.Session && hd.ReleaseRequested.Holder == hd.Holder {
					t.Fatalf("step %d: a holder asked itself to release: %+v", step, hd)
				}
			}
		}
		for _, s := range sessions {
			if got := len(h.f.Revoked(s)); got != want[s] {
				t.Fatalf("step %d: session %s names %d revocations, its locks keep %d", step, s, got, want[s])
			}
		}
		checkSessionIndex(t, h.f)
		if step%100 == 0 {
			g := New(nil)
			restoreInto(t, g, h.f.Dump())
			if !bytes.Equal(g.Dump(), h.f.Dump()) {
				t.Fatalf("step %d: restored state differs", step)
			}
		}
	}
	kinds := map[EventKind]int{}
	for _, e := range h.events {
		kinds[e.Kind]++
	}
	if kinds[EventRevoked] < 100 || kinds[EventReleaseRequested] < 20 || kinds[EventGranted] < 150 {
		t.Errorf("too few revocations (%d), release requests (%d) or grants (%d) to judge", kinds[EventRevoked],
			kinds[EventReleaseRequested], kinds[EventGranted])
	}
	t.Logf("%d revocations, %d release requests, %d grants", kinds[EventRevoked], kinds[EventReleaseRequested], kinds[EventGranted])
}
