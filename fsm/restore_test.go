package fsm

import (
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/sequencer"
)

// TestPrepareRestoreRaisesTheFloorAndKeepsSessionsAndLocks pins what a
// restore installs when nothing changed since the backup: the backup's
// sessions, locks and holders unchanged, the current cluster's members, an
// applied index, lock indexes and histories that claim nothing at or below
// the floor (grants the backup never saw may have been made there), and a
// state that restores.
func TestPrepareRestoreRaisesTheFloorAndKeepsSessionsAndLocks(t *testing.T) {
	h := newHarness(t)
	h.open("s1", 0)
	h.must(StatusGranted, acqCmd("held", "s1", "h", sequencer.Exclusive, false))
	h.must(StatusGranted, acqCmd("freed", "s1", "h", sequencer.Exclusive, false))
	h.must(StatusOK, relCmd("freed", "s1", "h"))
	h.must(StatusOK, memberCmd("old", "10.0.0.1:7101", "10.0.0.1:7001"))
	backup := h.f.Dump()
	h.must(StatusOK, Command{Type: CmdSetMember, SetMember: &Member{ID: "n1", RaftAddr: "127.0.0.1:7101", HTTPAddr: "127.0.0.1:7001"}})
	delete(h.f.members, "old")
	const floor = 1000
	out, rep, err := PrepareRestore(backup, floor, h.f)
	if err != nil {
		t.Fatal(err)
	}
	if sum, _ := Inspect(out); rep.State != sum {
		t.Fatalf("report's state %+v, want the prepared state's %+v", rep.State, sum)
	}
	if rep.State = (Summary{}); rep != (RestoreReport{SessionsKept: 1}) {
		t.Fatalf("report %+v, want one session kept and nothing else", rep)
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
	if !ok || len(l.Holders) != 1 || l.Holders[0].Token != 2 || l.GrantsSince != floor+1 || l.Index != floor {
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
	if _, _, err := PrepareRestore([]byte("{not a state"), floor, h.f); err == nil {
		t.Fatal("PrepareRestore accepted a state that does not decode")
	}
}

// TestRestoreNeverOutrunsTheHolder pins the reconciliation of a restore
// into a running cluster (DESIGN.md, "Server actions never outrun the
// holder"): a session survives only with the same grants in both states;
// a grant of the running cluster that the restore takes away leaves its
// lock unavailable for its holder's ttl + lock-delay; a backup's grant
// whose holder released it since comes back free (a ghost), a backup's
// waiter that gave up its place does not come back, and a running
// lock-delay goes on; the running cluster's ACL tokens stay.
func TestRestoreNeverOutrunsTheHolder(t *testing.T) {
	h := newHarness(t)
	h.must(StatusOK, tokenCmd("t1", "h1", "write:"))
	h.open("same", 0)     // holds "kept" in both states
	h.open("later", 0)    // takes "taken" after the backup
	h.open("released", 0) // holds "ghost" in the backup, released it since
	h.open("expiring", 2*time.Second)
	h.open("waiter", 0)
	h.must(StatusGranted, acqCmd("kept", "same", "h", sequencer.Exclusive, false))
	h.must(StatusGranted, acqCmd("ghost", "released", "h", sequencer.Exclusive, false))
	h.must(StatusGranted, acqCmd("delayed", "expiring", "h", sequencer.Exclusive, false))
	h.must(StatusQueued, acqCmd("kept", "waiter", "gave-up", sequencer.Exclusive, true))
	backup := h.f.Dump()

	h.must(StatusGranted, acqCmd("taken", "later", "h", sequencer.Exclusive, false))
	h.must(StatusOK, relCmd("ghost", "released", "h"))
	h.must(StatusOK, relCmd("kept", "waiter", "gave-up")) // gives up its place
	h.must(StatusOK, expireCmd("expiring"))
	h.open("new", 0) // not in the backup
	h.must(StatusGranted, acqCmd("fresh", "new", "h", sequencer.Exclusive, false))
	h.must(StatusOK, deleteTokenCmd("t1"))
	h.must(StatusOK, tokenCmd("t2", "h2", "read:"))

	const floor = 5000
	out, rep, err := PrepareRestore(backup, floor, h.f)
	if err != nil {
		t.Fatal(err)
	}
	f := New(nil)
	if err := f.Load(out); err != nil {
		t.Fatal(err)
	}
	want := RestoreReport{SessionsKept: 2, SessionsEnded: 4, GrantsRevoked: 2, GrantsDropped: 2}
	if sum, _ := Inspect(out); rep.State != sum {
		t.Errorf("report's state %+v, want the prepared state's %+v", rep.State, sum)
	}
	if rep.State = (Summary{}); rep != want {
		t.Errorf("report %+v, want %+v", rep, want)
	}
	var ids []string
	for _, s := range f.Sessions() {
		ids = append(ids, s.ID)
	}
	if strings.Join(ids, ",") != "same,waiter" {
		t.Errorf("sessions %v, want same and waiter (the same grants in both states)", ids)
	}
	now := f.now
	if l, _ := f.Lock("kept"); len(l.Holders) != 1 || l.Holders[0].Session != "same" || len(l.Waiters) != 0 || l.Delayed {
		t.Errorf("kept = %+v, want held by same, the abandoned place not restored", l)
	}
	for _, name := range []string{"taken", "fresh"} {
		ttl := int64(10 * time.Second) // openCmd's ttl, no lock-delay
		if l, _ := f.Lock(name); len(l.Holders) != 0 || !l.Delayed || l.DelayFor != ttl || l.DelayUntil != now+ttl {
			t.Errorf("%s = %+v, want free but unavailable for its holder's ttl + lock-delay", name, l)
		}
	}
	if l, ok := f.Lock("ghost"); ok {
		t.Errorf("ghost = %+v, want free: its holder released it after the backup", l)
	}
	if l, _ := f.Lock("delayed"); !l.Delayed || l.DelayFor != int64(2*time.Second) || len(l.Holders) != 0 {
		t.Errorf("delayed = %+v, want its running lock-delay kept, no holder", l)
	}
	if ts := f.Tokens(); len(ts) != 1 || ts[0].ID != "t2" {
		t.Errorf("tokens %+v, want the running cluster's (t1 deleted, t2 created since)", ts)
	}
	checkSessionIndex(t, f)
}

// TestNewClusterRestoreHoldsEveryLock pins a restore into a brand-new
// cluster (and a lost-quorum recovery): no session, grant or waiter comes
// back (no client of the old cluster can be vouched for), and no lock, held
// in the backup or never seen, is granted until the hold ends; then the
// waiters are granted, with tokens above the floor.
func TestNewClusterRestoreHoldsEveryLock(t *testing.T) {
	h := newHarness(t)
	h.must(StatusOK, tokenCmd("t1", "h1", "write:"))
	h.open("old", 0)
	h.must(StatusGranted, acqCmd("held", "old", "h", sequencer.Exclusive, false))
	const floor, hold = 9000, int64(6 * time.Minute)
	out, rep, err := PrepareNewCluster(h.f.Dump(), floor, []Member{{ID: "n1", RaftAddr: "127.0.0.1:1"}}, hold)
	if err != nil {
		t.Fatal(err)
	}
	if rep.SessionsEnded != 1 || rep.GrantsDropped != 1 || rep.HoldFor != hold {
		t.Errorf("report %+v", rep)
	}
	n := newHarness(t)
	if err := n.f.Load(out); err != nil {
		t.Fatal(err)
	}
	n.idx, n.now = floor, h.now
	if len(n.f.Sessions()) != 0 || len(n.f.Tokens()) != 1 {
		t.Fatalf("sessions %+v tokens %+v: want none, and the backup's token", n.f.Sessions(), n.f.Tokens())
	}
	hd, ok := n.f.Hold()
	if !ok || hd.For != hold || hd.Until != h.now+hold {
		t.Fatalf("hold %+v, %v", hd, ok)
	}
	n.open("new", 0)
	for _, name := range []string{"held", "never"} {
		r := n.must(StatusLockBusy, acqCmd(name, "new", "try", sequencer.Exclusive, false))
		if r.Busy == nil || r.Busy.DelayUntil != hd.Until {
			t.Errorf("%s: busy %+v, want the hold's end", name, r.Busy)
		}
		n.must(StatusQueued, acqCmd(name, "new", "wait", sequencer.Exclusive, true))
	}
	n.must(StatusOK, Command{Type: CmdEndHold, EndHold: &EndHold{Until: hd.Until + 1}}) // another hold: no effect
	if _, ok := n.f.Hold(); !ok {
		t.Fatal("an EndHold naming another hold ended it")
	}
	n.must(StatusOK, Command{Type: CmdEndHold, EndHold: &EndHold{Until: hd.Until}})
	for _, name := range []string{"held", "never"} {
		if l := n.lock(name); len(l.Holders) != 1 || l.Holders[0].Holder != "wait" || l.Holders[0].Token <= floor {
			t.Errorf("%s = %+v, want granted to the waiter above the floor", name, l)
		}
	}
	// The hold survives snapshots, and a build without holds refuses them.
	if d := snapshotBytes(t, h.f); d[0] == snapshotVersionHold {
		t.Error("a state without a hold was written as a hold snapshot")
	}
	if out[0] != snapshotVersionHold {
		t.Errorf("a state with a hold was written as version %d", out[0])
	}
}
