package main

import (
	"context"
	"fmt"
	"syscall"
	"time"
)

// The faults aimed at the exec holders (exec.go).
const (
	// kill-exec: SIGKILL of one exec while its writer holds the grant;
	// the writer must die at once (exec's guard kills its group), and
	// surely before the lock is granted again.
	faultKillExec = "kill-exec"
	// freeze-exec: SIGSTOP of one exec past its lease (until its lock is
	// granted again, or TTL + lock-delay + execFreezeExtra), then SIGCONT:
	// its guard must have killed the writer before that grant, and exec
	// exits 124 (lock_lost) once continued.
	faultFreezeExec = "freeze-exec"
)

// isExecFault reports whether kind needs exec holders.
func isExecFault(kind string) bool { return kind == faultKillExec || kind == faultFreezeExec }

// execFreezeExtra is how long past TTL + lock-delay a fault on an exec
// waits for its lock to be granted again.
const execFreezeExtra = 3 * time.Second

// awaitExecHolder waits up to 5 s for an exec whose writer holds its
// grant, and marks it the target of kind.
func (in *injector) awaitExecHolder(ctx context.Context, kind string) (*execLive, ExecRec, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		if l, e, ok := in.execs.holding(in.rng, kind); ok {
			return l, e, nil
		}
		if time.Now().After(deadline) || !sleep(ctx, 50*time.Millisecond) {
			return nil, ExecRec{}, fmt.Errorf("%w: no exec holder holds a lock", errSkipped)
		}
	}
}

// awaitRegrant waits until e's lock (slot) is granted to an exec with a
// higher token, or TTL + lock-delay + execFreezeExtra passed, or ctx ended;
// it reports whether the grant came.
func (in *injector) awaitRegrant(ctx context.Context, e ExecRec) bool {
	t := time.NewTimer(in.cfg.TTL + in.cfg.LockDelay + execFreezeExtra)
	defer t.Stop()
	select {
	case <-in.execs.grantAbove(slotLock(e.Lock, e.Slot), e.Token):
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// writerFate says whether e's writer was seen dead, and when, relative to
// from.
func writerFate(e ExecRec, from int64) string {
	if e.WriterDied == pending {
		return "its writer still ran after"
	}
	return fmt.Sprintf("its writer died %v after", time.Duration(e.WriterDied-from).Round(time.Millisecond))
}

// killExec SIGKILLs one exec process whose writer holds its grant, and
// waits for the lock to be granted again.
func (in *injector) killExec(ctx context.Context) (FaultRec, error) {
	l, e, err := in.awaitExecHolder(ctx, faultKillExec)
	if err != nil {
		return FaultRec{}, err
	}
	rec := FaultRec{Kind: faultKillExec, Target: fmt.Sprintf("exec%d", e.Exec), Start: monoNow(), Lock: e.Lock, Token: e.Token}
	in.hist.beginFault(rec)
	_ = l.proc.Signal(syscall.SIGKILL)
	regranted := in.awaitRegrant(ctx, e)
	rec.End = monoNow()
	e = in.execs.update(l, func(*ExecRec) {})
	rec.Note = fmt.Sprintf("(lock %s token %d; %s the kill; regranted: %v)", e.Lock, e.Token, writerFate(e, rec.Start), regranted)
	return rec, nil
}

// freezeExec stops one exec process whose writer holds its grant past its
// lease: until its lock is granted again (or TTL + lock-delay +
// execFreezeExtra), then continues it.
func (in *injector) freezeExec(ctx context.Context) (FaultRec, error) {
	l, e, err := in.awaitExecHolder(ctx, faultFreezeExec)
	if err != nil {
		return FaultRec{}, err
	}
	rec := FaultRec{Kind: faultFreezeExec, Target: fmt.Sprintf("exec%d", e.Exec), Start: monoNow(), Lock: e.Lock, Token: e.Token}
	in.hist.beginFault(rec)
	_ = l.proc.Signal(syscall.SIGSTOP)
	in.execs.update(l, func(e *ExecRec) { e.Frozen = rec.Start })
	// Past its lease in any case: the lease ends within TTL of the stop,
	// and the lock is lost a lock-delay later.
	regranted := in.awaitRegrant(context.WithoutCancel(ctx), e)
	rec.End = monoNow()
	e = in.execs.update(l, func(e *ExecRec) { e.Continued = rec.End })
	_ = l.proc.Signal(syscall.SIGCONT)
	rec.Note = fmt.Sprintf("(lock %s token %d; %s the stop; regranted: %v)", e.Lock, e.Token, writerFate(e, rec.Start), regranted)
	return rec, nil
}
