package fsm

import (
	"testing"

	"github.com/hashicorp/raft"
)

// lastDigest is f's newest digest.
func lastDigest(t *testing.T, f *FSM) DigestAt {
	t.Helper()
	ds, _ := f.Digests()
	if len(ds) == 0 {
		t.Fatal("no digest")
	}
	return ds[len(ds)-1]
}

// Replicas that apply the same entries have the same digest at every
// index; one that applied anything else differs from then on; a replica
// that installs a snapshot continues the same chain.
func TestDigestsAgreeExactlyWhenTheAppliedEntriesDo(t *testing.T) {
	a, b := newHarness(t), newHarness(t)
	for _, h := range []*harness{a, b} {
		h.open("s", delay)
		h.must(StatusGranted, acqCmd(L, "s", "h", Exclusive, false))
	}
	if da, db := lastDigest(t, a.f), lastDigest(t, b.f); da != db {
		t.Fatalf("same entries, digests %x and %x", da.Digest, db.Digest)
	}
	// c restores a's snapshot, then all three apply the same entry.
	c := newHarness(t)
	restoreInto(t, c.f, snapshotBytes(t, a.f))
	c.idx = a.idx
	for _, h := range []*harness{a, b, c} {
		h.must(StatusOK, relCmd(L, "s", "h"))
	}
	da, db, dc := lastDigest(t, a.f), lastDigest(t, b.f), lastDigest(t, c.f)
	if da != db || da != dc {
		t.Fatalf("after a snapshot install, digests %x %x %x", da.Digest, db.Digest, dc.Digest)
	}
	// b applies another command at the next index: its digest differs.
	a.must(StatusGranted, acqCmd(L, "s", "h", Exclusive, false))
	b.must(StatusGranted, acqCmd(L, "s", "other", Exclusive, false))
	if da, db := lastDigest(t, a.f), lastDigest(t, b.f); da.Index != db.Index || da.Digest == db.Digest {
		t.Fatalf("different entries at %d, same digest", da.Index)
	}
	// A non-command entry changes nothing.
	before := lastDigest(t, a.f)
	a.f.Apply(&raft.Log{Index: a.idx + 1, Type: raft.LogNoop})
	if after := lastDigest(t, a.f); after != before {
		t.Fatal("a no-op entry moved the digest")
	}
	if _, origin := a.f.Digests(); origin != 0 {
		t.Fatalf("origin %d, want 0 (the chain started with the log)", origin)
	}
}
