package node

import (
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/sequencer"
)

// The acquires of one term that wait for their outcome. An acquire that
// queued registers here before it proposes (so that no grant slips by
// unseen) and waits for the state machine's event that grants it or ends
// its wait; the term's end answers it unknown_outcome (Acquire).

// waitKey names one waiting acquire.
type waitKey struct{ lock, session, holder string }

// waitResult answers a waiting acquire: a grant (token > 0) or the end of
// the wait without one.
type waitResult struct {
	token uint64
	mode  sequencer.Mode
	slot  uint64      // the semaphore slot granted
	why   fsm.WaitEnd // without a grant: why the wait ended
}

func (t *leaderTerm) notifyWait(k waitKey, r waitResult) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ch := range t.waits[k] {
		select {
		case ch <- r:
		default:
		}
	}
}

// addWait registers a waiter before its acquire is proposed, so that no
// grant can slip by unseen.
func (t *leaderTerm) addWait(k waitKey) chan waitResult {
	ch := make(chan waitResult, 1)
	t.mu.Lock()
	t.waits[k] = append(t.waits[k], ch)
	t.mu.Unlock()
	return ch
}

func (t *leaderTerm) removeWait(k waitKey, ch chan waitResult) {
	t.mu.Lock()
	defer t.mu.Unlock()
	chans := t.waits[k]
	for i, c := range chans {
		if c == ch {
			chans = append(chans[:i:i], chans[i+1:]...)
			break
		}
	}
	if len(chans) == 0 {
		delete(t.waits, k)
	} else {
		t.waits[k] = chans
	}
}

// placeKept reports whether (lock, session, holder) waits in mode m (on a
// lock of those permits) on this leader with at least half of a wait of d still to run: a renewal
// (a client re-asking after its request slice) then needs no Raft write,
// the request just waits for the outcome. A read of the local state on a
// leader that may have been deposed without knowing is harmless here: it
// grants nothing, and the request learns the outcome or ends.
func (t *leaderTerm) placeKept(k waitKey, m sequencer.Mode, permits uint64, d time.Duration) bool {
	n := t.n
	if !n.ready.Load() {
		return false
	}
	l, ok := n.fsm.Lock(k.lock)
	if !ok || l.Permits != permits {
		return false // a mismatch is the state machine's to answer
	}
	for _, w := range l.Waiters {
		if w.Session != k.session || w.Holder != k.holder {
			continue
		}
		if w.Mode != m {
			return false
		}
		due, armed := t.due(waitTimerKey{k, w.WaitSet})
		return armed && !due.Before(time.Now().Add(d/2))
	}
	return false
}
