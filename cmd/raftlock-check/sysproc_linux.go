//go:build linux

package main

import "syscall"

// childAttr makes a child process die with the checker (even if the checker
// is killed with SIGKILL) and puts it in its own process group, so that a
// Ctrl-C in the terminal reaches only the checker, which then stops its
// children in order.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}

// workerAttr makes a conformance worker die with its client process; it
// stays in the client's process group, so that a SIGSTOP of the client
// (pause-client) stops it too.
func workerAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
