//go:build !linux

package main

import (
	"os"
	"syscall"
)

// guardSelf is the binary exec starts as its guard: its own.
func guardSelf() (string, error) { return os.Executable() }

// childSysProcAttr puts CMD in a process group of its own (so that the
// guard's SIGKILL of the group reaches CMD's children too, and the
// terminal's ^C reaches CMD once, through exec). Outside Linux there is
// no parent-death signal: CMD outlives a SIGKILLed guard.
func childSysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// becomeSubreaper does nothing outside Linux: there is no subreaper, and
// an orphan of CMD's tree goes to PID 1, out of the guard's reach.
func becomeSubreaper() error { return nil }

// reapOrphans does nothing outside Linux: the guard has no orphans.
func reapOrphans(int) {}

// sweepOrphans does nothing outside Linux: the guard has no orphans.
func sweepOrphans() {}
