package stream

import (
	"net"
	"runtime"
	"sync"
	"time"
)

// connWriter writes frames to a connection, coalesced: the goroutine that
// finds the connection idle becomes its writer, from its own stack (no
// writer goroutine to wake): it yields once to the goroutines ready to run,
// then writes everything queued in one write call, and again until nothing
// is queued; frames queued by others meanwhile are appended to the buffer.
// So a lone frame costs one write, and a burst of n frames about one.
type connWriter struct {
	nc      net.Conn
	timeout time.Duration // each write's deadline

	mu      sync.Mutex
	drained sync.Cond // on mu: the queue was taken to be written, or err set
	buf     []byte    // frames queued
	spare   []byte    // the buffer last written, reused
	writing bool      // a goroutine is writing
	err     error     // the first write error: the connection is dead
}

// waitRoom blocks while at least limit bytes of frames are queued: the
// connection's reader calls it before it reads the next request, so that
// a client that sends requests and never reads their answers stops being
// read once limit bytes wait for it, instead of growing the queue in the
// node's memory. It returns the connection's write error, if any.
func (w *connWriter) waitRoom(limit int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.drained.L == nil {
		w.drained.L = &w.mu
	}
	for len(w.buf) >= limit && w.err == nil {
		w.drained.Wait()
	}
	return w.err
}

// queued returns how many bytes of frames wait to be written.
func (w *connWriter) queued() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.buf)
}

// maxSpare bounds the buffer kept for reuse.
const maxSpare = 1 << 20

// send appends a frame with appendFrame and sees it written (or queued
// behind a write in progress, which then writes it). It returns the
// connection's write error, if any.
func (w *connWriter) send(appendFrame func([]byte) []byte) error {
	w.mu.Lock()
	if w.err != nil {
		err := w.err
		w.mu.Unlock()
		return err
	}
	w.buf = appendFrame(w.buf)
	if w.writing {
		w.mu.Unlock()
		return nil
	}
	w.writing = true
	// Let the goroutines that are ready to run (the other answers of the
	// Raft batch that woke this one; the other clients' requests) queue
	// their frames first, so that one write carries them all: measured,
	// a third fewer syscalls per pair on the leader at 64 clients
	// (docs/RUNS.md, "The stream protocol against HTTP/1.1").
	w.mu.Unlock()
	runtime.Gosched()
	w.mu.Lock()
	for len(w.buf) > 0 && w.err == nil {
		out := w.buf
		w.buf = w.spare[:0]
		w.broadcast()
		w.mu.Unlock()
		if w.timeout > 0 {
			_ = w.nc.SetWriteDeadline(time.Now().Add(w.timeout))
		}
		_, err := w.nc.Write(out)
		w.mu.Lock()
		w.spare = nil
		if cap(out) <= maxSpare {
			w.spare = out[:0]
		}
		if err != nil {
			w.err = err
			w.broadcast()
		}
	}
	w.writing = false
	err := w.err
	w.mu.Unlock()
	return err
}

// broadcast wakes the reader waiting in waitRoom; w.mu is held.
func (w *connWriter) broadcast() {
	if w.drained.L != nil {
		w.drained.Broadcast()
	}
}
