package main

import (
	"fmt"
	"sort"
)

// sessionFacts is what a history proves about one session's life.
type sessionFacts struct {
	ID     string
	Client int
	// TTL is the lease the cluster granted.
	TTL int64
	// Opened is the call time of the open that created it.
	Opened int64
	// Alive holds the call times of the acknowledged keepalives (and of
	// the open), sorted: the session existed when each was served, so its
	// server deadline is at least each of them plus TTL.
	Alive []int64
	// GoneAt is the earliest return of an operation answered
	// session_not_found (pending if none): the session was gone by then.
	GoneAt int64
	// GoneKind is the kind of that operation.
	GoneKind string
	// ExpiredAt is when its client declared it expired (pending if never),
	// ExpiredErr the cause it gave.
	ExpiredAt  int64
	ExpiredErr string
	// ClosedOK: a close was acknowledged; CloseCall is when it was sent
	// (pending if never).
	ClosedOK  bool
	CloseCall int64
	// Locks are the locks the session tried to acquire.
	Locks map[string]bool
}

// LastAlive is the last moment the session was known to exist.
func (f *sessionFacts) LastAlive() int64 { return f.Alive[len(f.Alive)-1] }

// LostAt is when the session was first known to be lost: reported gone by
// the cluster or declared expired by its client (pending if neither).
func (f *sessionFacts) LostAt() int64 { return min(f.GoneAt, f.ExpiredAt) }

// lostHow says how the session was first known to be lost (see LostAt).
func (f *sessionFacts) lostHow() string {
	if f.GoneAt <= f.ExpiredAt {
		return fmt.Sprintf("reported gone by the cluster: session_not_found to a call of kind %s", f.GoneKind)
	}
	return fmt.Sprintf("declared expired by its client: %s", f.ExpiredErr)
}

// aliveAfter reports whether the session provably existed at some moment
// after t: an acknowledged keepalive sent at k proves it existed when it
// was served (after k) and kept it until at least k+TTL.
func (f *sessionFacts) aliveAfter(t int64) bool {
	return len(f.Alive) > 0 && f.LastAlive()+f.TTL > t
}

// sessionsOf gathers the facts of every session opened in h.
func sessionsOf(h History) map[string]*sessionFacts {
	ss := map[string]*sessionFacts{}
	for _, o := range h.Ops {
		if o.Kind == kindOpen && o.Result == resOK && o.Session != "" {
			ss[o.Session] = &sessionFacts{ID: o.Session, Client: o.Client, TTL: o.TTL, Opened: o.Call,
				Alive: []int64{o.Call}, GoneAt: pending, ExpiredAt: pending, CloseCall: pending, Locks: map[string]bool{}}
		}
	}
	for _, o := range h.Ops {
		f := ss[o.Session]
		if f == nil {
			continue
		}
		switch {
		case o.Kind == kindKeepAlive && o.Result == resOK:
			f.Alive = append(f.Alive, o.Call)
			if o.TTL > 0 {
				f.TTL = o.TTL
			}
		case o.Kind == kindAcquire:
			f.Locks[o.Lock] = true
		case o.Kind == kindClose:
			if o.Call < f.CloseCall {
				f.CloseCall = o.Call
			}
			if o.Result == resOK {
				f.ClosedOK = true
			}
		}
		if o.Result == resNotFound && o.Done() && o.Return < f.GoneAt && o.Call < f.CloseCall {
			f.GoneAt, f.GoneKind = o.Return, o.Kind
		}
	}
	for _, e := range h.Expiries {
		if f := ss[e.Session]; f != nil && e.At < f.ExpiredAt {
			f.ExpiredAt, f.ExpiredErr = e.At, e.Err
		}
	}
	for _, f := range ss {
		sort.Slice(f.Alive, func(i, j int) bool { return f.Alive[i] < f.Alive[j] })
		// A not_found answer to a call sent after a close is the close's
		// doing, not an expiry.
		if f.GoneAt != pending && f.CloseCall != pending && f.GoneAt > f.CloseCall {
			f.GoneAt, f.GoneKind = pending, ""
		}
	}
	return ss
}
