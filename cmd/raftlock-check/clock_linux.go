//go:build linux

package main

import (
	"syscall"
	"unsafe"
)

// monoNow returns CLOCK_MONOTONIC in nanoseconds. Unlike Go's monotonic
// readings, which count from each process's start, this clock is shared by
// every process on the machine, so the checker and its client processes
// stamp operations on one time line that no wall-clock step can bend.
func monoNow() int64 {
	const clockMonotonic = 1
	var ts syscall.Timespec
	_, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0)
	if errno != 0 {
		panic("clock_gettime(CLOCK_MONOTONIC): " + errno.Error())
	}
	return ts.Nano()
}
