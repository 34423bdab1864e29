package main

import (
	"sync"

	"github.com/raftlock/raftlock/sequencer"
)

// fencedResource is the protected resource of the run: the clients' writes
// go to it, and it decides each one (WriteRec.Accepted) and stamps the
// moment it took effect (WriteRec.At).
type fencedResource interface {
	write(client int, m message) WriteRec
	// finish checks what the resource itself holds at the end of the run
	// (nil for one that holds nothing more than the records), and frees
	// it.
	finish(accepted int) []Violation
}

// resource is the in-memory resource: it keeps a sequencer.Fence and admits
// a write if its sequencer passes the fence.
// Check and decision happen under one lock, and each decision is stamped
// inside it, so the recorded order of writes is the order they took
// effect.
type resource struct {
	mu    sync.Mutex
	fence stringFence
}

// stringFence checks a sequencer's printable form: *sequencer.Fence, or a
// deliberately broken fence (Config.UnsafeResourceFence).
type stringFence interface {
	CheckString(text string) error
}

// newResource returns the in-memory resource, with a sequencer.Fence, or
// with the broken fence unsafeFence names (Config.UnsafeResourceFence).
func newResource(unsafeFence string) (*resource, error) {
	if unsafeFence == "" {
		return &resource{fence: sequencer.NewFence()}, nil
	}
	f, err := newUnsafeFence(unsafeFence)
	if err != nil {
		return nil, err
	}
	return &resource{fence: f}, nil
}

// finish: the records are all there is.
func (r *resource) finish(int) []Violation { return nil }

// write decides one write of client, carried by m.
func (r *resource) write(client int, m message) WriteRec {
	w := WriteRec{Client: client, Lock: m.Lock, Session: m.Session, Holder: m.Holder, Token: m.Token}
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, err := sequencer.Parse(m.Seq); err == nil && s.Semaphore {
		w.Semaphore, w.Slot = true, s.Slot
	}
	err := r.fence.CheckString(m.Seq)
	w.At = monoNow()
	w.Accepted = err == nil
	if err != nil {
		w.Err = err.Error()
	}
	return w
}
