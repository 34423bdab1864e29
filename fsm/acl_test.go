package fsm

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/raftlock/raftlock/sequencer"
)

func tokenCmd(id, hash string, rules ...string) Command {
	return Command{Type: CmdCreateToken, CreateToken: &Token{ID: id, Name: "n-" + id, Hash: hash, Rules: rules}}
}

func bootstrapCmd(id, hash string) Command {
	return Command{Type: CmdACLBootstrap, ACLBootstrap: &Token{ID: id, Name: "management", Hash: hash, Rules: []string{"admin"}}}
}

func deleteTokenCmd(id string) Command {
	return Command{Type: CmdDeleteToken, DeleteToken: &TokenRef{ID: id}}
}

func ownedOpen(id, owner string) Command {
	c := openCmd(id, 5e9)
	c.OpenSession.Owner = owner
	return c
}

func TestACLBootstrapHappensOnce(t *testing.T) {
	h := newHarness(t)
	h.must(StatusOK, bootstrapCmd("t0", "h0"))
	if !h.f.ACLBootstrapped() {
		t.Fatal("not bootstrapped after the bootstrap")
	}
	before := stateOf(t, h.f)
	h.must(StatusAlreadyBootstrapped, bootstrapCmd("t9", "h9"))
	if _, ok := h.f.TokenByHash("h9"); ok {
		t.Error("a second bootstrap created a token")
	}
	if after := stateOf(t, h.f); !bytes.Equal(mustJSON(t, before), mustJSON(t, after)) {
		t.Error("a refused bootstrap changed the state")
	}
	// Deleting the management token does not allow a second bootstrap.
	h.must(StatusOK, deleteTokenCmd("t0"))
	h.must(StatusAlreadyBootstrapped, bootstrapCmd("t9", "h9"))
}

func TestTokensAreFoundByHashAndRefuseDuplicates(t *testing.T) {
	h := newHarness(t)
	h.must(StatusOK, tokenCmd("t1", "h1", "write:jobs/", "read:"))
	got, ok := h.f.TokenByHash("h1")
	if !ok || got.ID != "t1" || !slices.Equal(got.Rules, []string{"write:jobs/", "read:"}) || got.Created != h.now {
		t.Fatalf("TokenByHash(h1) = %+v, %v", got, ok)
	}
	h.must(StatusTokenExists, tokenCmd("t1", "h2", "read:"))
	h.must(StatusTokenExists, tokenCmd("t2", "h1", "read:"))
	h.must(StatusInvalid, tokenCmd("t3", "", "read:"))
	h.must(StatusInvalid, tokenCmd("t3", "h3"))
	h.must(StatusTokenNotFound, deleteTokenCmd("nope"))
	if ts := h.f.Tokens(); len(ts) != 1 {
		t.Errorf("Tokens() = %+v, want t1 only", ts)
	}
}

// Deleting a token ends its sessions as revoked: the client of each may
// still hold a lease of up to its ttl and believe it holds its locks until
// its lock-delay has passed too, so each lock it held stays unavailable for
// ttl + lock-delay (waiters are granted when that delay ends); the locks
// it only waited for are not delayed.
func TestDeleteTokenHoldsItsLocksForTTLPlusLockDelay(t *testing.T) {
	h := newHarness(t)
	h.must(StatusOK, tokenCmd("t1", "h1", "write:"))
	h.must(StatusOK, tokenCmd("t2", "h2", "write:"))
	h.must(StatusOK, ownedOpen("s1", "t1"))
	h.must(StatusOK, ownedOpen("s1b", "t1"))
	h.must(StatusOK, ownedOpen("s2", "t2"))
	h.must(StatusGranted, acqCmd("a", "s1", "h", sequencer.Exclusive, false))
	h.must(StatusGranted, acqCmd("b", "s1b", "h", sequencer.Exclusive, false))
	h.must(StatusQueued, acqCmd("a", "s2", "h", sequencer.Exclusive, true))
	h.must(StatusOK, deleteTokenCmd("t1"))
	if _, ok := h.f.TokenByHash("h1"); ok {
		t.Error("deleted token still found")
	}
	for _, id := range []string{"s1", "s1b"} {
		if _, ok := h.f.Session(id); ok {
			t.Errorf("session %s of the deleted token is still open", id)
		}
	}
	if _, ok := h.f.Session("s2"); !ok {
		t.Error("another token's session was closed")
	}
	const revoked = int64(10e9 + 5e9) // ownedOpen: ttl 10 s, lock-delay 5 s
	for _, name := range []string{"a", "b"} {
		l := h.lock(name)
		if len(l.Holders) != 0 || !l.Delayed || l.DelayFor != revoked || l.DelayUntil != h.now+revoked {
			t.Errorf("lock %s = %+v, want free and delayed for ttl+lock-delay (%d ns)", name, l, revoked)
		}
	}
	if l := h.lock("a"); len(l.Waiters) != 1 || l.Waiters[0].Session != "s2" {
		t.Errorf("lock a = %+v, want s2 still waiting", l)
	}
	h.must(StatusOK, endDelayCmd("a", h.lock("a").DelayUntil))
	if l := h.lock("a"); len(l.Holders) != 1 || l.Holders[0].Session != "s2" {
		t.Errorf("lock a = %+v, want granted to s2 once the delay ended", l)
	}
	checkSessionIndex(t, h.f)
}

func TestACLStateSurvivesSnapshotRestore(t *testing.T) {
	h := newHarness(t)
	h.must(StatusOK, bootstrapCmd("t0", "h0"))
	h.must(StatusOK, tokenCmd("t1", "h1", "read:x/"))
	h.must(StatusOK, ownedOpen("s1", "t1"))
	data := snapshotBytes(t, h.f)
	if data[0] != snapshotVersionACL {
		t.Errorf("a snapshot with tokens has version %d, want %d (older builds must refuse it)", data[0], snapshotVersionACL)
	}
	g := New(nil)
	restoreInto(t, g, data)
	if !bytes.Equal(g.Dump(), h.f.Dump()) {
		t.Fatalf("restored state differs:\n got %s\nwant %s", g.Dump(), h.f.Dump())
	}
	if tok, ok := g.TokenByHash("h1"); !ok || tok.ID != "t1" {
		t.Errorf("restored TokenByHash(h1) = %+v, %v", tok, ok)
	}
	if !g.ACLBootstrapped() {
		t.Error("restored state forgot the bootstrap")
	}
	if s, _ := g.Session("s1"); s.Owner != "t1" {
		t.Errorf("restored session owner %q, want t1", s.Owner)
	}
	// The restored replica applies the next entries as the original does.
	for _, f := range []*FSM{h.f, g} {
		f.ApplyCommand(100, bootstrapCmd("t9", "h9"))
		f.ApplyCommand(101, deleteTokenCmd("t1"))
	}
	if !bytes.Equal(g.Dump(), h.f.Dump()) {
		t.Error("restored replica diverged on later entries")
	}
	// A snapshot written before ACLs has no tokens and no bootstrap.
	old := New(nil)
	if err := old.Load(append([]byte{snapshotVersion}, `{"sessions":[],"locks":[],"members":[],"now":1,"applied":2}`...)); err != nil {
		t.Fatal(err)
	}
	if old.ACLBootstrapped() || len(old.Tokens()) != 0 {
		t.Error("a pre-ACL snapshot restored tokens or a bootstrap")
	}
	if v := old.Dump()[0]; v != snapshotVersion {
		t.Errorf("a state without ACLs dumps as version %d, want %d (readable by older builds)", v, snapshotVersion)
	}
}

// Two replicas fed the same ACL entries end in byte-identical states.
func TestACLCommandsAreDeterministic(t *testing.T) {
	run := func() []byte {
		h := newHarness(t)
		h.must(StatusOK, bootstrapCmd("t0", "h0"))
		for _, id := range []string{"t3", "t1", "t2"} {
			h.must(StatusOK, tokenCmd(id, "h"+id, "write:"+id+"/"))
			h.must(StatusOK, ownedOpen("s-"+id, id))
			h.must(StatusGranted, acqCmd(id+"/l", "s-"+id, "h", sequencer.Exclusive, false))
		}
		h.must(StatusOK, deleteTokenCmd("t1"))
		return h.f.Dump()
	}
	if a, b := run(), run(); !bytes.Equal(a, b) {
		t.Fatalf("same entries, different states:\n%s\n%s", a, b)
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
