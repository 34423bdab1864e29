package main

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// pidWatch watches one process that is not the checker's child (an exec
// holder's writer, the child of exec's guard) through a pidfd, which turns
// readable once the process has exited.
type pidWatch struct{ fd int }

func watchPID(pid int) (*pidWatch, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	return &pidWatch{fd: fd}, nil
}

// exited reports whether the process has exited, without waiting.
func (w *pidWatch) exited() bool {
	fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err != nil || n > 0
	}
}

// wait blocks until the process has exited.
func (w *pidWatch) wait() {
	fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, -1)
		if errors.Is(err, unix.EINTR) || err == nil && n == 0 {
			continue
		}
		return
	}
}

// close frees the pidfd; not while wait or exited runs.
func (w *pidWatch) close() { _ = unix.Close(w.fd) }
