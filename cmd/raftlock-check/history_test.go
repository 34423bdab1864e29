package main

import (
	"math/rand"
	"path/filepath"
	"reflect"
	"testing"
)

func TestHistoryRoundTrip(t *testing.T) {
	h := hist(opOpen(0, sA, 1, 2), opAcq(0, sA, hA, lk, 10, pending, resUnknown, 0),
		opRead(1, lk, 30, 40, hold(sA, hA, 5)))
	h.Start, h.End = 1, 99
	h.Writes = []WriteRec{write(0, sA, hA, lk, 5, 50, true)}
	h.Faults = []FaultRec{{Kind: faultKillLeader, Target: "n1", Start: 5, End: 8, LeaderLoss: true}}
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
		if c, hold, ok := tr.pickHolder(rng, func(int) bool { return true }); !ok || c != 1 || hold.Lock != "b" {
			t.Fatalf("picked client %d (%+v, %v), want client 1, whose lock client 2 waits for", c, hold, ok)
		}
	}
	granted := tr.grantAbove("b", 4)
	tr.observe(2, message{T: msgRet, ID: 5}, Op{ID: 5, Kind: kindAcquire, Lock: "b", Result: resOK, Token: 9}, true)
	select {
	case <-granted:
	default:
		t.Error("grant above 4 not signalled")
	}
	tr.observe(1, message{T: msgUnhold}, Op{}, false)
	tr.observe(0, message{T: msgUnhold}, Op{}, false)
	if _, _, ok := tr.pickHolder(rng, func(int) bool { return true }); ok {
		t.Error("picked a holder when none holds")
	}
}
