package main

import (
	"context"
	"testing"
	"time"
)

// execTestConfig is a short run with exec holders: two exec holders
// contending for one lock beside two Go clients, with a TTL of 2 s and a
// lock-delay of 7 s, so that a kill or a freeze of an exec is followed by
// the next grant within some 10 s. With noGuard, the CLI is the build with
// exec --unsafe-no-guard.
func execTestConfig(t *testing.T, noGuard bool) Config {
	t.Helper()
	cfg := testConfig(t, "")
	cli, err := buildCLI(context.Background(), t.TempDir(), noGuard)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Raftlock, cfg.UnsafeExecNoGuard = cli, noGuard
	cfg.Clients, cfg.Locks, cfg.ExecClients = 2, 1, 2
	cfg.TTL, cfg.LockDelay = 2*time.Second, 7*time.Second
	cfg.GapMin, cfg.GapMax = 500*time.Millisecond, time.Second
	return cfg
}

// TestExecHoldersUnderFaults: `raftlock exec` holders SIGKILLed
// (kill-exec) and stopped past their lease (freeze-exec), among leader
// kills: no check may fail. Each writer is dead before its lock is
// granted again (its guard kills it at once when exec dies, and before
// the lock is lost when exec is stopped), a frozen exec exits 124 once
// continued, and the fence refuses nothing a current holder wrote.
func TestExecHoldersUnderFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real cluster, client and exec processes")
	}
	cfg := execTestConfig(t, false)
	cfg.Faults = []string{faultKillExec, faultFreezeExec, faultKillLeader}
	cfg.Duration, cfg.Seed = 45*time.Second, 4
	rep := runLogged(t, cfg)
	requireClean(t, rep, cfg.Out)
	if rep.Faults[faultKillExec] == 0 || rep.Faults[faultFreezeExec] == 0 || rep.Execs == nil || rep.Execs.Judged == 0 {
		t.Errorf("no exec was killed or frozen, or no exec grant was judged: faults %+v, exec figures %+v", rep.Faults, rep.Execs)
	}
}

// TestCatchesExecWithoutGuard: a build of exec that starts CMD without
// its guard (exec --unsafe-no-guard, -tags raftlock_faults) is caught: a
// SIGKILLed exec leaves its writer running, and the writer is seen alive
// after the lock is granted to the other exec holder.
func TestCatchesExecWithoutGuard(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real cluster, client and exec processes")
	}
	cfg := execTestConfig(t, true)
	cfg.Faults = []string{faultKillExec}
	cfg.Duration = 25 * time.Second
	rep := runLogged(t, cfg)
	if rep.count(checkExecWriterDead) == 0 {
		t.Errorf("the checker passed an exec without its guard (%d kill-exec faults)", rep.Faults[faultKillExec])
	}
}
