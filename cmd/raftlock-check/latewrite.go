package main

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"time"
)

// faultLateWrite holds a holder's write on its way to the resource and
// stops the holder's process there, until the next holder of the lock has
// written (at most TTL + lock-delay + lateWriteExtra), then lets the write
// land and resumes the process: a write that left its client in time and
// arrives after the lock moved on (a request stuck in a slow network or a
// retrying driver, a GC pause between the fence check of the client and
// the write). The resource must refuse it; one that trusts the lock alone
// (--unsafe-unfenced-writer) takes it after a newer holder's write, which
// the fencing check catches.
const faultLateWrite = "late-write"

// lateWriteExtra is how long past the holder's TTL + lock-delay a late
// write waits for the next holder's write before it lands anyway.
const lateWriteExtra = 15 * time.Second

// lateAfterNewerNote ends the note of a late write that landed after a
// newer holder's write (Report.LateAfterNewer counts them).
const lateAfterNewerNote = "landed after a newer holder's write"

// lateWriteCatch bounds the wait for the held client's next write.
const lateWriteCatch = 10 * time.Second

// writeHold is one armed hold: the next write of client for lock with
// token is held (caught closed) until release is closed.
type writeHold struct {
	client  int
	lock    string
	token   uint64
	caught  chan struct{}
	release chan struct{}
}

// writeHolds are the armed holds of a run's clients.
type writeHolds struct {
	mu    sync.Mutex
	holds []*writeHold
}

// arm holds client's next write of lock with token.
func (hs *writeHolds) arm(client int, lock string, token uint64) *writeHold {
	h := &writeHold{client: client, lock: lock, token: token, caught: make(chan struct{}), release: make(chan struct{})}
	hs.mu.Lock()
	hs.holds = append(hs.holds, h)
	hs.mu.Unlock()
	return h
}

// disarm forgets h if it has not caught a write yet.
func (hs *writeHolds) disarm(h *writeHold) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	for i, o := range hs.holds {
		if o == h {
			hs.holds = append(hs.holds[:i], hs.holds[i+1:]...)
			return
		}
	}
}

// await, called with each write before the resource decides it, blocks
// while an armed hold catches it.
func (hs *writeHolds) await(client int, m message) {
	hs.mu.Lock()
	var h *writeHold
	for i, o := range hs.holds {
		if o.client == client && o.lock == m.Lock && o.token == m.Token {
			h = o
			hs.holds = append(hs.holds[:i], hs.holds[i+1:]...)
			break
		}
	}
	hs.mu.Unlock()
	if h == nil {
		return
	}
	close(h.caught)
	<-h.release
}

// lateWrite injects faultLateWrite.
func (in *injector) lateWrite(ctx context.Context) (FaultRec, error) {
	c, hold, ok := in.awaitHolder(ctx)
	if !ok {
		return FaultRec{}, fmt.Errorf("%w: no client held a lock within %s", errSkipped, holderWait)
	}
	p := in.cs.procs[c]
	// Pinned, the holder keeps its lock (and keeps writing) until the
	// write is caught.
	unpin, err := in.pin(ctx, c, hold)
	if err != nil {
		return FaultRec{}, err
	}
	defer unpin()
	h := in.cs.holds.arm(c, hold.Lock, hold.Token)
	t := time.NewTimer(lateWriteCatch)
	select {
	case <-h.caught:
		t.Stop()
	case <-t.C:
		in.cs.holds.disarm(h)
		select {
		case <-h.caught: // caught meanwhile
		default:
			return FaultRec{}, fmt.Errorf("%w: client%d wrote nothing with %s token %d within %s", errSkipped, c, hold.Lock, hold.Token, lateWriteCatch)
		}
	case <-ctx.Done():
		in.cs.holds.disarm(h)
		select {
		case <-h.caught:
			close(h.release)
		default:
		}
		return FaultRec{}, fmt.Errorf("%w: %v", errSkipped, ctx.Err())
	}
	rec := FaultRec{Kind: faultLateWrite, Target: fmt.Sprintf("client%d", c), Start: monoNow(),
		Note: fmt.Sprintf("(its write with %s token %d held)", hold.Lock, hold.Token), Lock: hold.Lock, Token: hold.Token}
	in.hist.beginFault(rec)
	p.signal(syscall.SIGSTOP)
	deadline := time.Now().Add(in.cfg.TTL + in.cfg.LockDelay + lateWriteExtra)
	landed := false
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if in.hist.acceptedAbove(hold.Lock, hold.Token) {
			landed = true
			break
		}
		sleep(ctx, 50*time.Millisecond)
	}
	close(h.release) // the write lands now, its client still stopped
	if landed {
		rec.Note += ", " + lateAfterNewerNote
	} else {
		rec.Note += ", landed before any newer holder wrote"
	}
	in.awaitDecided(c, hold.Lock, hold.Token, rec.Start)
	p.signal(syscall.SIGCONT)
	rec.End = monoNow()
	return rec, nil
}

// awaitDecided waits (at most a few seconds) until the resource decided a
// write of client with lock and token after from: the held write.
func (in *injector) awaitDecided(client int, lock string, token uint64, from int64) {
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if in.hist.decidedAfter(client, lock, token, from) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// acceptedAbove reports whether a write of lock with a token above token
// was accepted.
func (h *historyLog) acceptedAbove(lock string, token uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range h.writes {
		if w.Accepted && w.Lock == lock && w.Token > token {
			return true
		}
	}
	return false
}

// decidedAfter reports whether a write of client with lock and token was
// decided after from.
func (h *historyLog) decidedAfter(client int, lock string, token uint64, from int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range h.writes {
		if w.Client == client && w.Lock == lock && w.Token == token && w.At > from {
			return true
		}
	}
	return false
}
