package main

import (
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/anishathalye/porcupine"
)

// The lock model: the sequential specification of one exclusive lock that
// the history of each lock must linearize to. It is nondeterministic where
// a client cannot know what happened (an unknown outcome may or may not
// have taken effect) and deliberately lenient where the service is allowed
// to differ from a plain lock:
//
//   - a session's expiry frees its lock without a client operation; the
//     history holds one synthetic "expire" operation per session, from the
//     last moment it was known alive to the first moment it was known gone;
//   - after an expiry the lock may stay unavailable for the lock-delay; the
//     model does not know time, so a free lock whose holder expired may
//     answer busy until the next grant;
//   - tokens are unknown for grants nobody saw; a later read names them.
//
// Everything else is strict: one holder at a time, a grant only of a free
// lock, strictly increasing tokens, idempotent grants returning the same
// token, reads naming exactly the current holder, and an acquire answered
// no_leader (nothing was appended), wait_timeout or wait_cancelled changing
// nothing.

// Model operation kinds beyond the client's: expire and close free every
// lock of a session; drop is the release a server may do on its own of an
// abandoned waiting acquire.
const (
	kindExpire = "expire"
	kindDrop   = "drop"
)

// lockInput is an operation on one lock.
type lockInput struct {
	Kind    string
	Lock    string
	Session string
	Holder  string
	Wait    bool
	// Unlock: a release of a lock the client was granted (not the clean-up
	// of an abandoned acquire, which may dequeue a waiter instead).
	Unlock bool
}

// lockOutput is an operation's outcome.
type lockOutput struct {
	Result  string
	Token   uint64
	Holders []holderInfo
}

// lockState is the state of one lock.
type lockState struct {
	// Session and Holder name the holder; Session is "" when free.
	Session, Holder string
	// Token is the holder's token, 0 if no one saw it yet.
	Token uint64
	// Last is the highest token known to have been granted.
	Last uint64
	// Delayed: free, and maybe in the lock-delay of an expired holder.
	Delayed bool
}

func (s lockState) free() bool { return s.Session == "" }

func (s lockState) heldBy(session, holder string) bool {
	return s.Session == session && s.Holder == holder && s.Session != ""
}

func (s lockState) freed(delayed bool) lockState {
	return lockState{Last: s.Last, Delayed: delayed}
}

// granted is s after a grant to (session, holder) with token (0: unknown).
func (s lockState) granted(session, holder string, token uint64) lockState {
	last := s.Last
	if token > last {
		last = token
	}
	return lockState{Session: session, Holder: holder, Token: token, Last: last}
}

// stepLock returns every state the lock may be in after the operation, none
// if the operation cannot have had this outcome in state s.
func stepLock(s lockState, in lockInput, out lockOutput) []lockState {
	one := func(ns lockState) []lockState { return []lockState{ns} }
	switch in.Kind {
	case kindAcquire:
		return stepAcquire(s, in, out)
	case kindRelease:
		return stepRelease(s, in, out)
	case kindRead:
		return stepRead(s, out)
	case kindExpire:
		if !s.free() && s.Session == in.Session {
			return one(s.freed(true))
		}
		return one(s)
	case kindClose:
		if !s.free() && s.Session == in.Session {
			return one(s.freed(false))
		}
		return one(s)
	case kindDrop:
		if s.heldBy(in.Session, in.Holder) {
			return []lockState{s, s.freed(false)}
		}
		return one(s)
	}
	return nil
}

func stepAcquire(s lockState, in lockInput, out lockOutput) []lockState {
	mine := s.heldBy(in.Session, in.Holder)
	switch out.Result {
	case resOK:
		switch {
		case mine && s.Token == out.Token:
			return []lockState{s}
		case mine && s.Token == 0 && out.Token > s.Last:
			return []lockState{s.granted(in.Session, in.Holder, out.Token)}
		case s.free() && out.Token > s.Last:
			return []lockState{s.granted(in.Session, in.Holder, out.Token)}
		}
		return nil
	case resBusy:
		if (!s.free() && !mine) || (s.free() && s.Delayed) {
			return []lockState{s}
		}
		return nil
	case resWaitTimeout, resWaitCancelled, resNoLeader:
		// The wait ended without a grant, or (no_leader) nothing was
		// appended: the lock is as it was.
		return []lockState{s}
	default:
		// not_found (an earlier attempt of the call may have been granted
		// before the session went) and unknown outcomes: granted or not.
		if s.free() {
			return []lockState{s, s.granted(in.Session, in.Holder, 0)}
		}
		return []lockState{s}
	}
}

func stepRelease(s lockState, in lockInput, out lockOutput) []lockState {
	mine := s.heldBy(in.Session, in.Holder)
	switch out.Result {
	case resOK:
		switch {
		case mine:
			return []lockState{s.freed(false)}
		case s.free():
			return []lockState{s}
		case !in.Unlock:
			// Dequeues the abandoned waiter (session, holder).
			return []lockState{s}
		}
		return nil
	case resNotHolder:
		switch {
		case mine:
			// A retry after an attempt whose outcome was unknown: that
			// attempt released it, and someone else took it since.
			return []lockState{s.freed(false)}
		case !s.free():
			return []lockState{s}
		}
		return nil
	default:
		// Unknown, or not_found: the session is gone (its expiry frees
		// what it held), but an earlier attempt of the call may have
		// released the lock before it went.
		if mine {
			return []lockState{s, s.freed(false)}
		}
		return []lockState{s}
	}
}

func stepRead(s lockState, out lockOutput) []lockState {
	switch len(out.Holders) {
	case 0:
		if s.free() {
			return []lockState{s}
		}
	case 1:
		h := out.Holders[0]
		if !s.heldBy(h.Session, h.Holder) {
			return nil
		}
		if s.Token == h.Token {
			return []lockState{s}
		}
		if s.Token == 0 && h.Token > s.Last {
			return []lockState{s.granted(h.Session, h.Holder, h.Token)}
		}
	}
	return nil
}

// lockModel is the porcupine model of a history of many locks, partitioned
// by lock.
func lockModel() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: partitionByLock,
		Init:      func() []interface{} { return []interface{}{lockState{}} },
		Step: func(state, input, output interface{}) []interface{} {
			next := stepLock(state.(lockState), input.(lockInput), output.(lockOutput))
			out := make([]interface{}, len(next))
			for i, s := range next {
				out[i] = s
			}
			return out
		},
		Equal: func(a, b interface{}) bool { return a.(lockState) == b.(lockState) },
		Hash: func(state interface{}) uint64 {
			s := state.(lockState)
			h := fnv.New64a()
			fmt.Fprintf(h, "%s/%s/%d/%d/%t", s.Session, s.Holder, s.Token, s.Last, s.Delayed)
			return h.Sum64()
		},
		DescribeOperation: describeLockOp,
		DescribeState: func(state interface{}) string {
			s := state.(lockState)
			if s.free() {
				d := ""
				if s.Delayed {
					d = ", maybe delayed"
				}
				return fmt.Sprintf("free (last token %d%s)", s.Last, d)
			}
			tok := "?"
			if s.Token != 0 {
				tok = fmt.Sprint(s.Token)
			}
			return fmt.Sprintf("held by %s token %s (last %d)", short(s.Session, s.Holder), tok, s.Last)
		},
	}
	return nm.ToModel()
}

// partitionByLock splits a history into one per lock.
func partitionByLock(history []porcupine.Operation) [][]porcupine.Operation {
	idx := map[string]int{}
	var parts [][]porcupine.Operation
	for _, op := range history {
		l := op.Input.(lockInput).Lock
		i, ok := idx[l]
		if !ok {
			i = len(parts)
			idx[l] = i
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], op)
	}
	return parts
}

func describeLockOp(input, output interface{}) string {
	in, out := input.(lockInput), output.(lockOutput)
	who := short(in.Session, in.Holder)
	switch in.Kind {
	case kindAcquire:
		mode := "try"
		if in.Wait {
			mode = "wait"
		}
		if out.Result == resOK {
			return fmt.Sprintf("acquire(%s, %s) -> token %d", who, mode, out.Token)
		}
		return fmt.Sprintf("acquire(%s, %s) -> %s", who, mode, out.Result)
	case kindRelease:
		return fmt.Sprintf("release(%s) -> %s", who, out.Result)
	case kindRead:
		var hs []string
		for _, h := range out.Holders {
			hs = append(hs, fmt.Sprintf("%s@%d", short(h.Session, h.Holder), h.Token))
		}
		return fmt.Sprintf("read -> [%s]", strings.Join(hs, " "))
	case kindExpire:
		return fmt.Sprintf("expire(session %s)", short(in.Session, ""))
	case kindClose:
		return fmt.Sprintf("close(session %s)", short(in.Session, ""))
	case kindDrop:
		return fmt.Sprintf("server may drop(%s)", who)
	}
	return fmt.Sprintf("%s(%s) -> %s", in.Kind, who, out.Result)
}

// short abbreviates a session id and holder id for display.
func short(session, holder string) string {
	cut := func(s string) string {
		if len(s) > 6 {
			return s[:6]
		}
		return s
	}
	if holder == "" {
		return cut(session)
	}
	return cut(session) + "/" + cut(holder)
}
