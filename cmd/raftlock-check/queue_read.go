package main

import (
	"github.com/raftlock/raftlock/api"
)

// queueOf returns the queue of waiters a read of a lock answered, in FIFO
// order. (Kept apart: a cluster whose reads list no queue has a stub of
// it that returns none.)
func queueOf(st api.LockState) []queuedInfo {
	var q []queuedInfo
	for _, w := range st.Queue {
		q = append(q, queuedInfo{Holder: w.Holder, Mode: w.Mode.String()})
	}
	return q
}
