package main

import (
	"math/rand"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/raftlock/raftlock/api"
)

func TestHistoryRoundTrip(t *testing.T) {
	h := hist(opOpen(0, sA, 1, 2), opAcq(0, sA, hA, lk, 10, pending, resUnknown, 0),
		opRead(1, lk, 30, 40, hold(sA, hA, 5)),
		naiveOp(waitFor(opAcq(1, sB, hB, lk, 35, 45, resNoLeader, 0), 20000)),
		readQ(2, lk, 50, 60, 7, []string{hB, hC}, hold(sA, hA, 5)))
	h.Start, h.End = 1, 99
	h.Writes = []WriteRec{write(0, sA, hA, lk, 5, 50, true)}
	h.Faults = []FaultRec{{Kind: faultKillLeader, Target: "n1", Start: 5, End: 8, LeaderLoss: true},
		{Kind: faultPartitionClient, Target: "client0", Start: 9, End: 12, Lock: lk, Token: 5},
		{Kind: faultFreezeNode, Target: "n2", Start: 13, End: 20, Clients: []int{0, 2}, Asked: 3}}
	h.Holds = []HoldRec{holdRec(0, sA, hA, lk, 5, 21, 60), holdRec(1, sB, hB, lk, 9, 70, pending)}
	h.Expiries = []ExpiryRec{{Client: 1, Session: sB, At: 80, Err: "no keepalive acknowledged"}}
	h.Watches = []WatchRec{{At: 90, From: 0, Index: 7, Reset: true, Locks: []watchedLock{{Name: lockPrefix + "lock0", Index: 5, GrantsSince: 1, Tokens: []uint64{5}}}}}
	h.Exited = []int64{90, pending, pending}
	// The run's shape, which the checks judge by ("raftlock-check analyze"
	// of a semaphore or mixed-kinds run).
	h.Permits, h.Mixed, h.Workers, h.Worker = 2, true, []int{2}, []string{"worker"}
	path := filepath.Join(t.TempDir(), "h.jsonl")
	if err := writeHistory(path, h); err != nil {
		t.Fatal(err)
	}
	got, err := readHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, h) {
		t.Errorf("read back\n%+v\nwant\n%+v", got, h)
	}
}

func TestHistoryLog(t *testing.T) {
	l := newHistoryLog()
	l.record(0, message{T: msgCall, ID: 1, At: 10, Kind: kindAcquire, Lock: lk, Session: sA, Holder: hA, Wait: true})
	l.record(0, message{T: msgCall, ID: 2, At: 20, Kind: kindKeepAlive, Session: sA})
	op, ok := l.record(0, message{T: msgRet, ID: 1, At: 30, Result: resOK, Token: 7})
	if !ok || op.Token != 7 || op.Return != 30 || op.Lock != lk || !op.Wait {
		t.Errorf("completed %+v %v", op, ok)
	}
	if _, ok := l.record(0, message{T: msgRet, ID: 9, At: 40}); ok {
		t.Error("return of an unknown call accepted")
	}
	h := l.snapshot(0, 50, 1)
	if len(h.Ops) != 2 || h.Ops[1].Done() {
		t.Errorf("snapshot %+v: want the keepalive pending", h.Ops)
	}
}

func TestTrackerPrefersContendedHolder(t *testing.T) {
	tr := newTracker()
	tr.observe(0, message{T: msgHold, Lock: "a", Token: 3}, Op{}, false)
	tr.observe(1, message{T: msgHold, Lock: "b", Token: 4}, Op{}, false)
	tr.observe(2, message{T: msgCall, ID: 5, Kind: kindAcquire, Lock: "b", Wait: true}, Op{}, false)
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 10; i++ {
		if c, hold, ok := tr.pickHolder(rng, func(int, message) bool { return true }); !ok || c != 1 || hold.Lock != "b" {
			t.Fatalf("picked client %d (%+v, %v), want client 1, whose lock client 2 waits for", c, hold, ok)
		}
	}
	granted := tr.grantAbove("b", 0, 4)
	tr.observe(2, message{T: msgRet, ID: 5}, Op{ID: 5, Kind: kindAcquire, Lock: "b", Result: resOK, Token: 9}, true)
	select {
	case <-granted:
	default:
		t.Error("grant above 4 not signalled")
	}
	tr.observe(1, message{T: msgUnhold}, Op{}, false)
	tr.observe(0, message{T: msgUnhold}, Op{}, false)
	if _, _, ok := tr.pickHolder(rng, func(int, message) bool { return true }); ok {
		t.Error("picked a holder when none holds")
	}
}

func TestHistoryLogKeepsWaitsQueuesAndAttempts(t *testing.T) {
	l := newHistoryLog()
	l.record(0, message{T: msgCall, ID: 1, At: 10, Kind: kindAcquire, Lock: lk, Session: sA, Holder: hA, Wait: true,
		WaitFor: 20000, Naive: true})
	l.record(0, message{T: msgRet, ID: 1, At: 20, Result: resNoLeader, Attempts: 1})
	l.record(0, message{T: msgCall, ID: 2, At: 30, Kind: kindRead, Lock: lk})
	l.record(0, message{T: msgRet, ID: 2, At: 40, Result: resOK, Index: 9,
		Queue: []queuedInfo{{Holder: hB, Mode: "exclusive"}}, Holders: []holderInfo{hold(sC, hC, 8)}})
	h := l.snapshot(0, 50, 1)
	if a := h.Ops[0]; a.WaitFor != 20000 || !a.Naive || a.Result != resNoLeader || a.Attempts != 1 || a.Unsure != 0 {
		t.Errorf("acquire %+v: want a naive wait of 20000 answered no_leader in one attempt", a)
	}
	if r := h.Ops[1]; r.Index != 9 || len(r.Queue) != 1 || r.Queue[0].Holder != hB {
		t.Errorf("read %+v: want index 9 and %s waiting", r, hB)
	}
}

func TestHistoryLogRecordsHoldsLostAndExits(t *testing.T) {
	l := newHistoryLog()
	l.addHold(0, message{T: msgHold, At: 10, Lock: lk, Session: sA, Holder: hA, Token: 5})
	l.addHold(1, message{T: msgHold, At: 20, Lock: lk, Session: sB, Holder: hB, Token: 9})
	l.lost(0, message{T: msgLost, At: 30, Lock: lk, Session: sA, Holder: hA, Token: 5})
	l.lost(0, message{T: msgLost, At: 40, Lock: lk, Session: sA, Holder: hA, Token: 5})
	l.lost(1, message{T: msgLost, At: 50, Lock: lk, Session: sA, Holder: hA, Token: 5}) // not client 1's hold
	l.clientExited(0, 60)
	h := l.snapshot(0, 70, 2)
	want := []HoldRec{holdRec(0, sA, hA, lk, 5, 10, 30), holdRec(1, sB, hB, lk, 9, 20, pending)}
	if !reflect.DeepEqual(h.Holds, want) {
		t.Errorf("holds %+v, want %+v", h.Holds, want)
	}
	if h.exitOf(0) != 60 || h.exitOf(1) != pending || h.exitOf(5) != pending {
		t.Errorf("exits %v: want client 0 at 60, client 1 still running", h.Exited)
	}
}

func TestSnapshotShowsTheFaultInProgress(t *testing.T) {
	l := newHistoryLog()
	f := FaultRec{Kind: faultPauseClient, Target: "client0", Start: 10}
	l.beginFault(f)
	if h := l.snapshot(0, 20, 1); len(h.Faults) != 1 || h.Faults[0].End != pending {
		t.Fatalf("faults during the pause %+v: want it, with no end yet", h.Faults)
	}
	f.End = 30
	l.addFault(f)
	if h := l.snapshot(0, 40, 1); len(h.Faults) != 1 || h.Faults[0].End != 30 {
		t.Errorf("faults after the pause %+v: want it once, ended at 30", h.Faults)
	}
	l.beginFault(FaultRec{Kind: faultPauseClient, Target: "client0", Start: 50})
	l.dropFault()
	if h := l.snapshot(0, 60, 1); len(h.Faults) != 1 {
		t.Errorf("faults after a dropped one %+v: want only the first", h.Faults)
	}
}

func TestTrackerSignalsLostOfTheCutGrant(t *testing.T) {
	tr := newTracker()
	ch := tr.lostOf(1, "b", 4)
	tr.observe(2, message{T: msgLost, Lock: "b", Token: 4}, Op{}, false) // another client
	tr.observe(1, message{T: msgLost, Lock: "b", Token: 3}, Op{}, false) // another grant
	select {
	case <-ch:
		t.Fatal("signalled for another client's or another grant's Lost()")
	default:
	}
	tr.observe(1, message{T: msgLost, Lock: "b", Token: 4}, Op{}, false)
	select {
	case <-ch:
	default:
		t.Error("Lost() of client 1's token 4 not signalled")
	}
}

// Reads name a holder's session by its handle, never its id: the history
// names it by the id one of the clients opened it with (whichever client,
// and whether its open came before or after the read), and a handle of no
// session opened in the run by a session of its own.
func TestHistoryMapsReadHoldersToSessionsByHandle(t *testing.T) {
	l := newHistoryLog()
	seen := func(client int, id uint64, at int64, hs ...holderInfo) {
		l.record(client, message{T: msgCall, ID: id, At: at, Kind: kindRead, Lock: lk})
		l.record(client, message{T: msgRet, ID: id, At: at + 1, Result: resOK, Holders: hs})
	}
	seen(0, 1, 10, holderInfo{Handle: api.SessionHandle(sB), Holder: hB, Token: 4})
	l.record(1, message{T: msgCall, ID: 1, At: 5, Kind: kindOpen})
	l.record(1, message{T: msgRet, ID: 1, At: 6, Result: resOK, Session: sB})
	seen(0, 2, 20, holderInfo{Handle: api.SessionHandle("never-opened"), Holder: hC, Token: 5})
	h := l.snapshot(0, 50, 2)
	var reads []Op
	for _, o := range h.Ops {
		if o.Kind == kindRead {
			reads = append(reads, o)
		}
	}
	if len(reads) != 2 || reads[0].Holders[0] != hold(sB, hB, 4) ||
		reads[1].Holders[0] != hold(unknownSession+api.SessionHandle("never-opened"), hC, 5) {
		t.Fatalf("reads %+v: want %s's holder by its id, then an unknown session's by its handle", reads, sB)
	}
	// The log keeps what the clients sent.
	if again := l.snapshot(0, 50, 2); !reflect.DeepEqual(again.Ops, h.Ops) || l.ops[0].Holders[0].Handle == "" {
		t.Fatalf("a second snapshot differs, or the first changed the log: %+v", l.ops)
	}
}
