package fsm

import (
	"bytes"
	"container/list"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"testing"
	"time"
)

// withoutHistories returns dump with the grant histories (and the later
// replica digest) taken out: what a build from before histories wrote for
// the same entries.
func withoutHistories(t testing.TB, dump []byte) []byte {
	t.Helper()
	g := New(nil)
	restoreInto(t, g, dump)
	g.mu.Lock()
	for _, l := range g.locks {
		l.Grants, l.GrantsSince = nil, 0
	}
	g.free, g.freeAt, g.freeGrants = list.New(), make(map[string]*list.Element), 0
	g.digest = [32]byte{}
	g.mu.Unlock()
	return forgotField.ReplaceAll(g.Dump(), nil)
}

// forgotField matches the "forgot" field of a snapshot.
var forgotField = regexp.MustCompile(`,"forgot":\d+`)

// checkOldRestored checks that g, restored from old (a snapshot from
// before histories), serialises back to old plus the one thing the old
// format left implicit: every grant up to its applied index is forgotten.
func checkOldRestored(t testing.TB, g *FSM, old []byte) {
	t.Helper()
	if g.forgot != g.AppliedIndex() || g.forgot == 0 {
		t.Fatalf("old snapshot restored with forgot %d, want its applied index %d", g.forgot, g.AppliedIndex())
	}
	want := append(bytes.TrimSuffix(old, []byte("}")), fmt.Sprintf(`,"forgot":%d}`, g.forgot)...)
	if got := g.Dump(); !bytes.Equal(got, want) {
		t.Fatalf("old snapshot does not restore to itself:\n got %s\nwant %s", got, want)
	}
	if l, ok, _ := g.LockRecord("never-granted"); ok || l.GrantsSince != g.forgot+1 {
		t.Fatalf("record of a lock unknown to an old snapshot: %+v (found %v), want none since %d", l, ok, g.forgot+1)
	}
}

// record returns what the state machine keeps of lock name, failing the
// test if it keeps nothing.
func (h *harness) record(name string) Lock {
	h.t.Helper()
	l, ok, _ := h.f.LockRecord(name)
	if !ok {
		h.t.Fatalf("no record of lock %s", name)
	}
	return l
}

// openNamed opens session id under a name that does not contain the id.
func (h *harness) openNamed(id, name string) {
	h.t.Helper()
	h.must(StatusOK, Command{Type: CmdOpenSession, OpenSession: &OpenSession{ID: id, Name: name,
		TTL: int64(10 * time.Second), LockDelay: int64(delay)}})
}

// Every grant, exclusive or shared, is recorded in the lock's history in
// grant order: its token, mode, holder id, value and the session's name,
// never the session's id (a secret capability). The shared grants one entry
// makes share its token and keep the queue's order. The history starts at
// the last entry that forgot grants (none here: 1).
func TestGrantsAreRecordedInTheLocksHistory(t *testing.T) {
	h := newHarness(t)
	ids := map[string]string{"secret-id-1111": "alice", "secret-id-2222": "bob", "secret-id-3333": "carol"}
	for id, name := range ids {
		h.openNamed(id, name)
	}
	c := acqCmd(L, "secret-id-1111", "ha", Exclusive, false)
	c.Acquire.Value = "addr-a"
	first := h.must(StatusGranted, c).Token
	b := acqCmd(L, "secret-id-2222", "hb", Shared, true)
	b.Acquire.Value = "addr-b"
	h.must(StatusQueued, b)
	h.must(StatusQueued, acqCmd(L, "secret-id-3333", "hc", Shared, true))
	run := h.must(StatusOK, relCmd(L, "secret-id-1111", "ha")).Index // grants b and c, shared
	h.must(StatusGranted, acqCmd(L, "secret-id-1111", "ha2", Shared, false))
	third := h.idx

	want := []PastGrant{
		{Token: first, Mode: Exclusive, Holder: "ha", Value: "addr-a", SessionName: "alice"},
		{Token: run, Mode: Shared, Holder: "hb", Value: "addr-b", SessionName: "bob"},
		{Token: run, Mode: Shared, Holder: "hc", SessionName: "carol"},
		{Token: third, Mode: Shared, Holder: "ha2", SessionName: "alice"},
	}
	l := h.lock(L)
	if !reflect.DeepEqual(l.Grants, want) || l.GrantsSince != 1 {
		t.Fatalf("history %+v since %d, want %+v since 1", l.Grants, l.GrantsSince, want)
	}
	data, err := json.Marshal(l.Grants)
	if err != nil {
		t.Fatal(err)
	}
	for id := range ids {
		if bytes.Contains(data, []byte(id)) {
			t.Fatalf("history %s reveals session id %s", data, id)
		}
	}
	// Readers get copies: changing one changes nothing in the state.
	l.Grants[0].Holder = "changed"
	if h.lock(L).Grants[0].Holder != "ha" {
		t.Fatal("Lock returned the history itself, not a copy")
	}
}

// A lock keeps its last MaxGrantHistory grants; an older grant is dropped
// and GrantsSince moves to the token after it, so that every grant whose
// token is at least GrantsSince is in the history.
func TestGrantHistoryKeepsTheLastMaxGrantHistoryGrants(t *testing.T) {
	h := newHarness(t)
	h.open("a", delay)
	var tokens []uint64
	for i := 0; i < MaxGrantHistory+8; i++ {
		holder := fmt.Sprintf("h%d", i)
		tokens = append(tokens, h.must(StatusGranted, acqCmd(L, "a", holder, Exclusive, false)).Token)
		h.must(StatusOK, relCmd(L, "a", holder))
		l := h.record(L)
		if len(l.Grants) > MaxGrantHistory {
			t.Fatalf("after %d grants the history holds %d", i+1, len(l.Grants))
		}
		if len(l.Grants) == 0 || l.Grants[0].Token < l.GrantsSince {
			t.Fatalf("after %d grants: history %+v since %d", i+1, l.Grants, l.GrantsSince)
		}
	}
	l := h.record(L)
	kept := tokens[len(tokens)-MaxGrantHistory:]
	var got []uint64
	for _, g := range l.Grants {
		got = append(got, g.Token)
	}
	if !reflect.DeepEqual(got, kept) {
		t.Fatalf("history tokens %v, want the last %d: %v", got, MaxGrantHistory, kept)
	}
	if dropped := tokens[len(tokens)-MaxGrantHistory-1]; l.GrantsSince != dropped+1 {
		t.Fatalf("GrantsSince %d, want %d (one above the last dropped grant)", l.GrantsSince, dropped+1)
	}
}

// A lock that becomes free is no longer stored as a lock (Lock, Locks and
// LockAt do not find it, as before histories), but its history is kept:
// LockRecord finds it, with no holders, waiters or delay and the index of
// the entry that freed it. Taking the lock again carries the history on.
func TestFreeLockKeepsItsHistoryAndCarriesItOn(t *testing.T) {
	h := newHarness(t)
	h.open("a", delay)
	h.open("b", delay)
	c := acqCmd(L, "a", "h", Exclusive, false)
	c.Acquire.Value = "v1"
	t1 := h.must(StatusGranted, c).Token
	freed := h.must(StatusOK, relCmd(L, "a", "h")).Index
	if _, ok := h.f.Lock(L); ok {
		t.Fatal("free lock stored as a lock")
	}
	if _, ok, _ := h.f.LockAt(L); ok || len(h.f.Locks("")) != 0 {
		t.Fatal("free lock found by LockAt or Locks")
	}
	r := h.record(L)
	want := []PastGrant{{Token: t1, Mode: Exclusive, Holder: "h", Value: "v1", SessionName: "n-a"}}
	if len(r.Holders) != 0 || len(r.Waiters) != 0 || r.Delayed || r.Index != freed ||
		!reflect.DeepEqual(r.Grants, want) || r.GrantsSince != 1 {
		t.Fatalf("free record %+v, want history %+v since 1 at index %d", r, want, freed)
	}
	if l, ok, _ := h.f.LockRecord("never"); ok || len(l.Grants) != 0 || l.GrantsSince != 1 {
		t.Fatalf("record of a lock never granted: %+v (found %v), want an empty history since 1", l, ok)
	}

	t2 := h.must(StatusGranted, acqCmd(L, "b", "h", Exclusive, false)).Token
	l := h.lock(L)
	want = append(want, PastGrant{Token: t2, Mode: Exclusive, Holder: "h", SessionName: "n-b"})
	if !reflect.DeepEqual(l.Grants, want) || l.GrantsSince != 1 || l.Index != t2 {
		t.Fatalf("lock taken again: %+v, want history %+v since 1", l, want)
	}
	if len(h.f.freeAt) != 0 || h.f.free.Len() != 0 || h.f.freeGrants != 0 {
		t.Fatalf("a stored lock still has a free history (%d, %d grants)", h.f.free.Len(), h.f.freeGrants)
	}

	// An expiry with lock-delay keeps the lock stored (delayed); the end of
	// the delay frees it, and its history is kept from that entry.
	h.must(StatusOK, expireCmd("b"))
	until := h.lock(L).DelayUntil
	ended := h.must(StatusOK, endDelayCmd(L, until)).Index
	if r := h.record(L); r.Index != ended || !reflect.DeepEqual(r.Grants, want) {
		t.Fatalf("after the delay: %+v, want history %+v at index %d", r, want, ended)
	}
}

// The histories of free locks hold at most MaxFreeGrants grants together:
// the history of the lock freed longest ago goes first, whole. The entry
// that drops it forgets grants: a lock with no record, and a lock stored
// anew, has a history complete only from the next entry on. The order is
// part of the state: a replica restored from a snapshot drops the same
// histories as the one that wrote it.
func TestFreeHistoriesAreBoundedOldestFreedFirst(t *testing.T) {
	h := newHarness(t)
	h.open("a", delay)
	// "old" is freed first with a history of 3 grants, then single-grant
	// histories fill the rest of the bound.
	for i := 0; i < 3; i++ {
		h.must(StatusGranted, acqCmd("old", "a", "h", Exclusive, false))
		h.must(StatusOK, relCmd("old", "a", "h"))
	}
	name := func(i int) string { return fmt.Sprintf("l/%05d", i) }
	cycle := func(h *harness, i int) {
		h.must(StatusGranted, acqCmd(name(i), "a", "h", Exclusive, false))
		h.must(StatusOK, relCmd(name(i), "a", "h"))
	}
	n := MaxFreeGrants - 3
	for i := 0; i < n; i++ {
		cycle(h, i)
	}
	if h.f.freeGrants != MaxFreeGrants || len(h.f.freeAt) != n+1 {
		t.Fatalf("%d free grants in %d histories, want %d in %d", h.f.freeGrants, len(h.f.freeAt), MaxFreeGrants, n+1)
	}
	h.record("old")

	g := New(nil)
	restoreInto(t, g, snapshotBytes(t, h.f))
	h2 := &harness{t: t, f: g, idx: h.idx, now: h.now}
	for _, hh := range []*harness{h, h2} {
		cycle(hh, n) // one more: "old" goes, whole
		dropped := hh.idx
		if l, ok, _ := hh.f.LockRecord("old"); ok || l.GrantsSince != dropped+1 {
			t.Fatalf("the history freed longest ago: %+v (kept %v), want none, since %d", l, ok, dropped+1)
		}
		hh.must(StatusGranted, acqCmd("new", "a", "h", Exclusive, false))
		if l := hh.lock("new"); l.GrantsSince != dropped+1 || len(l.Grants) != 1 {
			t.Fatalf("lock stored after a drop: history %+v since %d, want one grant since %d", l.Grants, l.GrantsSince, dropped+1)
		}
		hh.must(StatusOK, relCmd("new", "a", "h"))
		if hh.f.freeGrants != MaxFreeGrants-1 {
			t.Fatalf("%d free grants after dropping a history of 3 and adding 2, want %d", hh.f.freeGrants, MaxFreeGrants-1)
		}
		for i := n + 1; i < n+4; i++ {
			cycle(hh, i) // fills the bound, then pushes out l/00000 and l/00001
		}
		for i := 0; i < 2; i++ {
			if _, ok, _ := hh.f.LockRecord(name(i)); ok {
				t.Fatalf("%s still kept", name(i))
			}
		}
		if hh.record(name(2)).Grants[0].Holder != "h" || hh.f.freeGrants != MaxFreeGrants || hh.f.forgot != hh.idx {
			t.Fatalf("%d free grants, forgot %d after entry %d: want %d with %s kept, forgot %[3]d",
				hh.f.freeGrants, hh.f.forgot, hh.idx, MaxFreeGrants, name(2))
		}
	}
	if !bytes.Equal(g.Dump(), h.f.Dump()) {
		t.Fatal("a restored replica keeps different free histories than its source")
	}
	checkSessionIndex(t, g)
}

// Histories, free ones included, are part of the snapshot and come back
// from it as they were, free ones in the order they go.
func TestGrantHistoriesRestoreFromSnapshots(t *testing.T) {
	h := richState(t)
	g := New(nil)
	restoreInto(t, g, snapshotBytes(t, h.f))
	for _, name := range []string{"x", "s", "d/1", "gone"} {
		want, _, _ := h.f.LockRecord(name)
		got, ok, _ := g.LockRecord(name)
		if !ok || len(got.Grants) == 0 || !reflect.DeepEqual(got, want) {
			t.Fatalf("restored record of %s: %+v (found %v), want %+v", name, got, ok, want)
		}
	}
	if _, ok := g.Lock("gone"); ok {
		t.Fatal("a free lock's history restored as a stored lock")
	}
	if g.freeGrants != h.f.freeGrants || g.free.Len() != 1 {
		t.Fatalf("restored %d free grants in %d histories, want %d in 1", g.freeGrants, g.free.Len(), h.f.freeGrants)
	}
}

// A snapshot written before grant histories were kept (the previous golden
// snapshot, kept verbatim) still restores, to itself: its locks have no
// history and GrantsSince 0 (unknown), a free lock has none to keep, every
// grant up to its applied index counts as forgotten, and it is today's
// snapshot of the same entries without the histories. An old lock's
// history is complete from the entry after the snapshot's.
func TestSnapshotWithoutGrantHistoryRestores(t *testing.T) {
	old, err := os.ReadFile(filepath.Join(goldenDir, "snapshot-v1-without-grants.json"))
	if err != nil {
		t.Fatal(err)
	}
	old = bytes.TrimSuffix(old, []byte("\n"))
	if bytes.Contains(old, []byte("grants")) || bytes.Contains(old, []byte(`"free"`)) {
		t.Fatal("the old-format fixture records grant histories")
	}
	g := New(nil)
	restoreInto(t, g, old)
	checkOldRestored(t, g, old)
	checkSessionIndex(t, g)
	for _, l := range g.Locks("") {
		if len(l.Grants) != 0 || l.GrantsSince != 0 {
			t.Fatalf("old lock %s restored with a history: %+v since %d", l.Name, l.Grants, l.GrantsSince)
		}
	}
	if _, ok, _ := g.LockRecord("gone"); ok {
		t.Fatal("old free lock restored with a record")
	}
	if now := withoutHistories(t, richState(t).f.Dump()); !bytes.Equal(now, old) {
		t.Fatalf("today's snapshot without histories differs from the old one:\n%s\n%s", now, old)
	}

	// x is held by a, with b (shared) then c queued: a's release grants b,
	// and x's history starts there.
	h := &harness{t: t, f: g, idx: g.AppliedIndex(), now: t0 + int64(2*time.Second)}
	next := h.must(StatusOK, relCmd("x", "a", "h")).Index
	l := h.lock("x")
	want := []PastGrant{{Token: next, Mode: Shared, Holder: "h", SessionName: "n-b"}}
	if since := g.forgot + 1; !reflect.DeepEqual(l.Grants, want) || l.GrantsSince != since {
		t.Fatalf("old lock after a grant: history %+v since %d, want %+v since %d", l.Grants, l.GrantsSince, want, since)
	}
}
