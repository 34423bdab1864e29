package fsm

import (
	"container/list"

	"github.com/raftlock/raftlock/sequencer"
)

// Bounds of the grant histories. They are part of the state machine: every
// replica of a cluster must apply the same ones.
const (
	// MaxGrantHistory bounds a lock's history: it keeps its last
	// MaxGrantHistory grants.
	MaxGrantHistory = 32
	// MaxFreeGrants bounds the histories that free locks leave behind:
	// together they hold at most MaxFreeGrants grants, and the history of
	// the lock freed longest ago goes first.
	MaxFreeGrants = 4096
)

// PastGrant is one grant in a lock's history: what a reader may know of
// it. It names the holder's session by its name, never by its id (a
// secret capability).
type PastGrant struct {
	Token       uint64         `json:"token"`
	Mode        sequencer.Mode `json:"mode"`
	Holder      string         `json:"holder"`
	Value       string         `json:"value,omitempty"`
	SessionName string         `json:"session_name,omitempty"`
	// Permits is the lock's permits when granted (0: a plain lock); Slot
	// the slot granted on a semaphore.
	Permits uint64 `json:"permits,omitempty"`
	Slot    uint64 `json:"slot,omitempty"`
}

// record appends a grant to l's history and drops the oldest grants beyond
// MaxGrantHistory. The session is named by its name, never its id.
func (f *FSM) record(l *Lock, h Holder, m sequencer.Mode) {
	var name string
	if s := f.sessions[h.Session]; s != nil {
		name = s.Name
	}
	if l.GrantsSince == 0 {
		// Recorded before histories: complete since the snapshot that
		// forgot them.
		l.GrantsSince = f.forgot + 1
	}
	l.Grants = append(l.Grants, PastGrant{Token: h.Token, Mode: m, Holder: h.Holder, Value: h.Value, SessionName: name,
		Permits: l.Permits, Slot: h.Slot})
	if n := len(l.Grants) - MaxGrantHistory; n > 0 {
		l.GrantsSince = l.Grants[n-1].Token + 1
		copy(l.Grants, l.Grants[n:])
		clear(l.Grants[MaxGrantHistory:])
		l.Grants = l.Grants[:MaxGrantHistory]
	}
}

// keepFree keeps the history of a lock that has just become free at entry
// index (if it has one), and drops the histories freed longest ago while
// the free ones hold more than MaxFreeGrants grants.
func (f *FSM) keepFree(index uint64, l *Lock) {
	if len(l.Grants) == 0 {
		f.dropChange(l.Index) // nothing kept: a prefix watcher must re-list
		return
	}
	if e := f.freeAt[l.Name]; e != nil {
		f.dropFree(e) // not reached: a stored lock has no free history
	}
	l.Holders, l.Waiters, l.Permits = nil, nil, 0 // a free lock is of no kind
	f.freeAt[l.Name] = f.free.PushBack(l)
	f.freeGrants += len(l.Grants)
	for f.freeGrants > MaxFreeGrants {
		f.dropChange(f.free.Front().Value.(*Lock).Index)
		f.dropFree(f.free.Front())
		f.forgot = max(f.forgot, index)
	}
}

// takeFree removes the history the free lock name left behind and returns
// it as the lock to store again (nil if none is kept).
func (f *FSM) takeFree(name string) *Lock {
	e := f.freeAt[name]
	if e == nil {
		return nil
	}
	l := e.Value.(*Lock)
	f.dropFree(e)
	return l
}

func (f *FSM) dropFree(e *list.Element) {
	l := f.free.Remove(e).(*Lock)
	delete(f.freeAt, l.Name)
	f.freeGrants -= len(l.Grants)
}
