package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/raftlock/raftlock/session"
)

// guardConn is exec's end of CMD's guard: a process (exec's own binary,
// "raftlock __exec-guard CMD...") that starts CMD and outlives exec. exec
// gives it a deadline, renewed while the lease is renewed; the guard
// SIGKILLs CMD's process group when the deadline passes (exec frozen or
// starved) or when exec's pipe closes (exec died). See guardMain.
type guardConn struct {
	proc   *exec.Cmd
	ctl    *os.File       // exec's orders, the write end
	pid    int            // CMD's pid, the leader of its process group
	exited chan guardExit // CMD's end as the guard reports it; closed without one if the guard died
	sent   time.Time      // the deadline last sent, on exec's clock
}

// renewEvery is how often exec looks for an acknowledged keepalive that
// moved the session's LostDeadline, to renew the guard's deadline.
func renewEvery(ttl time.Duration) time.Duration { return ttl / 10 }

// guardDeadline is the moment until which CMD may run on the lease as it
// stands: the time exec sends SIGKILL in jeopardy, reapBudget before the
// locks are lost.
func guardDeadline(s *session.Session) time.Time { return s.LostDeadline().Add(-reapBudget) }

// startGuard starts the guard with CMD's argv and environment and the
// first deadline, and returns once the guard reports CMD started. A CMD
// that could not be started returns startFailure's exit status.
func startGuard(argv, env []string, stdin io.Reader, stdout, stderr io.Writer, deadline time.Time) (*guardConn, error) {
	self, err := guardSelf()
	if err != nil {
		return nil, &exitStatus{code: exitNoLock, err: fmt.Errorf("exec: find raftlock's own binary for CMD's guard: %w", err)}
	}
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return nil, &exitStatus{code: exitNoLock, err: fmt.Errorf("exec: guard pipe: %w", err)}
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		ctlR.Close()
		ctlW.Close()
		return nil, &exitStatus{code: exitNoLock, err: fmt.Errorf("exec: guard pipe: %w", err)}
	}
	proc := exec.Command(self, append([]string{guardCommand}, argv...)...)
	proc.Args[0] = "raftlock" // as ps shows it
	proc.Env = env
	proc.Stdin, proc.Stdout, proc.Stderr = stdin, stdout, stderr
	proc.ExtraFiles = []*os.File{ctlR, repW} // fds 3 and 4: guardCtlFD, guardReportFD
	// A group of its own: neither a terminal's ^C or ^Z nor a signal to
	// exec's process group reaches the guard; exec forwards signals to
	// CMD through it.
	proc.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	g := &guardConn{proc: proc, ctl: ctlW, exited: make(chan guardExit, 1)}
	err = proc.Start()
	ctlR.Close()
	repW.Close()
	if err != nil {
		ctlW.Close()
		repR.Close()
		return nil, &exitStatus{code: exitNoLock, err: fmt.Errorf("exec: start CMD's guard %s: %w", self, err)}
	}
	if err := g.renewTo(deadline); err != nil {
		repR.Close()
		g.close()
		return nil, &exitStatus{code: exitNoLock, err: err}
	}
	reports := bufio.NewReader(repR)
	first, err := reports.ReadString('\n')
	f := strings.SplitN(strings.TrimSpace(first), " ", 3)
	switch {
	case err == nil && len(f) == 2 && f[0] == "started":
		if g.pid, err = strconv.Atoi(f[1]); err == nil {
			go func() {
				defer repR.Close()
				g.readExit(reports)
			}()
			return g, nil
		}
	case err == nil && len(f) == 3 && f[0] == "start_failed":
		repR.Close()
		g.close()
		return nil, startFailure(argv[0], f[1], f[2])
	}
	repR.Close()
	g.close()
	return nil, &exitStatus{code: exitNoLock, err: fmt.Errorf("exec: CMD's guard did not start CMD (said %q, %v; %v)", first, err, g.proc.ProcessState)}
}

// readExit reads the guard's last report, CMD's end, into g.exited; it
// closes g.exited without one if the guard died first.
func (g *guardConn) readExit(r *bufio.Reader) {
	defer close(g.exited)
	line, err := r.ReadString('\n')
	if err != nil {
		return
	}
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "exited" {
		return
	}
	status, err := strconv.Atoi(f[1])
	if err != nil {
		return
	}
	g.exited <- guardExit{status: status, why: f[2]}
}

// renew gives the guard the deadline of the lease as it stands, if an
// acknowledged keepalive moved it, unless l is lost: a lost lock's deadline
// never moves again (a revoked grant's lease goes on, its lock does not).
// The deadline is read before Lost is checked: the session closes a
// revoked lock's Lost before the answer that revoked it moves the lease.
func (g *guardConn) renew(s *session.Session, l *session.Lock) error {
	d := guardDeadline(s)
	select {
	case <-l.Lost():
		return nil
	default:
	}
	if !d.After(g.sent) {
		return nil
	}
	return g.renewTo(d)
}

// renewTo sends the deadline d.
func (g *guardConn) renewTo(d time.Time) error {
	g.sent = d
	return g.order(guardMsg{kind: "deadline", deadline: monoDeadline(d)})
}

// signal sends sig to CMD's process group, through the guard.
func (g *guardConn) signal(sig syscall.Signal) { _ = g.order(guardMsg{kind: "signal", sig: sig}) }

// order writes one message to the guard.
func (g *guardConn) order(m guardMsg) error {
	if _, err := io.WriteString(g.ctl, m.String()+"\n"); err != nil {
		return fmt.Errorf("exec: order to CMD's guard: %w", err)
	}
	return nil
}

// missed reports whether the guard's deadline has passed: the guard has
// sent CMD's group SIGKILL (or is about to), because exec was too late.
func (g *guardConn) missed() bool { return !time.Now().Before(g.sent) }

// missedDeadline says that the guard killed CMD (name) because exec missed
// its deadline.
func missedDeadline(name string) string {
	return fmt.Sprintf("exec was stopped or starved past its lease, so its guard sent %s's process group SIGKILL at the deadline (%v before the lock is lost)",
		name, reapBudget)
}

// killGroup SIGKILLs CMD's process group from exec itself: when the
// guard died before reporting CMD's end.
func (g *guardConn) killGroup() { _ = syscall.Kill(-g.pid, syscall.SIGKILL) }

// close ends the orders (a guard still running then kills CMD's group)
// and reaps the guard.
func (g *guardConn) close() {
	g.ctl.Close()
	_ = g.proc.Wait()
}

// startFailure is the exit status and error of a CMD that the guard could
// not start, as classifyStart named why: 127 (command_not_found) if it was
// not found, 126 (not_executable) otherwise, as a shell says; 124 if the
// deadline had passed already.
func startFailure(name, kind, msg string) error {
	switch kind {
	case "not_found", "no_such_file":
		return &exitStatus{code: exitNotFound, err: &codeError{code: "command_not_found",
			err: fmt.Errorf("exec: %s: %s", name, msg)}}
	case "late":
		return &exitStatus{code: exitLockLost, err: &codeError{code: "lock_lost",
			err: fmt.Errorf("exec: %s not started: %s", name, msg)}}
	}
	return &exitStatus{code: exitNoExec, err: &codeError{code: "not_executable",
		err: fmt.Errorf("exec: %s: cannot be run: %s", name, msg)}}
}
