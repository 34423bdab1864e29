package main

import (
	"context"
	"errors"
	"sync"
)

// errOtherEndGone is a request's error when the other end of the protocol
// (the checker for a client, a client for the checker) went away first.
var errOtherEndGone = errors.New("the other end of the protocol is gone")

// replyTable matches answers to the requests that wait for them, by
// message ID: the one pending-reply table of both ends of the protocol.
type replyTable struct {
	mu      sync.Mutex
	waiting map[uint64]chan message
}

// request sends m with send and waits for the answer with m's ID, until ctx
// ends (ctx.Err()) or gone is closed (errOtherEndGone).
func (t *replyTable) request(ctx context.Context, m message, send func(message), gone <-chan struct{}) (message, error) {
	ch := make(chan message, 1)
	t.mu.Lock()
	if t.waiting == nil {
		t.waiting = make(map[uint64]chan message)
	}
	t.waiting[m.ID] = ch
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		delete(t.waiting, m.ID)
		t.mu.Unlock()
	}()
	send(m)
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		return message{}, ctx.Err()
	case <-gone:
		return message{}, errOtherEndGone
	}
}

// deliver hands an answer to the request waiting for it; an answer nobody
// waits for (any more) is dropped.
func (t *replyTable) deliver(m message) {
	t.mu.Lock()
	ch := t.waiting[m.ID]
	t.mu.Unlock()
	if ch != nil {
		select {
		case ch <- m:
		default:
		}
	}
}
