package fsm

import (
	"testing"

	"github.com/raftlock/raftlock/sequencer"
)

// TestPrepareRestoreRaisesTheFloorAndKeepsSessionsAndLocks pins what a
// restore installs: the backup's sessions, locks and holders unchanged,
// the current cluster's members, an applied index and histories that
// claim nothing at or below the floor (grants the backup never saw may
// have been made there), and a state that restores.
func TestPrepareRestoreRaisesTheFloorAndKeepsSessionsAndLocks(t *testing.T) {
	h := newHarness(t)
	h.open("s1", 0)
	h.must(StatusGranted, acqCmd("held", "s1", "h", sequencer.Exclusive, false))
	h.must(StatusGranted, acqCmd("freed", "s1", "h", sequencer.Exclusive, false))
	h.must(StatusOK, relCmd("freed", "s1", "h"))
	h.must(StatusOK, memberCmd("old", "10.0.0.1:7101", "10.0.0.1:7001"))
	backup := h.f.Dump()
	const floor = 1000
	out, err := PrepareRestore(backup, floor, []Member{{ID: "n1", RaftAddr: "127.0.0.1:7101", HTTPAddr: "127.0.0.1:7001"}})
	if err != nil {
		t.Fatal(err)
	}
	f := New(nil)
	if err := f.Load(out); err != nil {
		t.Fatal(err)
	}
	if f.AppliedIndex() != floor {
		t.Fatalf("applied %d, want the floor %d", f.AppliedIndex(), floor)
	}
	if ss := f.Sessions(); len(ss) != 1 || ss[0].ID != "s1" {
		t.Fatalf("sessions %+v, want the backup's s1", ss)
	}
	l, ok := f.Lock("held")
	if !ok || len(l.Holders) != 1 || l.Holders[0].Token != 2 || l.GrantsSince != floor+1 {
		t.Fatalf("held: %+v; want its holder with token 2 and grants complete from %d", l, floor+1)
	}
	free, _, _ := f.LockRecord("freed")
	if free.GrantsSince != floor+1 {
		t.Fatalf("free history of freed reaches back to %d, want %d", free.GrantsSince, floor+1)
	}
	unknown, _, _ := f.LockRecord("never")
	if unknown.GrantsSince != floor+1 {
		t.Fatalf("a lock the state knows nothing of reaches back to %d, want %d", unknown.GrantsSince, floor+1)
	}
	if ms := f.Members(); len(ms) != 1 || ms[0].ID != "n1" {
		t.Fatalf("members %+v, want the current cluster's", ms)
	}
	if _, err := PrepareRestore([]byte("{not a state"), floor, nil); err == nil {
		t.Fatal("PrepareRestore accepted a state that does not decode")
	}
}
