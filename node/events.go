package node

import (
	"sync"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/sequencer"
)

// maxGrantTimes bounds eventLog.grantAt: past it, new grants get no
// local time (the overview then shows the log entry's time, or none).
const maxGrantTimes = 1 << 17

// eventLog keeps the recent events this replica applied, for the status
// page (GET /v1/overview), and wakes the overview's blocking queries. It
// is fed from inside Apply (Node.onEvent, with the FSM locked): record
// never blocks nor reads the FSM. Session ids stay inside: answers name
// sessions by handle and name.
type eventLog struct {
	mu sync.Mutex
	// ring holds the last MaxOverviewEvents, oldest first from ring[start]
	// on (a circular buffer: a full log overwrites its oldest entry
	// instead of moving the others down, which every replica did for
	// every event).
	ring  []recorded
	start int
	seq   uint64
	// changed is closed and replaced on every recorded event (nil until
	// first asked for).
	changed chan struct{}
	// names are the names of the open sessions this replica saw opened.
	names map[string]string
	// grantAt is when each grant still held was made (by the entry's
	// clock), by token: a fallback for grants whose log entry is
	// compacted.
	grantAt map[uint64]time.Time
}

// recorded is one event as kept, at the time of its entry (the
// proposing leader's clock); the session id only to resolve its name
// later, never shown.
type recorded struct {
	seq     uint64
	at      time.Time
	e       fsm.Event
	session string // the session's name, when known
}

// wake returns a channel closed at the next recorded event.
func (l *eventLog) wake() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.changed == nil {
		l.changed = make(chan struct{})
	}
	return l.changed
}

// record keeps e if the page shows its kind, and wakes the waiting
// overviews on any event.
func (l *eventLog) record(e fsm.Event) {
	// The entry's time by the proposing leader's clock: the same on every
	// replica, and right when a restarted node replays its log.
	now := time.Now()
	if e.Now > 0 {
		now = time.Unix(0, e.Now)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
	if l.names == nil {
		l.names, l.grantAt = make(map[string]string), make(map[uint64]time.Time)
	}
	switch e.Kind {
	case fsm.EventSessionOpened:
		if e.Name != "" { // an unnamed session costs no entry
			l.names[e.Session] = e.Name
		}
	case fsm.EventSessionRemoved:
		delete(l.names, e.Session)
	case fsm.EventGranted:
		if len(l.grantAt) < maxGrantTimes {
			l.grantAt[e.Token] = now
		}
	case fsm.EventRestored:
		clear(l.names)
		clear(l.grantAt)
	case fsm.EventWaitSet, fsm.EventWaitEnded, fsm.EventDelayStarted, fsm.EventReleased, fsm.EventRevoked:
	default:
		return // EventLockChanged: the other events say what changed
	}
	name := e.Name
	if name == "" {
		name = l.names[e.Session]
	}
	l.seq++
	r := recorded{seq: l.seq, at: now, e: e, session: name}
	if len(l.ring) < api.MaxOverviewEvents {
		l.ring = append(l.ring, r)
		return
	}
	l.ring[l.start] = r
	l.start = (l.start + 1) % len(l.ring)
}

// grantTimes returns when the grants in held (the tokens held now) were
// made, as far as this log saw them, and forgets the others.
func (l *eventLog) grantTimes(held map[uint64]bool) map[uint64]time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[uint64]time.Time, len(held))
	for tok, at := range l.grantAt {
		if held[tok] {
			out[tok] = at
		} else {
			delete(l.grantAt, tok)
		}
	}
	return out
}

// replies returns the recent events, newest first; sessionName resolves
// the name of a session the log did not see opened (nil: none).
func (l *eventLog) replies(sessionName func(id string) string) []api.EventReply {
	l.mu.Lock()
	rs := make([]recorded, 0, len(l.ring))
	rs = append(append(rs, l.ring[l.start:]...), l.ring[:l.start]...)
	l.mu.Unlock()
	out := make([]api.EventReply, 0, len(rs))
	for i := len(rs) - 1; i >= 0; i-- {
		out = append(out, eventReply(rs[i], sessionName))
	}
	return out
}

// eventReply turns a recorded event into its wire form.
func eventReply(r recorded, sessionName func(id string) string) api.EventReply {
	e := r.e
	out := api.EventReply{Seq: r.seq, At: r.at.UTC().Format(time.RFC3339Nano), Lock: e.Lock,
		Holder: e.Holder, SessionName: r.session}
	if e.Session != "" {
		out.SessionHandle = api.SessionHandle(e.Session)
		if out.SessionName == "" && sessionName != nil {
			out.SessionName = sessionName(e.Session)
		}
	}
	if e.Mode == sequencer.Exclusive || e.Mode == sequencer.Shared {
		out.Mode = e.Mode.String()
	}
	switch e.Kind {
	case fsm.EventSessionOpened:
		out.Kind = "session_opened"
	case fsm.EventSessionRemoved:
		out.Kind = "session_closed"
		if e.Expired {
			out.Kind = "session_expired"
		}
	case fsm.EventGranted:
		out.Kind, out.Token = "granted", e.Token
	case fsm.EventReleased:
		out.Kind, out.Token = "released", e.Token
	case fsm.EventWaitSet:
		out.Kind = "queued"
	case fsm.EventWaitEnded:
		out.Kind = "wait_ended"
		switch e.Reason {
		case fsm.WaitSessionGone:
			out.Reason = "session_gone"
		case fsm.WaitTimedOut:
			out.Reason = "timed_out"
		case fsm.WaitCancelled:
			out.Reason = "cancelled"
		}
	case fsm.EventDelayStarted:
		out.Kind = "lock_delay"
		out.DelayUntil = time.Unix(0, e.DelayUntil).UTC().Format(time.RFC3339Nano)
	case fsm.EventRestored:
		out.Kind = "restored"
	case fsm.EventRevoked:
		out.Kind, out.Token, out.Reason, out.RevokeKind = "revoked", e.Token, e.RevokeReason, e.RevokeKind
	}
	if e.Semaphore {
		slot := e.Slot
		out.Slot = &slot
	}
	return out
}
