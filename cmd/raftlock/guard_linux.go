//go:build linux

package main

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// guardSelf is the binary exec starts as its guard: its own, through
// /proc/self/exe, which still names it if it was replaced or deleted on
// disk since exec started.
func guardSelf() (string, error) { return "/proc/self/exe", nil }

// childSysProcAttr puts CMD in a process group of its own (so that the
// guard's SIGKILL of the group reaches CMD's children too, and the
// terminal's ^C reaches CMD once, through exec) and has the kernel SIGKILL
// CMD when the guard's thread that started it exits (PR_SET_PDEATHSIG):
// CMD itself dies even if the guard is SIGKILLed along with exec.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// becomeSubreaper makes the guard the subreaper of CMD's descendants
// (PR_SET_CHILD_SUBREAPER, as systemd and tini -s do): a descendant whose
// parent dies is re-parented to the guard instead of PID 1, so that the
// guard can still find it when it must kill CMD: a daemon that left CMD's
// process group (setsid) and whose parent exited, or whose parent the
// group's SIGKILL just ended.
func becomeSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return os.NewSyscallError("prctl(PR_SET_CHILD_SUBREAPER)", err)
	}
	return nil
}

// guardChildren lists the guard's children: CMD, and the orphans that
// were re-parented to it. It reads /proc/self/task/*/children (each
// thread's own), or, on a kernel without them, every process's parent in
// /proc/*/stat.
func guardChildren() []int {
	var pids []int
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	for _, t := range tasks {
		data, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	if len(tasks) > 0 {
		return pids
	}
	self := os.Getpid()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, s := range stats {
		data, err := os.ReadFile(s)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		rest := string(data[strings.LastIndexByte(string(data), ')')+1:])
		f := strings.Fields(rest)
		if len(f) < 2 || f[1] != strconv.Itoa(self) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(s))); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// reapOrphans reaps the orphans that ended while CMD runs (the guard is
// their subreaper, so their zombies are its to reap); never CMD, which
// its own Wait reaps.
func reapOrphans(cmdPID int) {
	for _, pid := range guardChildren() {
		if pid != cmdPID {
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		}
	}
}

// sweepOrphans SIGKILLs and reaps every child the guard has left once CMD
// is reaped: orphans of CMD's tree, re-parented to the guard. Each one's
// process group goes too (a setsid daemon leads one). Killing one can
// orphan its own children to the guard in turn, so it repeats until the
// guard has no child left.
func sweepOrphans() {
	for {
		for _, pid := range guardChildren() {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(-1, &ws, 0, nil); errors.Is(err, syscall.ECHILD) {
			return
		}
	}
}
