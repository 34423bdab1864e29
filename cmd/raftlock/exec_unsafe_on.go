//go:build raftlock_faults

package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// execUnsafe holds exec's switches that break its promise on purpose, in a
// build with -tags raftlock_faults only (the fault checker's "can it fail"
// runs).
type execUnsafe struct {
	// noGuard starts CMD the old way, without a guard: a SIGKILLed exec
	// leaves CMD running, and a SIGSTOPped one leaves it running past the
	// lock's loss.
	noGuard bool
}

// addFlags adds --unsafe-no-guard.
func (u *execUnsafe) addFlags(fs *flag.FlagSet) {
	fs.BoolVar(&u.noGuard, "unsafe-no-guard", false, "TESTING ONLY: start CMD without its guard, so that CMD outlives a SIGKILLed exec and runs on past the lock's loss while exec is stopped")
}

// startGuard starts CMD under its guard, or with --unsafe-no-guard
// directly, in a process group of its own.
func (u *execUnsafe) startGuard(argv, env []string, stdin io.Reader, stdout, stderr io.Writer, deadline time.Time) (*guardConn, error) {
	if !u.noGuard {
		return startGuard(argv, env, stdin, stdout, stderr, deadline)
	}
	return startUnguarded(argv, env, stdin, stdout, stderr)
}

// startUnguarded starts CMD as exec's own child, as exec did before its
// guard: exec's orders to the "guard" are carried out by exec itself (its
// signals go to CMD's group, its deadlines are ignored), so nothing acts
// once exec is dead or stopped.
func startUnguarded(argv, env []string, stdin io.Reader, stdout, stderr io.Writer) (*guardConn, error) {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, startFailure(argv[0], "not_found", err.Error())
	}
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return nil, &exitStatus{code: exitNoLock, err: fmt.Errorf("exec: pipe: %w", err)}
	}
	cmd := exec.Command(path, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		ctlR.Close()
		ctlW.Close()
		return nil, startFailure(argv[0], "not_executable", err.Error())
	}
	g := &guardConn{proc: cmd, ctl: ctlW, pid: cmd.Process.Pid, exited: make(chan guardExit, 1)}
	go func() {
		defer ctlR.Close()
		sc := bufio.NewScanner(ctlR)
		for sc.Scan() {
			if m, err := parseGuardMsg(sc.Text()); err == nil && m.kind == "signal" {
				_ = syscall.Kill(-g.pid, m.sig)
			}
		}
	}()
	go func() {
		err := cmd.Wait()
		g.exited <- guardExit{status: childStatus(err), why: whyNone}
	}()
	return g, nil
}
