//go:build linux

package main

import "syscall"

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
