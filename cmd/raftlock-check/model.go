package main

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"
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
//   - tokens are unknown for grants nobody saw; a later read names them;
//   - an acquire or release whose outcome is unknown may take effect at
//     any moment after its call, long after its client gave up on it (a
//     request held up in a frozen forwarder, an entry of a deposed leader
//     that the next one commits), until its session is gone: see
//     pendingEffect;
//   - a restore (kindRestore, one operation per lock for each restore the
//     checker made, from its call to its answer) puts the lock in a state
//     the history cannot know: the backup's holders and queues come back,
//     whatever happened since, and every grant made since may be gone. So
//     from the first restore on the lock is "wild": while no grant the
//     history shows holds it, a grant nobody in the history asked for
//     (a restored holder, a restored queue place, a session the backup
//     brings back) may take it and end at any moment (see ghostSession).
//     A grant the history shows, made after the restore, is as strict as
//     ever; and tokens keep rising: a new grant's token is above every
//     token seen before the restore (the restore's floor), while a grant
//     the backup held keeps its own, at or below it (see Floor).
//
// Everything else is strict: one holder at a time, a grant only of a free
// lock, strictly increasing tokens, idempotent grants returning the same
// token, reads naming exactly the current holder, and an acquire answered
// no_leader (nothing was appended), wait_timeout or wait_cancelled changing
// nothing.

// Model operation kinds beyond the client's: expire and close free every
// lock of a session (and end its pending effects); arm is the call of an
// operation whose outcome is unknown, which arms its pendingEffect.
//
// There is no operation for a server that gives up a waiter's place or
// grant on its own: an abandoned waiting request leaves both as they are
// (docs/DESIGN.md, "The queue"); only a release, the session's close or
// its expiry end a grant, and the client records every release it sends.
const (
	kindExpire  = "expire"
	kindArm     = "arm"
	kindRestore = "restore"
	// kindRevoke is an operator's revocation of the grant of Token
	// (revoke-grant), from its call to its answer: it frees the lock (in
	// its delay) if that grant holds it, and changes nothing otherwise.
	kindRevoke = "revoke"
	// kindMaxHold is the pendingEffect of a grant's hold limit, armed at
	// the earliest moment the cluster may revoke it (Op.limitAt): it frees
	// the lock (in its delay) if that grant still holds it.
	kindMaxHold = "max_hold"
)

// ghostSession is the Session of a lock held, after a restore, by a grant
// the history did not see made: a read names it, or it ends unseen.
const ghostSession = "?restored"

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
	// Effect is, for an arm, the kind of the operation it arms: acquire or
	// release.
	Effect string
	// Token is, for a revoke, the token of the grant revoked.
	Token uint64
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
	// Armed holds the pending effects that may still happen, in the
	// encoding of encodeEffects.
	Armed string
	// Wild: a restore happened; while free, the lock may be taken by a
	// grant the history did not see made (Ghost), at any moment.
	Wild bool
	// Ghost: the holder's grant came back with, or out of, a restore; it
	// may end at any moment without an operation. Session is
	// ghostSession until a read names the holder.
	Ghost bool
	// Floor is Last when the last restore happened: a grant the backup
	// held has a token at or below it; any grant made since, one above
	// every token before the restore.
	Floor uint64
	// Released are the holders that released the lock last (at most
	// maxReleased, oldest first), as session and holder joined by
	// fieldSep and separated by effectSep. The cluster answers a
	// release repeated after the first one took effect ok, even once
	// another holder has the lock (fsm.MaxRecentReleases, per session):
	// a client whose first answer was lost, or that released twice,
	// sends it. The model accepts that ok from these holders.
	Released string
}

// maxReleased bounds lockState.Released. The cluster remembers each
// session's last fsm.MaxRecentReleases releases, of any lock; the model
// keeps the last releases of each lock, which covers a repeat that
// follows its first within a few releases of the lock.
const maxReleased = 8

// releasedBy returns s once (session, holder) released it: freed, with
// the pair last in Released.
func (s lockState) releasedBy(session, holder string) lockState {
	ns := s.freed(false)
	var kept []string
	if s.Released != "" {
		kept = strings.Split(s.Released, effectSep)
	}
	kept = append(kept, session+fieldSep+holder)
	if len(kept) > maxReleased {
		kept = kept[len(kept)-maxReleased:]
	}
	ns.Released = strings.Join(kept, effectSep)
	return ns
}

// releasedRecently reports whether (session, holder) is in s.Released.
func (s lockState) releasedRecently(session, holder string) bool {
	if s.Released == "" {
		return false
	}
	return slices.Contains(strings.Split(s.Released, effectSep), session+fieldSep+holder)
}

// restoredToken reports whether token can be that of a grant of s's
// restored state: one the backup held (at or below Floor), or one made
// after the restore (above Last).
func (s lockState) restoredToken(token uint64) bool {
	return token <= s.Floor || token > s.Last
}

func (s lockState) free() bool { return s.Session == "" }

func (s lockState) heldBy(session, holder string) bool {
	return s.Session == session && s.Holder == holder && s.Session != ""
}

func (s lockState) freed(delayed bool) lockState {
	return lockState{Last: s.Last, Delayed: delayed, Armed: s.Armed, Wild: s.Wild, Floor: s.Floor, Released: s.Released}
}

// granted is s after a grant to (session, holder) with token (0: unknown).
func (s lockState) granted(session, holder string, token uint64) lockState {
	last := s.Last
	if token > last {
		last = token
	}
	return lockState{Session: session, Holder: holder, Token: token, Last: last, Armed: s.Armed, Wild: s.Wild, Floor: s.Floor,
		Released: s.Released}
}

// ghost is s held by a grant of the restored state (ghostSession), which
// the history did not see made.
func (s lockState) ghost() lockState {
	return lockState{Session: ghostSession, Last: s.Last, Armed: s.Armed, Wild: true, Ghost: true, Floor: s.Floor, Released: s.Released}
}

// restored is the lock just after a restore: held by the backup's holder
// or free (its ghost may end at once), wild from then on. The armed
// effects stay armed (leniently: a request aborted by the restore never
// takes effect).
func (s lockState) restored() lockState {
	s.Floor = s.Last
	return s.ghost()
}

// unseen returns the states a wild lock may move to without any
// operation: a free lock taken by a ghost grant, a ghost grant ended
// (freed, maybe in a lock-delay). None for a lock that is not wild.
func (s lockState) unseen() []lockState {
	switch {
	case !s.Wild:
		return nil
	case s.free():
		return []lockState{s.ghost()}
	case s.Ghost:
		return []lockState{s.freed(true)}
	}
	return nil
}

// pendingEffect is what an acquire or a release whose outcome is unknown
// may still do to the lock, once, at any moment after its call: an acquire
// grants the lock to its holder if it is free (token unknown), a release
// frees it if its holder holds it. An effect that would change nothing is
// the same as one that never happens.
//
// The history could hold such an operation as one that never returns, but
// porcupine then searches every order of the pending operations that have
// and have not been linearized yet, doubling its work with each: one
// effect that happened late (a grant that a read sees after the client
// gave up) behind a dozen unknown acquires made it give up. Armed in the
// state instead, at the call (kindArm), the pending effects cost the search
// nothing until they happen: settle lets them happen, each at most once and
// in any order, before every later operation. The two encodings accept
// the same histories (TestArmedEffectsAcceptWhatPendingOperationsAccept).
// The expiry of a session never seen gone stays an operation that never
// returns: there are few, their calls far apart, and armed they would
// multiply the states (a grant, the holder's expiry, the next grant...).
//
// The session's close or expiry disarms its effects: the state machine
// refuses an acquire or a release of a session it does not have, and a
// session id is never used again, so nothing of a session happens after
// it is gone.
type pendingEffect struct {
	Kind, Session, Holder string
}

// fire returns the state after e happens in s, and false if it would
// change nothing there.
func (e pendingEffect) fire(s lockState) (lockState, bool) {
	switch e.Kind {
	case kindAcquire:
		if s.free() {
			return s.granted(e.Session, e.Holder, 0), true
		}
	case kindRelease:
		if s.heldBy(e.Session, e.Holder) {
			return s.releasedBy(e.Session, e.Holder), true
		}
	case kindMaxHold:
		if s.heldBy(e.Session, e.Holder) {
			return s.freed(true), true
		}
	}
	return s, false
}

// Separators of encodeEffects; session and holder ids never contain them.
const (
	effectSep = "\x1e"
	fieldSep  = "\x1f"
)

// encodeEffects encodes a multiset of effects as a string (so that
// lockState stays comparable): sorted, so that equal multisets are equal
// strings.
func encodeEffects(es []pendingEffect) string {
	es = slices.Clone(es)
	slices.SortFunc(es, func(a, b pendingEffect) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Session, b.Session), cmp.Compare(a.Holder, b.Holder))
	})
	return joinEffects(es)
}

// joinEffects encodes effects that are sorted already.
func joinEffects(es []pendingEffect) string {
	var sb strings.Builder
	for i, e := range es {
		if i > 0 {
			sb.WriteString(effectSep)
		}
		sb.WriteString(e.Kind + fieldSep + e.Session + fieldSep + e.Holder)
	}
	return sb.String()
}

// effects decodes s.Armed.
func (s lockState) effects() []pendingEffect {
	if s.Armed == "" {
		return nil
	}
	parts := strings.Split(s.Armed, effectSep)
	es := make([]pendingEffect, len(parts))
	for i, p := range parts {
		f := strings.SplitN(p, fieldSep, 3)
		es[i] = pendingEffect{Kind: f[0], Session: f[1], Holder: f[2]}
	}
	return es
}

// arm returns s with e armed.
func (s lockState) arm(e pendingEffect) lockState {
	s.Armed = encodeEffects(append(s.effects(), e))
	return s
}

// disarm returns s without the effects of session.
func (s lockState) disarm(session string) lockState {
	if s.Armed == "" {
		return s
	}
	s.Armed = encodeEffects(slices.DeleteFunc(s.effects(), func(e pendingEffect) bool { return e.Session == session }))
	return s
}

// settle is settleStates (model_settle.go) for the lock model.
func settle(ss []lockState) []lockState { return settleStates(ss) }

// fire returns the state after e happens in s (none if it would change
// nothing there), for settleStates.
func (s lockState) fire(e pendingEffect) []lockState {
	if next, ok := e.fire(s); ok {
		return []lockState{next}
	}
	return nil
}

// withArmed returns s with Armed set to armed.
func (s lockState) withArmed(armed string) lockState {
	s.Armed = armed
	return s
}

// core is s without its armed effects.
func (s lockState) core() lockState {
	s.Armed = ""
	return s
}

// stepLock returns every state the lock may be in after the operation, none
// if the operation cannot have had this outcome in state s. The armed
// effects of s happen only in settle, before it.
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
		s = s.disarm(in.Session)
		if !s.free() && s.Session == in.Session {
			return one(s.freed(true))
		}
		return one(s)
	case kindClose:
		s = s.disarm(in.Session)
		if !s.free() && s.Session == in.Session {
			return one(s.freed(false))
		}
		return one(s)
	case kindArm:
		return one(s.arm(pendingEffect{Kind: in.Effect, Session: in.Session, Holder: in.Holder}))
	case kindRestore:
		return one(s.restored())
	case kindRevoke:
		switch {
		case s.free() || s.Session == ghostSession:
			return one(s)
		case s.Token == in.Token:
			return one(s.freed(true))
		case s.Token == 0:
			return []lockState{s, s.freed(true)} // a grant nobody saw the token of
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
		case s.Session == ghostSession && s.restoredToken(out.Token):
			// After a restore: the grant of the restored state may be this
			// holder's (a retry finds it, token and all).
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
			return []lockState{s.releasedBy(in.Session, in.Holder)}
		case s.free():
			return []lockState{s}
		case !in.Unlock:
			// Dequeues the abandoned waiter (session, holder).
			return []lockState{s}
		case s.releasedRecently(in.Session, in.Holder):
			// A repeated release: the first one took effect.
			return []lockState{s}
		}
		return nil
	case resNotHolder:
		switch {
		case mine:
			// A retry after an attempt whose outcome was unknown: that
			// attempt released it, and someone else took it since.
			return []lockState{s.releasedBy(in.Session, in.Holder)}
		case !s.free():
			return []lockState{s}
		}
		return nil
	default:
		// Unknown, or not_found: the session is gone (its expiry frees
		// what it held), but an earlier attempt of the call may have
		// released the lock before it went.
		if mine {
			return []lockState{s, s.releasedBy(in.Session, in.Holder)}
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
		if s.Session == ghostSession {
			if !s.restoredToken(h.Token) {
				return nil
			}
			// The read names the grant the restore brought: any holder,
			// a token the backup held or a new one.
			ns := s.granted(h.Session, h.Holder, h.Token)
			ns.Ghost = true
			return []lockState{ns}
		}
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
// by lock. Its state is a lockStates: every state the lock may be in.
func lockModel() porcupine.Model {
	return porcupine.Model{
		Partition: partitionByLock,
		Init:      func() interface{} { return lockStates{{}} },
		Step: func(state, input, output interface{}) (bool, interface{}) {
			var next []lockState
			for _, s := range settle(state.(lockStates)) {
				next = append(next, stepLock(s, input.(lockInput), output.(lockOutput))...)
			}
			r := reduce(next)
			return len(r) > 0, r
		},
		Equal: func(a, b interface{}) bool { return slices.Equal(a.(lockStates), b.(lockStates)) },
		Hash: func(state interface{}) uint64 {
			h := fnv.New64a()
			for _, s := range state.(lockStates) {
				fmt.Fprintf(h, "%s/%s/%d/%d/%t/%s/%t/%t/%d;", s.Session, s.Holder, s.Token, s.Last, s.Delayed, s.Armed, s.Wild, s.Ghost, s.Floor)
			}
			return h.Sum64()
		},
		DescribeOperation: describeLockOp,
		DescribeState: func(state interface{}) string {
			var ds []string
			for _, s := range state.(lockStates) {
				ds = append(ds, describeLockState(s))
			}
			return strings.Join(ds, " | ")
		},
	}
}

// lockStates is the state of the porcupine model: every state the lock may
// be in, as porcupine.NondeterministicModel's power set construction keeps
// it, but in the canonical form of reduce.
type lockStates []lockState

// reduce returns the canonical form of the states ss: sorted, without
// duplicates, and without a state that another one subsumes (see
// subsumes). A subsumed state adds nothing to what the set can do next,
// but it would make the set a new one for porcupine's cache; and there can
// be many: a wait given up and released may have been granted in between,
// or not, and each such pair would double the set.
func reduce(ss []lockState) lockStates {
	slices.SortFunc(ss, compareLockStates)
	ss = slices.Compact(ss)
	out := make(lockStates, 0, len(ss))
	for i, b := range ss {
		kept := true
		for j, a := range ss {
			if i != j && a.subsumes(b) {
				kept = false
				break
			}
		}
		if kept {
			out = append(out, b)
		}
	}
	return out
}

// subsumes reports whether s can do whatever t can: they differ only in
// that s has more effects armed (t's are a part of them). s can then match
// every step of t by letting the same effects happen (arm, disarm and
// settle keep t's effects a part of s's), never using its extra ones.
func (s lockState) subsumes(t lockState) bool {
	if s.Armed == t.Armed || len(s.Armed) <= len(t.Armed) {
		return false
	}
	if s.core() != t.core() {
		return false
	}
	// Both lists are sorted (encodeEffects): is t's a sub-multiset of s's?
	rest := s.Armed
	for t := t.Armed; t != ""; {
		var te string
		te, t, _ = strings.Cut(t, effectSep)
		for {
			if rest == "" {
				return false
			}
			var se string
			se, rest, _ = strings.Cut(rest, effectSep)
			if se == te {
				break
			}
			if se > te {
				return false
			}
		}
	}
	return true
}

// compareLockStates orders lock states (any total order will do).
func compareLockStates(a, b lockState) int {
	return cmp.Or(cmp.Compare(a.Session, b.Session), cmp.Compare(a.Holder, b.Holder), cmp.Compare(a.Token, b.Token),
		cmp.Compare(a.Last, b.Last), compareBool(a.Delayed, b.Delayed), cmp.Compare(a.Armed, b.Armed),
		compareBool(a.Wild, b.Wild), compareBool(a.Ghost, b.Ghost), cmp.Compare(a.Floor, b.Floor))
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// describeLockState describes one state the lock may be in.
func describeLockState(s lockState) string {
	armed := ""
	if n := len(s.effects()); n > 0 {
		armed = fmt.Sprintf(", %d unknown outcomes may still take effect", n)
	}
	if s.Wild {
		armed += ", restored: unseen grants may come and go"
	}
	if s.free() {
		d := ""
		if s.Delayed {
			d = ", maybe delayed"
		}
		return fmt.Sprintf("free (last token %d%s%s)", s.Last, d, armed)
	}
	if s.Session == ghostSession {
		return fmt.Sprintf("held by a grant of the restored state (last %d%s)", s.Last, armed)
	}
	tok := "?"
	if s.Token != 0 {
		tok = fmt.Sprint(s.Token)
	}
	return fmt.Sprintf("held by %s token %s (last %d%s)", short(s.Session, s.Holder), tok, s.Last, armed)
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
	case kindArm:
		return fmt.Sprintf("%s(%s) -> unknown: may take effect from here on", in.Effect, who)
	case kindRestore:
		return "restore (of a backup taken earlier in the run)"
	case kindRevoke:
		return fmt.Sprintf("revoke(token %d) by an operator", in.Token)
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
