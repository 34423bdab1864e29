package fsm

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/sequencer"
)

// limited stamps lim into an open or acquire command, as the leader does.
func limited(c Command, lim api.Limits) Command {
	switch c.Type {
	case CmdOpenSession:
		c.OpenSession.Limits = &lim
	case CmdAcquire:
		c.Acquire.Limits = &lim
	}
	return c
}

// stateOf is the state as a snapshot persists it, without the applied
// index and clock (which every entry moves).
func stateOf(t testing.TB, f *FSM) state {
	t.Helper()
	var st state
	if err := json.Unmarshal(f.Dump()[1:], &st); err != nil {
		t.Fatal(err)
	}
	st.Applied, st.Now = 0, 0
	st.Digest, st.DigestOrigin = "", 0 // moves with every entry, like the clock
	return st
}

// refused applies c, which must be refused with resource_exhausted naming
// what, and checks that it changed nothing: the same state, no event.
func (h *harness) refused(c Command, what string) {
	h.t.Helper()
	before := stateOf(h.t, h.f)
	r := h.must(StatusResourceExhausted, c)
	if !strings.Contains(r.Refusal, what) || !strings.Contains(r.Refusal, "is reached") {
		h.t.Errorf("refusal %q does not name %q", r.Refusal, what)
	}
	if r.Token != 0 || r.Busy != nil {
		h.t.Errorf("refused result %+v carries a grant or busy", r)
	}
	if len(h.last) != 0 {
		h.t.Errorf("refused entry emitted %+v", h.last)
	}
	if after := stateOf(h.t, h.f); !reflect.DeepEqual(before, after) {
		h.t.Errorf("refused entry changed the state:\nbefore %+v\nafter  %+v", before, after)
	}
	checkSessionIndex(h.t, h.f)
}

func TestOpenPastSessionLimitIsRefusedAndChangesNothing(t *testing.T) {
	h := newHarness(t)
	lim := api.Limits{Sessions: 2}
	h.must(StatusOK, limited(openCmd("s1", 0), lim))
	h.must(StatusOK, limited(openCmd("s2", 0), lim))
	h.refused(limited(openCmd("s3", 0), lim), "2 open sessions")
	h.must(StatusOK, closeCmd("s1"))
	h.must(StatusOK, limited(openCmd("s3", 0), lim))
}

func TestOpenPastSessionsPerTokenIsRefusedAndChangesNothing(t *testing.T) {
	h := newHarness(t)
	lim := api.Limits{SessionsPerToken: 2}
	h.must(StatusOK, limited(ownedOpen("s1", "alice"), lim))
	h.must(StatusOK, limited(ownedOpen("s2", "alice"), lim))
	h.refused(limited(ownedOpen("s3", "alice"), lim), "2 open sessions of this token")
	// Another token, and sessions without a token, are not counted
	// against alice's.
	h.must(StatusOK, limited(ownedOpen("b1", "bob"), lim))
	h.must(StatusOK, limited(openCmd("anon", 0), lim))
	// A closed or expired session frees its place; a restored state
	// counts the same.
	h.must(StatusOK, closeCmd("s1"))
	h.must(StatusOK, limited(ownedOpen("s3", "alice"), lim))
	h.must(StatusOK, expireCmd("s2"))
	h.must(StatusOK, limited(ownedOpen("s4", "alice"), lim))
	g := newHarness(t)
	restoreInto(t, g.f, snapshotBytes(t, h.f))
	checkSessionIndex(t, g.f)
	g.refused(limited(ownedOpen("s5", "alice"), lim), "2 open sessions of this token")
	g.must(StatusOK, limited(ownedOpen("b2", "bob"), lim))
}

func TestAcquireOfNewLockPastLockLimitIsRefusedAndChangesNothing(t *testing.T) {
	h := newHarness(t)
	lim := api.Limits{Locks: 2}
	h.open("s1", 0)
	h.open("s2", 0)
	h.must(StatusGranted, limited(acqCmd("a", "s1", "h", sequencer.Exclusive, false), lim))
	// "old" leaves a free history behind: a refused acquire keeps it.
	h.must(StatusGranted, limited(acqCmd("old", "s1", "h", sequencer.Exclusive, false), lim))
	h.must(StatusOK, relCmd("old", "s1", "h"))
	h.must(StatusGranted, limited(acqCmd("b", "s1", "h", sequencer.Exclusive, false), lim))
	for _, c := range []Command{
		acqCmd("c", "s1", "h", sequencer.Exclusive, false),
		acqCmd("c", "s2", "h", sequencer.Shared, true),
		acqCmd("old", "s2", "h", sequencer.Exclusive, true),
	} {
		h.refused(limited(c, lim), "2 locks held, waited for or delayed")
	}
	// Within the limit: a stored lock takes more holders and waiters, and
	// retries are answered as before.
	h.must(StatusQueued, limited(acqCmd("a", "s2", "w", sequencer.Exclusive, true), lim))
	h.must(StatusGranted, limited(acqCmd("a", "s1", "h", sequencer.Exclusive, false), lim))
	h.must(StatusQueued, limited(acqCmd("a", "s2", "w", sequencer.Exclusive, true), lim))
	h.must(StatusOK, relCmd("b", "s1", "h"))
	h.must(StatusGranted, limited(acqCmd("old", "s2", "h", sequencer.Exclusive, false), lim))
	if l := h.lock("old"); len(l.Grants) != 2 {
		t.Fatalf("lock old carries %d grants, want its history and the new grant", len(l.Grants))
	}
}

func TestWaitPastWaitersPerLockIsRefusedAndChangesNothing(t *testing.T) {
	h := newHarness(t)
	lim := api.Limits{WaitersPerLock: 2}
	h.open("s1", 0)
	h.open("s2", 0)
	h.must(StatusGranted, limited(acqCmd("a", "s1", "h", sequencer.Exclusive, false), lim))
	h.must(StatusQueued, limited(acqCmd("a", "s2", "w1", sequencer.Exclusive, true), lim))
	h.must(StatusQueued, limited(acqCmd("a", "s2", "w2", sequencer.Shared, true), lim))
	h.refused(limited(acqCmd("a", "s1", "w3", sequencer.Exclusive, true), lim), "2 waiters on this lock")
	// A queued holder's retry keeps its place; a try is busy, as before.
	h.must(StatusQueued, limited(acqCmd("a", "s2", "w1", sequencer.Exclusive, true), lim))
	h.must(StatusLockBusy, limited(acqCmd("a", "s1", "w3", sequencer.Exclusive, false), lim))
	h.must(StatusOK, cancelCmd("a", "s2", "w2"))
	h.must(StatusQueued, limited(acqCmd("a", "s1", "w3", sequencer.Exclusive, true), lim))
}

// LocksPerSession bounds a session's holds and waits: each holder id on
// each lock counts, so many holders of one shared lock count as many.
func TestAcquirePastLocksPerSessionIsRefusedAndChangesNothing(t *testing.T) {
	h := newHarness(t)
	lim := api.Limits{LocksPerSession: 2}
	h.open("s1", 0)
	h.open("s2", 0)
	h.must(StatusGranted, limited(acqCmd("busy", "s2", "h", sequencer.Exclusive, false), lim))
	h.must(StatusGranted, limited(acqCmd("a", "s1", "h", sequencer.Shared, false), lim))
	h.must(StatusGranted, limited(acqCmd("b", "s1", "h", sequencer.Exclusive, false), lim))
	for _, c := range []Command{
		acqCmd("c", "s1", "h", sequencer.Exclusive, false),
		acqCmd("busy", "s1", "h", sequencer.Exclusive, true),
		acqCmd("a", "s1", "h2", sequencer.Shared, false),
	} {
		h.refused(limited(c, lim), "2 locks this session holds or waits for")
	}
	// A try of a busy lock adds nothing: busy, not refused; nor is a
	// holder's retry.
	h.must(StatusLockBusy, limited(acqCmd("busy", "s1", "h", sequencer.Exclusive, false), lim))
	h.must(StatusGranted, limited(acqCmd("a", "s1", "h", sequencer.Shared, false), lim))
	h.must(StatusOK, relCmd("b", "s1", "h"))
	h.must(StatusQueued, limited(acqCmd("busy", "s1", "h", sequencer.Exclusive, true), lim))
	h.refused(limited(acqCmd("a", "s1", "h2", sequencer.Shared, false), lim), "2 locks this session holds or waits for")
	h.must(StatusOK, cancelCmd("busy", "s1", "h"))
	h.must(StatusGranted, limited(acqCmd("a", "s1", "h2", sequencer.Shared, false), lim))
	// The count is rebuilt from a snapshot.
	g := New(nil)
	restoreInto(t, g, snapshotBytes(t, h.f))
	checkSessionIndex(t, g)
}

// An entry written before limits (none in it) is applied without any:
// replaying an old log gives the state it gave.
func TestEntriesWithoutLimitsAreUnbounded(t *testing.T) {
	h := newHarness(t)
	for i := range 3 {
		h.open(fmt.Sprint("s", i), 0)
		h.must(StatusGranted, acqCmd(fmt.Sprint("l", i), "s0", "h", sequencer.Exclusive, false))
	}
	var none *api.Limits
	if err := none.Exceeded(api.Usage{Sessions: 1 << 30, Locks: 1 << 30}); err != nil {
		t.Fatalf("nil limits: %v", err)
	}
}

// Limits travel in the entry: they survive encoding, so every replica
// applies the leader's.
func TestLimitsTravelInTheEntry(t *testing.T) {
	lim := api.DefaultLimits()
	for _, c := range []Command{limited(openCmd("s", time.Second), lim), limited(acqCmd("a", "s", "h", sequencer.Shared, true), lim)} {
		data, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Fatalf("decode(encode(%+v)) = %+v", c, got)
		}
	}
}

// Paging by name returns every lock exactly once, in order, while locks
// before and after the cursor come and go between the pages.
func TestLocksPagesListEveryLockOnceInOrderUnderChanges(t *testing.T) {
	h := newHarness(t)
	h.open("s", 0)
	for i := range 50 {
		h.must(StatusGranted, acqCmd(fmt.Sprintf("p/%03d", i*2), "s", "h", sequencer.Exclusive, false))
	}
	h.must(StatusGranted, acqCmd("q/other", "s", "h", sequencer.Exclusive, false))
	var got []string
	after, pages := "", 0
	for {
		ls, next := h.f.LocksPage("p/", after, 7, unboundedAnswers)
		pages++
		for _, l := range ls {
			got = append(got, l.Name)
		}
		if next == "" {
			break
		}
		if next != ls[len(ls)-1].Name {
			t.Fatalf("next %q is not the page's last lock %q", next, ls[len(ls)-1].Name)
		}
		// Between pages: a lock before the cursor goes and one comes
		// back; an odd one is taken (before or after the cursor).
		h.must(StatusOK, relCmd(got[0], "s", "h"))
		h.must(StatusGranted, acqCmd(got[0], "s", "h", sequencer.Exclusive, false))
		h.must(StatusGranted, acqCmd(fmt.Sprintf("p/%03d", pages*13%100|1), "s", "h", sequencer.Exclusive, false))
		after = next
	}
	seen := map[string]bool{}
	for i, n := range got {
		if seen[n] {
			t.Fatalf("%s listed twice", n)
		}
		seen[n] = true
		if i > 0 && got[i-1] >= n {
			t.Fatalf("out of order: %s after %s", n, got[i-1])
		}
	}
	for i := range 50 {
		if n := fmt.Sprintf("p/%03d", i*2); !seen[n] {
			t.Fatalf("%s, held throughout, is missing", n)
		}
	}
	if pages < 8 || seen["q/other"] {
		t.Fatalf("%d pages, q/other listed %v", pages, seen["q/other"])
	}
	if ls, next := h.f.LocksPage("p/", "p/098", 7, unboundedAnswers); len(ls) != 0 || next != "" {
		t.Fatalf("page after the last lock: %d locks, next %q", len(ls), next)
	}
}

// TestAcquirePastLocksPerTokenIsRefusedAndChangesNothing pins issue 27
// item 8: the holds and waits of all of one token's sessions together are
// bounded (LocksPerToken), so a token cannot take every lock slot with
// many sessions; other tokens and sessions without a token are not
// counted against it; a release, a closed session and a restore count
// alike.
func TestAcquirePastLocksPerTokenIsRefusedAndChangesNothing(t *testing.T) {
	h := newHarness(t)
	lim := api.Limits{LocksPerToken: 3}
	for _, id := range []string{"a1", "a2"} {
		h.must(StatusOK, ownedOpen(id, "alice"))
	}
	h.must(StatusOK, ownedOpen("b1", "bob"))
	h.open("anon", 0)
	h.must(StatusGranted, limited(acqCmd("x", "a1", "h", Exclusive, false), lim))
	h.must(StatusGranted, limited(acqCmd("y", "a1", "h", Exclusive, false), lim))
	h.must(StatusGranted, limited(acqCmd("z", "a2", "h", Exclusive, false), lim))
	h.refused(limited(acqCmd("w", "a2", "h", Exclusive, false), lim), "3 locks this token's sessions hold or wait for")
	// A wait counts too.
	h.must(StatusGranted, limited(acqCmd("b", "b1", "h", Exclusive, false), lim))
	h.refused(limited(acqCmd("b", "a2", "h", Exclusive, true), lim), "3 locks this token's sessions hold or wait for")
	// A retry of a hold is not a new one.
	h.must(StatusGranted, limited(acqCmd("x", "a1", "h", Exclusive, false), lim))
	h.must(StatusGranted, limited(acqCmd("w", "b1", "h", Exclusive, false), lim))
	h.must(StatusGranted, limited(acqCmd("v", "anon", "h", Exclusive, false), lim))
	h.must(StatusOK, relCmd("x", "a1", "h"))
	h.must(StatusQueued, limited(acqCmd("b", "a2", "h", Exclusive, true), lim))
	h.refused(limited(acqCmd("x", "a2", "h", Exclusive, false), lim), "3 locks this token's sessions hold or wait for")
	checkSessionIndex(t, h.f)
	g := newHarness(t)
	restoreInto(t, g.f, snapshotBytes(t, h.f))
	checkSessionIndex(t, g.f)
	g.refused(limited(acqCmd("x", "a1", "h", Exclusive, false), lim), "3 locks this token's sessions hold or wait for")
	h.must(StatusOK, closeCmd("a1"))
	checkSessionIndex(t, h.f)
	h.must(StatusGranted, limited(acqCmd("x", "a2", "h", Exclusive, false), lim))
	checkSessionIndex(t, h.f)
}

// TestWaitPastWaitersPerTokenIsRefusedAndChangesNothing pins the other
// cap of issue 27 item 8: the waits of one token's sessions together are
// bounded (WaitersPerToken); a grant from the queue, a cancelled wait and
// an expired session give their place back, and a queued holder's retry
// is never refused.
func TestWaitPastWaitersPerTokenIsRefusedAndChangesNothing(t *testing.T) {
	h := newHarness(t)
	lim := api.Limits{WaitersPerToken: 2}
	for _, id := range []string{"a1", "a2"} {
		h.must(StatusOK, ownedOpen(id, "alice"))
	}
	h.must(StatusOK, ownedOpen("b1", "bob"))
	for _, l := range []string{"p", "q", "r"} {
		h.must(StatusGranted, limited(acqCmd(l, "b1", "h", Exclusive, false), lim))
	}
	h.must(StatusQueued, limited(acqCmd("p", "a1", "h", Exclusive, true), lim))
	h.must(StatusQueued, limited(acqCmd("q", "a2", "h", Exclusive, true), lim))
	h.refused(limited(acqCmd("r", "a1", "h", Exclusive, true), lim), "2 waits of this token's sessions")
	h.must(StatusQueued, limited(acqCmd("p", "a1", "h", Exclusive, true), lim)) // a retry keeps its place
	// Holding is not waiting: a free lock is still granted.
	h.must(StatusGranted, limited(acqCmd("s", "a1", "h", Exclusive, false), lim))
	// Bob's own waits are his.
	h.must(StatusQueued, limited(acqCmd("s", "b1", "h", Exclusive, true), lim))
	// A grant from the queue frees a place.
	h.must(StatusOK, relCmd("p", "b1", "h"))
	h.must(StatusQueued, limited(acqCmd("r", "a1", "h", Exclusive, true), lim))
	h.refused(limited(acqCmd("r", "a2", "h", Exclusive, true), lim), "2 waits of this token's sessions")
	// A cancelled wait and an expired session too.
	h.must(StatusOK, cancelCmd("q", "a2", "h"))
	h.must(StatusQueued, limited(acqCmd("r", "a2", "h", Exclusive, true), lim))
	checkSessionIndex(t, h.f)
	h.must(StatusOK, expireCmd("a1"))
	checkSessionIndex(t, h.f)
	h.must(StatusQueued, limited(acqCmd("q", "a2", "h", Exclusive, true), lim))
	checkSessionIndex(t, h.f)
}

// TestTokenCapsTravelOnlyInTheirFormat pins the command format of the
// per-token caps: version 4 carries them; an entry written as version 3
// or as JSON (for a replica that does not read version 4) carries the
// other limits only, so every replica decides it alike, without them.
func TestTokenCapsTravelOnlyInTheirFormat(t *testing.T) {
	lim := api.Limits{Sessions: 1, Locks: 2, WaitersPerLock: 3, LocksPerSession: 4, SessionsPerToken: 5, LocksPerToken: 6, WaitersPerToken: 7}
	old := lim
	old.LocksPerToken, old.WaitersPerToken = 0, 0
	for _, c := range []Command{limited(acqCmd("x", "s", "h", Exclusive, true), lim), limited(openCmd("s", 0), lim)} {
		for v, want := range map[byte]api.Limits{VersionTokenLimits: lim, VersionBinary: old, VersionJSON: old} {
			data, err := c.EncodeAs(v)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Decode(data)
			if err != nil {
				t.Fatalf("version %d: %v", v, err)
			}
			gl := got.Acquire
			var l *api.Limits
			if gl != nil {
				l = gl.Limits
			} else {
				l = got.OpenSession.Limits
			}
			if l == nil || *l != want {
				t.Errorf("%s as version %d carries %+v, want %+v", c.Type, v, l, want)
			}
		}
		// Encoding for an older replica leaves the command as it was.
		if c.Acquire != nil && *c.Acquire.Limits != lim || c.OpenSession != nil && *c.OpenSession.Limits != lim {
			t.Errorf("EncodeAs changed the command's own limits")
		}
	}
}

// TestLoggedBidiNamesStillApply: lock names with bidirectional control
// characters are refused at the request (api.ValidateLockName), never in
// Apply, so entries a log holds from before that rule still apply alike.
func TestLoggedBidiNamesStillApply(t *testing.T) {
	h := newHarness(t)
	h.open("s", 0)
	h.must(StatusGranted, acqCmd("xss/\u202egnp.exe", "s", "h", Exclusive, false))
	h.must(StatusOK, relCmd("xss/\u202egnp.exe", "s", "h"))
}
