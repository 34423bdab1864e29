package node

import (
	"slices"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/fsm"
)

// expiring is what the expiry line of a session says about it, read before
// its expiry is proposed (the session is gone after).
type expiring struct {
	id, name string
	held     []string // locks it holds
	waiting  []string // locks it waits for
}

// expiringSession reads session id's name and locks from the state machine.
func (n *Node) expiringSession(id string) expiring {
	e := expiring{id: id}
	rec, ok := n.fsm.Session(id)
	if !ok {
		return e
	}
	e.name = rec.Name
	for name := range rec.Locks {
		l, ok := n.fsm.Lock(name)
		if !ok {
			continue
		}
		if slices.ContainsFunc(l.Holders, func(h fsm.Holder) bool { return h.Session == id }) {
			e.held = append(e.held, name)
		} else {
			e.waiting = append(e.waiting, name)
		}
	}
	slices.Sort(e.held)
	slices.Sort(e.waiting)
	return e
}

// logExpired writes the line of an expired session: its name and handle,
// the locks it held and when their lock-delay ends (read after the expiry
// was applied), and the locks it waited for.
func (n *Node) logExpired(e expiring) {
	args := []any{"session", e.name, "session_handle", api.SessionHandle(e.id), "locks", e.held}
	var until time.Time
	for _, name := range e.held {
		l, ok := n.fsm.Lock(name)
		if ok && l.Delayed {
			if t := time.Unix(0, l.DelayUntil); t.After(until) {
				until = t
			}
		}
		for _, d := range l.SlotDelays { // a semaphore's slots (the latest end)
			if t := time.Unix(0, d.Until); t.After(until) {
				until = t
			}
		}
	}
	if !until.IsZero() {
		args = append(args, "lock_delay_until", until.UTC().Format(time.RFC3339Nano))
	} else if len(e.held) > 0 {
		args = append(args, "lock_delay", "none")
	}
	if len(e.waiting) > 0 {
		args = append(args, "waits_dropped", e.waiting)
	}
	n.log.Info("session expired", args...)
}
