//go:build !linux

package main

import "syscall"

// childAttr puts a child process in its own process group.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// workerAttr leaves a conformance worker in its client's process group.
func workerAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{}
}
