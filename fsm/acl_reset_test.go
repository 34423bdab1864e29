package fsm

import (
	"reflect"
	"testing"
)

func resetCmd(index uint64, id, hash string) Command {
	return Command{Type: CmdACLBootstrapReset, ACLBootstrapReset: &ACLBootstrapReset{ResetIndex: index,
		Token: Token{ID: id, Name: "management", Hash: hash, Rules: []string{"admin"}}}}
}

// TestACLBootstrapResetNeedsTheCurrentResetIndex pins issue 27 item 5 in
// the state machine: a bootstrap after the first applies only with the
// current reset index (the log index of the last bootstrap), which then
// moves, so that the same reset never applies twice; the earlier tokens
// stay; a snapshot keeps the reset index.
func TestACLBootstrapResetNeedsTheCurrentResetIndex(t *testing.T) {
	h := newHarness(t)
	r := h.must(StatusOK, bootstrapCmd("t0", "h0"))
	if got := h.f.ACLBootstrapResetIndex(); got != r.Index {
		t.Fatalf("reset index %d, want the bootstrap's index %d", got, r.Index)
	}
	h.must(StatusAlreadyBootstrapped, resetCmd(r.Index+1, "t1", "h1"))
	h.must(StatusAlreadyBootstrapped, resetCmd(0, "t1", "h1"))
	r2 := h.must(StatusOK, resetCmd(r.Index, "t1", "h1"))
	for _, hash := range []string{"h0", "h1"} {
		if _, ok := h.f.TokenByHash(hash); !ok {
			t.Errorf("token %s missing after the reset", hash)
		}
	}
	if got := h.f.ACLBootstrapResetIndex(); got != r2.Index {
		t.Fatalf("reset index %d after a reset, want %d", got, r2.Index)
	}
	h.must(StatusAlreadyBootstrapped, resetCmd(r.Index, "t2", "h2")) // the same reset, again
	h.must(StatusAlreadyBootstrapped, bootstrapCmd("t2", "h2"))
	g := newHarness(t)
	restoreInto(t, g.f, snapshotBytes(t, h.f))
	if got := g.f.ACLBootstrapResetIndex(); got != r2.Index || !g.f.ACLBootstrapped() {
		t.Fatalf("restored reset index %d, want %d", got, r2.Index)
	}
}

// The reset command travels in version 4 only: a replica that reads no
// more would halt on it, so older formats refuse to carry it.
func TestACLBootstrapResetTravelsInVersion4Only(t *testing.T) {
	c := resetCmd(7, "t1", "h1")
	data, err := c.EncodeAs(VersionTokenLimits)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(data)
	if err != nil || !reflect.DeepEqual(got, c) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for _, v := range []byte{VersionBinary, VersionJSON} {
		if _, err := c.EncodeAs(v); err == nil {
			t.Errorf("EncodeAs(%d) carried a reset", v)
		}
	}
}
