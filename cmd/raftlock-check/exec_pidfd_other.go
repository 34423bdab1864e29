//go:build !linux

package main

import (
	"syscall"
	"time"
)

// pidWatch watches one process that is not the checker's child by
// signal 0 (without pidfds, a zombie counts as running).
type pidWatch struct{ pid int }

func watchPID(pid int) (*pidWatch, error) { return &pidWatch{pid: pid}, nil }

// exited reports whether the process has exited, without waiting.
func (w *pidWatch) exited() bool { return syscall.Kill(w.pid, 0) == syscall.ESRCH }

// wait blocks until the process has exited.
func (w *pidWatch) wait() {
	for !w.exited() {
		time.Sleep(10 * time.Millisecond)
	}
}

func (w *pidWatch) close() {}
