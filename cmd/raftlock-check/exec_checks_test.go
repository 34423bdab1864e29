package main

import (
	"io"
	"slices"
	"strings"
	"testing"
)

// execRun is a hand-made exec record: holder j's exec for lock, granted
// token at acked (by session s), its writer last seen alive at alive and
// seen dead at died.
func execRun(j int, s, lock string, token uint64, acked, alive, died int64) ExecRec {
	return ExecRec{Exec: j, Client: 10 + j, Lock: lock, Session: s, Token: token, Seq: "rl1:x", Started: acked - 5,
		Acked: acked, AliveAt: alive, WriterDied: died, Exited: died + 5, WriterPID: 100 + j}
}

func TestExecWriterAliveAfterNextGrantIsViolation(t *testing.T) {
	h := History{Clients: 10, Execs: []ExecRec{
		execRun(0, "s0", "check/exec0", 5, 100, 250, 260), // seen alive at 250, after the grant at 200
		execRun(1, "s1", "check/exec0", 6, 200, 300, 310),
	}}
	vs, judged := checkExecWriters(h)
	if len(vs) != 1 || vs[0].Check != checkExecWriterDead || vs[0].Client != 10 || judged != 1 {
		t.Fatalf("violations %+v, judged %d: want one %s of client 10, one grant judged", vs, judged, checkExecWriterDead)
	}
	if !strings.Contains(vs[0].What, "exec0's writer") || !strings.Contains(vs[0].What, "after exec1 was granted") {
		t.Errorf("violation %q does not name exec0's writer and exec1's grant", vs[0].What)
	}
	if qv := quickChecks(h); !containsCheck(qv, checkExecWriterDead) {
		t.Errorf("quickChecks %+v: want the %s violation", qv, checkExecWriterDead)
	}
}

func TestExecWriterDeadBeforeNextGrantIsNoViolation(t *testing.T) {
	h := History{Clients: 10, Execs: []ExecRec{
		execRun(0, "s0", "check/exec0", 5, 100, 150, 160),
		execRun(1, "s1", "check/exec0", 6, 200, 300, 310),
		// Another lock's later grant does not judge exec0.
		execRun(2, "s2", "check/exec1", 7, 120, 140, 145),
	}}
	if vs, judged := checkExecWriters(h); len(vs) != 0 || judged != 1 {
		t.Fatalf("violations %+v, judged %d: want none, one grant judged", vs, judged)
	}
}

// A writer that died only after the next grant, but was last proven
// alive before it, is not judged a violation: its death is seen late.
func TestExecWriterSeenDeadLateIsNoViolation(t *testing.T) {
	h := History{Clients: 10, Execs: []ExecRec{
		execRun(0, "s0", "check/exec0", 5, 100, 150, 230),
		execRun(1, "s1", "check/exec0", 6, 200, 300, 310),
	}}
	if vs, _ := checkExecWriters(h); len(vs) != 0 {
		t.Fatalf("violations %+v: want none (alive at 150 only)", vs)
	}
}

// The fencing check judges the exec holders' writes against their
// grants: a write of an old token accepted after a newer grant was
// acknowledged is a stale holder's.
func TestExecWriteAfterNextGrantFailsFencing(t *testing.T) {
	h := History{Clients: 10, Execs: []ExecRec{
		execRun(0, "s0", "check/exec0", 5, 100, 150, 160),
		execRun(1, "s1", "check/exec0", 6, 200, 300, 310),
	}, Writes: []WriteRec{
		{Client: 10, Lock: "check/exec0", Session: "s0", Token: 5, At: 120, Accepted: true},
		{Client: 10, Lock: "check/exec0", Session: "s0", Token: 5, At: 210, Accepted: true},
	}}
	vs := checkFence(h)
	if len(vs) != 1 || vs[0].Check != checkFencing || vs[0].At != 210 {
		t.Fatalf("fencing violations %+v: want the write at 210", vs)
	}
}

func TestFrozenExecMustExitLockLost(t *testing.T) {
	frozen := execRun(0, "s0", "check/exec0", 5, 100, 150, 160)
	frozen.Frozen, frozen.Continued, frozen.Status, frozen.Fault = 120, 400, 0, faultFreezeExec
	h := History{Clients: 10, Execs: []ExecRec{frozen}}
	if vs, _ := checkExecWriters(h); len(vs) != 1 || vs[0].Check != checkExecExit {
		t.Fatalf("violations %+v: want one %s", vs, checkExecExit)
	}
	frozen.Status = exitLockLost
	h.Execs[0] = frozen
	if vs, _ := checkExecWriters(h); len(vs) != 0 {
		t.Fatalf("violations %+v: want none for exit %d", vs, exitLockLost)
	}
}

func containsCheck(vs []Violation, check string) bool {
	for _, v := range vs {
		if v.Check == check {
			return true
		}
	}
	return false
}

// --faults all includes kill-exec and freeze-exec with exec holders only;
// named without them, they are refused.
func TestExecFaultsComeWithExecClients(t *testing.T) {
	cfg, err := parseFlags([]string{"--exec-clients", "2"}, io.Discard)
	if err != nil || !slices.Contains(cfg.Faults, faultKillExec) || !slices.Contains(cfg.Faults, faultFreezeExec) {
		t.Fatalf("--exec-clients 2: %v, faults %v: want kill-exec and freeze-exec", err, cfg.Faults)
	}
	cfg, err = parseFlags(nil, io.Discard)
	if err != nil || slices.ContainsFunc(cfg.Faults, isExecFault) {
		t.Fatalf("default flags: %v, faults %v: want no exec faults", err, cfg.Faults)
	}
	if _, err := parseFlags([]string{"--faults", "kill-exec"}, io.Discard); err == nil {
		t.Fatal("--faults kill-exec without --exec-clients was accepted")
	}
}
