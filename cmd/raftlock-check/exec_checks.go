package main

import (
	"fmt"
	"slices"
	"time"
)

// The checks of the exec holders (exec.go): `raftlock exec` processes
// whose CMD, the writer (execwriter.go), writes to the resource with the
// sequencer exec gave it.

// Check names of the exec holders.
const (
	// checkExecWriterDead: an exec holder's writer is dead before the
	// lock (of a semaphore: its slot) is granted to anyone else.
	checkExecWriterDead = "exec-writer-dead"
	// checkExecExit: an exec stopped (freeze-exec) past its lease, and
	// continued, exits 124 (lock_lost).
	checkExecExit = "exec-exit"
)

// exitLockLost is exec's exit status when the lock was lost while CMD ran.
const exitLockLost = 124

// ExecRec is one `raftlock exec` process of an exec holder: from its
// start to its exit, with the grant its writer was given, as the writer
// reported it (Acked pending: exec never started a writer).
type ExecRec struct {
	// Exec is the exec holder, Run its Run-th exec process; Client the
	// Client of its writes (WriteRec.Client): the run's clients come
	// first, the exec holders after them.
	Exec   int    `json:"exec"`
	Run    int    `json:"run"`
	Client int    `json:"client"`
	Lock   string `json:"lock"`
	// Semaphore and Slot: the grant was a semaphore slot (-n).
	Semaphore bool   `json:"semaphore,omitempty"`
	Slot      uint64 `json:"slot,omitempty"`
	Session   string `json:"session,omitempty"`
	Token     uint64 `json:"token,omitempty"`
	Seq       string `json:"seq,omitempty"`
	// Started is when the checker started exec; Acked when the writer
	// said, stamped by itself, that it runs with the sequencer: after the
	// grant.
	Started int64 `json:"started"`
	Acked   int64 `json:"acked"`
	// WriterPID is the writer's pid; AliveAt the last moment it was seen
	// alive (a write it sent, stamped by itself, or its pidfd found not
	// exited after a later grant was seen); WriterDied when the checker
	// saw it exit (its pidfd readable; pending: never seen).
	WriterPID  int   `json:"writer_pid,omitempty"`
	AliveAt    int64 `json:"alive_at,omitempty"`
	WriterDied int64 `json:"writer_died"`
	// Exited is when exec exited (pending: still running at the end),
	// Status its exit status (128+N for signal N), Reason the code of its
	// last "raftlock: CODE: ..." line on stderr, if any.
	Exited int64  `json:"exited"`
	Status int    `json:"status"`
	Reason string `json:"reason,omitempty"`
	// Fault is the fault aimed at it (kill-exec, freeze-exec), Frozen
	// when a freeze-exec stopped it, Continued when it was continued past
	// its lease (0: not frozen).
	Fault     string `json:"fault,omitempty"`
	Frozen    int64  `json:"frozen,omitempty"`
	Continued int64  `json:"continued,omitempty"`
	// RunEnd: exec was still running when the run ended and was stopped
	// by the checker; its end says nothing.
	RunEnd bool `json:"run_end,omitempty"`
}

// granted reports whether e's writer ran with a grant.
func (e ExecRec) granted() bool { return e.Acked != pending && e.Seq != "" }

// execLockOf is the lock under which e's grant is judged: its slot's in
// a semaphore run (perSlot), else its lock's.
func execLockOf(h History, e ExecRec) string {
	if h.Permits > 0 && e.Semaphore {
		return slotLock(e.Lock, e.Slot)
	}
	return e.Lock
}

// execGrants adds the exec holders' grants to grants (grantsOf): their
// writes are judged by the fencing check as any client's.
func execGrants(h History, grants map[string][]grant) {
	for _, e := range h.Execs {
		if !e.granted() {
			continue
		}
		l := execLockOf(h, e)
		grants[l] = append(grants[l], grant{Client: e.Client, Lock: l, Session: e.Session, Token: e.Token,
			Acked: e.Acked, ReleaseCall: pending})
	}
}

// checkExecWriters checks exec's promise (docs/DESIGN.md, "exec's guard"):
// an exec holder's CMD is dead before the cluster grants its lock (slot)
// to anyone else, whether exec ended by itself, was SIGKILLed (kill-exec)
// or was stopped past its lease (freeze-exec). For every exec grant e1
// and the first acknowledgement A2 of a later grant of the same lock
// (slot) to another session (a higher token), e1's writer must not have
// been seen alive after A2. It is sound: A2 comes after the grant, and
// AliveAt is a moment the writer provably ran (a write it stamped, or a
// look at its pidfd, which is readable once the process exited).
//
// And an exec stopped past its lease and continued exits 124 (lock_lost),
// unless its writer had ended before the stop, or the run ended first.
// It returns the violations and how many grants it judged (a later grant
// seen).
func checkExecWriters(h History) ([]Violation, int) {
	if len(h.Execs) == 0 {
		return nil, 0
	}
	grants := grantsOf(h)
	var vs []Violation
	judged := 0
	for _, e := range h.Execs {
		if e.Continued > 0 && !e.RunEnd && e.Exited != pending && e.WriterDied > e.Frozen && e.Status != exitLockLost {
			vs = append(vs, Violation{Check: checkExecExit, At: e.Exited, Client: e.Client,
				What: fmt.Sprintf("exec%d (run %d) was stopped past its lease of lock %s (token %d) and continued %v later; it exited %d (%s), not %d (lock_lost)",
					e.Exec, e.Run, e.Lock, e.Token, time.Duration(e.Continued-e.Frozen).Round(time.Millisecond), e.Status, e.Reason, exitLockLost)})
		}
		if !e.granted() {
			continue
		}
		l := execLockOf(h, e)
		var g2 *grant
		for i, g := range grants[l] {
			if g.Token > e.Token && g.Session != e.Session && (g2 == nil || g.Acked < g2.Acked) {
				g2 = &grants[l][i]
			}
		}
		if g2 == nil {
			continue
		}
		judged++
		if e.AliveAt <= g2.Acked {
			continue
		}
		died := "never seen dead"
		if e.WriterDied != pending {
			died = fmt.Sprintf("seen dead %v after it", time.Duration(e.WriterDied-g2.Acked).Round(time.Millisecond))
		}
		who := fmt.Sprintf("client %d", g2.Client)
		if g2.Client >= h.Clients {
			who = fmt.Sprintf("exec%d", g2.Client-h.Clients)
		}
		how := "exec ended"
		if e.Fault != "" {
			how = e.Fault
		}
		vs = append(vs, Violation{Check: checkExecWriterDead, At: e.AliveAt, Client: e.Client,
			What: fmt.Sprintf("exec%d's writer (pid %d, lock %s token %d; %s) ran %v after %s was granted the lock (token %d) at %.3fs (%s): CMD must be dead before the lock is anyone else's",
				e.Exec, e.WriterPID, e.Lock, e.Token, how, time.Duration(e.AliveAt-g2.Acked).Round(time.Millisecond),
				who, g2.Token, float64(g2.Acked-h.Start)/1e9, died)})
	}
	return vs, judged
}

// execFigures are what the exec holders did in a run.
type execFigures struct {
	Execs, Granted, Judged, Killed, Frozen, LockLost int
}

// execFiguresOf counts the exec holders' processes, grants and faults.
func execFiguresOf(h History) *execFigures {
	if len(h.Execs) == 0 {
		return nil
	}
	f := &execFigures{Execs: len(h.Execs)}
	for _, e := range h.Execs {
		if e.granted() {
			f.Granted++
		}
		switch e.Fault {
		case faultKillExec:
			f.Killed++
		case faultFreezeExec:
			f.Frozen++
		}
		if e.Status == exitLockLost {
			f.LockLost++
		}
	}
	_, f.Judged = checkExecWriters(h)
	return f
}

// print prints the exec holders' figures and check (nothing without any).
func (f *execFigures) print(p func(string, ...any), vs []Violation) {
	if f == nil {
		return
	}
	n := func(check string) int {
		return len(slices.DeleteFunc(slices.Clone(vs), func(v Violation) bool { return v.Check != check }))
	}
	p("  exec holders: %d exec processes, %d granted, %d killed (kill-exec), %d frozen (freeze-exec), %d exited lock_lost",
		f.Execs, f.Granted, f.Killed, f.Frozen, f.LockLost)
	p("  10 exec's CMD dead first:   %d violations  (%d grants judged), exec exit after a freeze: %d violations",
		n(checkExecWriterDead), f.Judged, n(checkExecExit))
}
