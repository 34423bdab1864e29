package main

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// The semaphore model: the sequential specification of one semaphore of N
// permits (a --permits N run) that the history of each lock must
// linearize to. It takes the lock model's operations (modelOps: acquires,
// releases, reads, the expiry or close of each session, arms of unknown
// outcomes, revocations) and keeps, per slot, its holder and token:
//
//   - at most N holders, each in its own slot below N; a holder id holds
//     one slot, and a retry of its acquire returns that slot and token;
//   - a grant takes the lowest slot that is neither held nor in
//     lock-delay. The model does not know time, so it does not know when
//     a delay ends: a slot freed by an expiry or a revocation is "maybe
//     delayed" until its next grant, and a grant may take any free slot
//     whose lower slots are all held or maybe delayed (a slot freed by a
//     release or a close is grantable at once, so a grant may not skip
//     it);
//   - tokens rise: a grant's token is above every token granted before
//     (equal to the last only beside a holder of that token: one entry
//     may grant two waiters), and a token nobody saw (a grant of unknown
//     outcome) is bounded by the tokens granted before and after it until
//     a read or a retry names it;
//   - a try answered busy finds every slot held or maybe delayed;
//   - a read names exactly the holders, slot and token, of some moment
//     between its call and return;
//   - unknown outcomes, expiries, closes and revocations as in the lock
//     model (model.go): an armed acquire may take any slot a grant could
//     take, at any moment after its call, until its session is gone.
//
// Not modelled: the queue (the queue checks judge it,
// queuechecks_sem.go), and restores (a history with one is not checked:
// the backup's slots come back unseen), and semaphores above
// semMaxPermits.

// semMaxPermits bounds the permits the semaphore model takes.
const semMaxPermits = 8

// semInput is an operation on one semaphore: the lock model's.
type semInput struct{ lockInput }

// semOutput is its outcome; Slot is an acquire's granted slot.
type semOutput struct {
	lockOutput
	Slot uint64
}

// semSlot is one slot of a semaphore.
type semSlot struct {
	// Session and Holder name the holder; Session is "" when free.
	Session, Holder string
	// Token is the holder's token, 0 if no one saw it yet; then it is
	// above Lo and, if Hi is not 0, at most Hi (the tokens granted just
	// before and first after it).
	Token, Lo, Hi uint64
	// Delayed: free, and maybe in the lock-delay of an expired or revoked
	// holder.
	Delayed bool
}

func (s semSlot) free() bool { return s.Session == "" }

// semState is the state of one semaphore of N permits.
type semState struct {
	N     int
	Slots [semMaxPermits]semSlot
	// Last is the highest token known to have been granted.
	Last uint64
	// Armed holds the pending effects, as lockState.Armed.
	Armed string
}

// mine returns the slot that (session, holder) holds, or -1.
func (s semState) mine(session, holder string) int {
	for i := range s.N {
		if sl := s.Slots[i]; !sl.free() && sl.Session == session && sl.Holder == holder {
			return i
		}
	}
	return -1
}

// unavailable reports whether slot i cannot be granted now as far as the
// model knows: held, or maybe delayed.
func (s semState) unavailable(i int) bool { return !s.Slots[i].free() || s.Slots[i].Delayed }

// grantable returns the slots a grant may take: free, every lower slot
// held or maybe delayed.
func (s semState) grantable() []int {
	var out []int
	for i := range s.N {
		if s.Slots[i].free() {
			out = append(out, i)
		}
		if !s.unavailable(i) {
			break // the lowest grantable slot: no grant skips it
		}
	}
	return out
}

// full reports whether no slot is grantable for sure (a busy answer).
func (s semState) full() bool {
	for i := range s.N {
		if !s.unavailable(i) {
			return false
		}
	}
	return true
}

// newToken reports whether t may be the token of a new grant.
func (s semState) newToken(t uint64) bool {
	if t > s.Last {
		return true
	}
	if t == 0 || t != s.Last {
		return false
	}
	for i := range s.N {
		if !s.Slots[i].free() && s.Slots[i].Token == t {
			return true // granted by the same entry
		}
	}
	return false
}

// granted is s after slot i was granted to (session, holder) with token
// (0: unknown).
func (s semState) granted(i int, session, holder string, token uint64) semState {
	if token == 0 {
		s.Slots[i] = semSlot{Session: session, Holder: holder, Lo: s.Last}
		return s
	}
	for j := range s.N {
		if sl := &s.Slots[j]; !sl.free() && sl.Token == 0 && (sl.Hi == 0 || token < sl.Hi) {
			sl.Hi = token
		}
	}
	s.Slots[i] = semSlot{Session: session, Holder: holder, Token: token}
	s.Last = max(s.Last, token)
	return s
}

// named returns s with the unknown token of slot i named t, false if t
// cannot be it.
func (s semState) named(i int, t uint64) (semState, bool) {
	sl := s.Slots[i]
	if sl.Token != 0 || t <= sl.Lo || (sl.Hi != 0 && t > sl.Hi) {
		return s, false
	}
	s.Slots[i] = semSlot{Session: sl.Session, Holder: sl.Holder, Token: t}
	s.Last = max(s.Last, t)
	return s, true
}

// freed is s with slot i free (maybe delayed).
func (s semState) freed(i int, delayed bool) semState {
	s.Slots[i] = semSlot{Delayed: delayed}
	return s
}

func (s semState) effects() []pendingEffect { return lockState{Armed: s.Armed}.effects() }

func (s semState) disarm(session string) semState {
	s.Armed = lockState{Armed: s.Armed}.disarm(session).Armed
	return s
}

// core is s without its armed effects.
func (s semState) core() semState {
	s.Armed = ""
	return s
}

// subsumes reports whether s can do whatever t can (as lockState's).
func (s semState) subsumes(t semState) bool {
	return s.core() == t.core() && lockState{Armed: s.Armed}.subsumes(lockState{Armed: t.Armed})
}

// fire returns the states after e happens in s, none if it would change
// nothing: an acquire takes any slot a grant could, a release frees its
// holder's slot.
func (s semState) fire(e pendingEffect) []semState {
	switch e.Kind {
	case kindAcquire:
		if s.mine(e.Session, e.Holder) >= 0 {
			return nil
		}
		var out []semState
		for _, i := range s.grantable() {
			out = append(out, s.granted(i, e.Session, e.Holder, 0))
		}
		return out
	case kindRelease:
		if i := s.mine(e.Session, e.Holder); i >= 0 {
			return []semState{s.freed(i, false)}
		}
	}
	return nil
}

// settleSem is settleStates (model_settle.go) for semaphores.
func settleSem(ss []semState) []semState { return settleStates(ss) }

// unseen: a semaphore's state moves only by operations and armed effects
// (histories with a restore are not modelled).
func (s semState) unseen() []semState { return nil }

// withArmed returns s with Armed set to armed.
func (s semState) withArmed(armed string) semState {
	s.Armed = armed
	return s
}

// stepSem returns every state the semaphore may be in after the
// operation, none if it cannot have had this outcome in state s.
func stepSem(s semState, in semInput, out semOutput) []semState {
	one := func(ns semState) []semState { return []semState{ns} }
	switch in.Kind {
	case kindAcquire:
		return stepSemAcquire(s, in, out)
	case kindRelease:
		return stepSemRelease(s, in, out)
	case kindRead:
		return stepSemRead(s, out)
	case kindExpire, kindClose:
		s = s.disarm(in.Session)
		for i := range s.N {
			if s.Slots[i].Session == in.Session && !s.Slots[i].free() {
				s = s.freed(i, in.Kind == kindExpire)
			}
		}
		return one(s)
	case kindArm:
		s.Armed = encodeEffects(append(s.effects(), pendingEffect{Kind: in.Effect, Session: in.Session, Holder: in.Holder}))
		return one(s)
	case kindRevoke:
		next := []semState{s}
		for i := range s.N {
			switch sl := s.Slots[i]; {
			case sl.free():
			case sl.Token == in.Token:
				return one(s.freed(i, true))
			case sl.Token == 0:
				next = append(next, s.freed(i, true)) // a grant nobody saw the token of
			}
		}
		return next
	}
	return nil
}

func stepSemAcquire(s semState, in semInput, out semOutput) []semState {
	m := s.mine(in.Session, in.Holder)
	switch out.Result {
	case resOK:
		slot := int(min(out.Slot, uint64(s.N)))
		switch {
		case m >= 0 && m != slot:
			return nil
		case m >= 0 && s.Slots[m].Token == out.Token:
			return []semState{s}
		case m >= 0:
			if ns, ok := s.named(m, out.Token); ok {
				return []semState{ns}
			}
			return nil
		case slot < s.N && slices.Contains(s.grantable(), slot) && s.newToken(out.Token):
			return []semState{s.granted(slot, in.Session, in.Holder, out.Token)}
		}
		return nil
	case resBusy:
		if m < 0 && s.full() {
			return []semState{s}
		}
		return nil
	case resWaitTimeout, resWaitCancelled, resNoLeader:
		return []semState{s}
	default:
		// not_found and unknown outcomes: granted (any slot a grant could
		// take) or not.
		next := []semState{s}
		if m < 0 {
			for _, i := range s.grantable() {
				next = append(next, s.granted(i, in.Session, in.Holder, 0))
			}
		}
		return next
	}
}

func stepSemRelease(s semState, in semInput, out semOutput) []semState {
	m := s.mine(in.Session, in.Holder)
	held := false
	for i := range s.N {
		held = held || !s.Slots[i].free()
	}
	switch out.Result {
	case resOK:
		switch {
		case m >= 0:
			return []semState{s.freed(m, false)}
		case !held || !in.Unlock:
			return []semState{s}
		}
		return nil
	case resNotHolder:
		switch {
		case m >= 0:
			return []semState{s.freed(m, false)}
		case held:
			return []semState{s}
		}
		return nil
	default:
		if m >= 0 {
			return []semState{s, s.freed(m, false)}
		}
		return []semState{s}
	}
}

// stepSemRead matches a read's holders with the slots: every held slot
// named, with its holder and token, and no other.
func stepSemRead(s semState, out semOutput) []semState {
	var named [semMaxPermits]bool
	for _, h := range out.Holders {
		i := int(min(h.Slot, uint64(s.N)))
		if i >= s.N || named[i] {
			return nil
		}
		named[i] = true
		sl := s.Slots[i]
		if sl.free() || sl.Session != h.Session || sl.Holder != h.Holder {
			return nil
		}
		if sl.Token != h.Token {
			ns, ok := s.named(i, h.Token)
			if !ok {
				return nil
			}
			s = ns
		}
	}
	for i := range s.N {
		if !named[i] && !s.Slots[i].free() {
			return nil
		}
	}
	return []semState{s}
}

// semStates is the state of the porcupine model: every state the
// semaphore may be in, sorted, without duplicates or subsumed states.
type semStates []semState

func reduceSem(ss []semState) semStates {
	slices.SortFunc(ss, compareSemStates)
	ss = slices.Compact(ss)
	out := make(semStates, 0, len(ss))
	for i, b := range ss {
		if !slices.ContainsFunc(ss, func(a semState) bool { return a != ss[i] && a.subsumes(b) }) {
			out = append(out, b)
		}
	}
	return out
}

func compareSemStates(a, b semState) int {
	c := cmp.Or(cmp.Compare(a.N, b.N), cmp.Compare(a.Last, b.Last), cmp.Compare(a.Armed, b.Armed))
	for i := 0; c == 0 && i < a.N; i++ {
		x, y := a.Slots[i], b.Slots[i]
		c = cmp.Or(cmp.Compare(x.Session, y.Session), cmp.Compare(x.Holder, y.Holder), cmp.Compare(x.Token, y.Token),
			cmp.Compare(x.Lo, y.Lo), cmp.Compare(x.Hi, y.Hi), compareBool(x.Delayed, y.Delayed))
	}
	return c
}

// semModel is the porcupine model of a history of semaphores of permits
// slots, partitioned by lock.
func semModel(permits int) porcupine.Model {
	return porcupine.Model{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			idx := map[string]int{}
			var parts [][]porcupine.Operation
			for _, op := range history {
				l := op.Input.(semInput).Lock
				i, ok := idx[l]
				if !ok {
					i = len(parts)
					idx[l] = i
					parts = append(parts, nil)
				}
				parts[i] = append(parts[i], op)
			}
			return parts
		},
		Init: func() interface{} { return semStates{{N: permits}} },
		Step: func(state, input, output interface{}) (bool, interface{}) {
			var next []semState
			for _, s := range settleSem(state.(semStates)) {
				next = append(next, stepSem(s, input.(semInput), output.(semOutput))...)
			}
			r := reduceSem(next)
			return len(r) > 0, r
		},
		Equal: func(a, b interface{}) bool { return slices.Equal(a.(semStates), b.(semStates)) },
		Hash: func(state interface{}) uint64 {
			h := fnv.New64a()
			for _, s := range state.(semStates) {
				fmt.Fprintf(h, "%d/%s/", s.Last, s.Armed)
				for _, sl := range s.Slots[:s.N] {
					fmt.Fprintf(h, "%s/%s/%d/%d/%d/%t,", sl.Session, sl.Holder, sl.Token, sl.Lo, sl.Hi, sl.Delayed)
				}
				h.Write([]byte{';'})
			}
			return h.Sum64()
		},
		DescribeOperation: func(input, output interface{}) string {
			in, out := input.(semInput), output.(semOutput)
			d := describeLockOp(in.lockInput, out.lockOutput)
			switch {
			case in.Kind == kindAcquire && out.Result == resOK:
				d += fmt.Sprintf(" slot %d", out.Slot)
			case in.Kind == kindRead:
				var hs []string
				for _, h := range out.Holders {
					hs = append(hs, fmt.Sprintf("%d:%s@%d", h.Slot, short(h.Session, h.Holder), h.Token))
				}
				d = fmt.Sprintf("read -> [%s]", strings.Join(hs, " "))
			}
			return d
		},
		DescribeState: func(state interface{}) string {
			var ds []string
			for _, s := range state.(semStates) {
				ds = append(ds, describeSemState(s))
			}
			return strings.Join(ds, " | ")
		},
	}
}

// describeSemState describes one state the semaphore may be in.
func describeSemState(s semState) string {
	var slots []string
	for i, sl := range s.Slots[:s.N] {
		switch {
		case sl.free() && sl.Delayed:
			slots = append(slots, fmt.Sprintf("%d free, maybe delayed", i))
		case sl.free():
			slots = append(slots, fmt.Sprintf("%d free", i))
		case sl.Token == 0:
			slots = append(slots, fmt.Sprintf("%d %s token ?", i, short(sl.Session, sl.Holder)))
		default:
			slots = append(slots, fmt.Sprintf("%d %s token %d", i, short(sl.Session, sl.Holder), sl.Token))
		}
	}
	armed := ""
	if n := len(s.effects()); n > 0 {
		armed = fmt.Sprintf(", %d unknown outcomes may still take effect", n)
	}
	return fmt.Sprintf("slots [%s] (last token %d%s)", strings.Join(slots, "; "), s.Last, armed)
}

// semModelOps turns a semaphore run's history into the semaphore model's
// operations: modelOps', each acquire answered ok with its slot.
func semModelOps(h History) []porcupine.Operation {
	type grantKey struct {
		lock, session, holder string
		token                 uint64
	}
	slots := map[grantKey]uint64{}
	for _, o := range h.Ops {
		if o.Kind == kindAcquire && o.Result == resOK {
			slots[grantKey{o.Lock, o.Session, o.Holder, o.Token}] = o.Slot
		}
	}
	ops := modelOps(h)
	for i, op := range ops {
		in, out := op.Input.(lockInput), op.Output.(lockOutput)
		so := semOutput{lockOutput: out}
		if in.Kind == kindAcquire && out.Result == resOK {
			so.Slot = slots[grantKey{in.Lock, in.Session, in.Holder, out.Token}]
		}
		ops[i].Input, ops[i].Output = semInput{in}, so
	}
	return ops
}

// runSemPorcupine checks every lock's history of a semaphore run against
// the semaphore model, giving up (Unknown) after timeout.
func runSemPorcupine(h History, timeout time.Duration) linearizability {
	switch {
	case h.Permits > semMaxPermits:
		return linearizability{Result: porcupine.Ok, NotRun: fmt.Sprintf("the semaphore model takes up to %d permits", semMaxPermits)}
	case len(restoresOf(h)) > 0:
		return linearizability{Result: porcupine.Ok, NotRun: "a restore brings the backup's slot holders back unseen"}
	}
	ops := semModelOps(h)
	model := semModel(h.Permits)
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	parts := model.Partition(ops)
	out := linearizability{Result: res, Ops: len(ops), Partitions: len(parts),
		Elapsed: time.Since(start), Timeout: timeout, info: info, model: model}
	for _, op := range ops {
		if op.Input.(semInput).Kind == kindArm {
			out.Unknown++
		}
	}
	if res == porcupine.Illegal {
		for _, part := range parts {
			if porcupine.CheckOperationsTimeout(model, part, timeout) == porcupine.Illegal {
				out.Illegal = append(out.Illegal, part[0].Input.(semInput).Lock)
				out.Explained = append(out.Explained, explainIllegal(model, part, timeout))
			}
		}
	}
	return out
}

// illegalViolation is the violation of a linearizability check whose
// result is Illegal: the locks whose history is not linearizable, and
// where each stops linearizing.
func illegalViolation(l linearizability) Violation {
	what := fmt.Sprintf("the history of lock(s) %s is not linearizable", strings.Join(l.Illegal, ", "))
	for i, lock := range l.Illegal {
		what += fmt.Sprintf("\n  lock %s: %s", lock, strings.TrimSuffix(l.Explained[i], "\n"))
	}
	return Violation{Check: checkLinearizable, Client: -1, What: what}
}
