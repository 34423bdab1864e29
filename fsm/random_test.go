package fsm

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/sequencer"
)

var (
	randSeed  = flag.Uint64("fsm.seed", 0, "run TestRandomCommands with only this seed")
	randSteps = flag.Int("fsm.steps", 0, "commands per seed in TestRandomCommands (default 5000, 500 with -short)")
)

// fixedSeeds always run; one time-derived seed runs besides them unless
// -fsm.seed pins one. Every failure message names its seed.
var fixedSeeds = []uint64{1, 2, 3, 0xdecaf, 20240601}

func TestRandomCommands(t *testing.T) {
	steps := 5000
	if testing.Short() {
		steps = 500
	}
	if *randSteps > 0 {
		steps = *randSteps
	}
	seeds := fixedSeeds
	if *randSeed != 0 {
		seeds = []uint64{*randSeed}
	} else {
		seeds = append(append([]uint64(nil), seeds...), uint64(time.Now().UnixNano()))
	}
	for i, seed := range seeds {
		fixed := *randSeed == 0 && i < len(fixedSeeds)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			st := runRandom(t, seed, steps)
			t.Logf("seed %d: %+v", seed, st)
			if fixed && steps >= 5000 {
				// The fixed seeds must exercise every path the invariants
				// are about; a generator change that stops doing so fails.
				for name, n := range map[string]int{
					"release handoffs": st.ReleaseHandoffs, "end-delay grants": st.EndDelayGrants,
					"shared runs": st.SharedRuns, "delays": st.Delays, "stale end-delays": st.StaleEndDelays,
					"retried grants": st.RetriedGrants, "retried waits": st.RetriedWaits,
					"cancelled waits": st.Cancelled, "cancel after grant": st.CancelGranted,
					"reopened sessions": st.Reopened, "close handoffs": st.CloseHandoffs,
					"waits ended by removal": st.RemovedWaits, "not holder": st.NotHolder, "busy": st.Busy,
					"history drops": st.HistoryDrops, "free histories taken up": st.Revived,
					"limits reached": st.Exhausted,
				} {
					if n == 0 {
						t.Errorf("seed %d never exercised %s", seed, name)
					}
				}
			}
		})
	}
}

type randStats struct {
	Grants, ReleaseHandoffs, EndDelayGrants, CloseHandoffs, SharedRuns int
	Delays, StaleEndDelays, RetriedGrants, RetriedWaits, Cancelled     int
	CancelGranted, Reopened, RemovedWaits, NotHolder, Busy             int
	// HistoryDrops counts grants pushed out of a full history; Revived,
	// grants of a free lock that carried its history on.
	HistoryDrops, Revived int
	// Exhausted counts commands refused at a limit.
	Exhausted int
}

type hkey struct{ s, h string }

// randModel is what the test knows independently of the FSM.
type randModel struct {
	queue   map[string][]hkey // FIFO of waiters per lock, in enqueue order
	maxTok  map[string]uint64 // highest token granted per lock
	delayed map[string]int64  // expected DelayUntil of delayed locks
	lengths map[string]int64  // expected DelayFor of delayed locks
	opened  map[string]bool   // session ids ever opened
	names   map[string]string // session names by id
	grants  map[string][]PastGrant
	since   map[string]uint64 // expected GrantsSince per lock
}

var (
	randSessions = []string{"s0", "s1", "s2", "s3", "s4", "s5"}
	randLocks    = []string{"a", "b", "c/d", "e/f/g"}
	randHolders  = []string{"h0", "h1", "h2"}
	randDelays   = []time.Duration{0, time.Second, 3 * time.Second, 10 * time.Second}
	// randLimits, tight enough for the sets above, are stamped into a
	// third of the opens and acquires (the others carry none, as entries
	// from before limits).
	randLimits = api.Limits{Sessions: 4, Locks: 3, WaitersPerLock: 2, LocksPerSession: 2}
)

func runRandom(t *testing.T, seed uint64, steps int) randStats {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var evA []Event
	a := New(func(e Event) { evA = append(evA, e) })
	b := New(nil)
	swapAt := steps/4 + rng.IntN(steps/2+1)
	m := randModel{queue: map[string][]hkey{}, maxTok: map[string]uint64{}, delayed: map[string]int64{}, lengths: map[string]int64{}, opened: map[string]bool{},
		names: map[string]string{}, grants: map[string][]PastGrant{}, since: map[string]uint64{}}
	var st randStats
	var history []string
	now := t0

	for step := 0; step < steps; step++ {
		idx := uint64(step + 1)
		now += rng.Int64N(int64(2 * time.Second))
		cmd, note := genCommand(rng, a, &m)
		cmd.Now = now
		if rng.IntN(3) == 0 {
			lim := randLimits
			switch cmd.Type {
			case CmdOpenSession:
				cmd.OpenSession.Limits = &lim
			case CmdAcquire:
				cmd.Acquire.Limits = &lim
			}
		}
		history = append(history, fmt.Sprintf("%d %s %s %s", idx, cmd.Type, describe(cmd), note))
		fail := func(format string, args ...any) {
			t.Helper()
			h := history
			if len(h) > 25 {
				h = h[len(h)-25:]
			}
			t.Fatalf("seed %d (rerun: go test ./fsm -run 'TestRandomCommands' -fsm.seed=%d -fsm.steps=%d), entry %d: %s\nlast entries:\n  %s\nstate: %s",
				seed, seed, steps, idx, fmt.Sprintf(format, args...), strings.Join(h, "\n  "), a.Dump())
		}

		if step == swapAt {
			// Replace B by a fresh replica restored from B's snapshot.
			data := snapshotBytes(t, b)
			c := New(nil)
			restoreInto(t, c, data)
			if !bytes.Equal(c.Dump(), b.Dump()) {
				fail("restored replica differs from its source:\n%s\n%s", c.Dump(), b.Dump())
			}
			b = c
		}

		pre := snapshotLocks(a)
		preState, exhausted := stateOf(t, a), wantExhausted(cmd, pre, a.Sessions())
		var preSess SessionRecord
		var preSessOK bool
		if cmd.Type == CmdExpireSession || cmd.Type == CmdCloseSession {
			preSess, preSessOK = a.Session(sessionOf(cmd))
		}
		data, err := cmd.Encode()
		if err != nil {
			fail("encode: %v", err)
		}
		n := len(evA)
		ra := a.Apply(&raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data}).(Result)
		rb := b.Apply(&raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data}).(Result)
		events := evA[n:]
		if !reflect.DeepEqual(ra, rb) {
			fail("replicas answer differently: %+v vs %+v", ra, rb)
		}
		if step%100 == 0 && !bytes.Equal(a.Dump(), b.Dump()) {
			fail("replicas diverge:\n%s\n%s", a.Dump(), b.Dump())
		}
		post := snapshotLocks(a)
		if (ra.Status == StatusResourceExhausted) != exhausted {
			fail("answered %s; the limits %+v say refused=%v", ra.Status, randLimits, exhausted)
		}
		if exhausted {
			st.Exhausted++
			if len(events) != 0 || !reflect.DeepEqual(preState, stateOf(t, a)) {
				fail("a refused entry changed the state or emitted %+v", events)
			}
		}
		checkCommandResult(fail, &st, cmd, ra, idx, pre, post, events, m.names)
		// Model the expected lock-delays from the pre-state.
		if cmd.Type == CmdExpireSession && preSessOK && preSess.LockDelay > 0 {
			for name, l := range pre {
				for _, h := range l.Holders {
					if h.Session == preSess.ID {
						until := now + preSess.LockDelay
						if cur, ok := m.delayed[name]; !ok || until > cur {
							m.delayed[name], m.lengths[name] = until, preSess.LockDelay
						}
						st.Delays++
						break
					}
				}
			}
		}
		if cmd.Type == CmdEndDelay {
			if until, ok := m.delayed[cmd.EndDelay.Lock]; ok && until == cmd.EndDelay.Until {
				delete(m.delayed, cmd.EndDelay.Lock)
				delete(m.lengths, cmd.EndDelay.Lock)
			} else {
				st.StaleEndDelays++
			}
		}
		checkEvents(fail, &st, &m, cmd, ra, idx, pre, events)
		modelHistories(&st, &m, events, pre, post)
		checkState(t, fail, a, &m, idx)
		checkSessionIndex(t, a)
		checkSessionIndex(t, b)
		if cmd.Type == CmdOpenSession && ra.Status == StatusOK {
			if m.opened[cmd.OpenSession.ID] {
				st.Reopened++
			}
			m.opened[cmd.OpenSession.ID] = true
			m.names[cmd.OpenSession.ID] = cmd.OpenSession.Name
		}
		if preSessOK {
			for name, l := range pre {
				if len(l.Holders) > 0 && l.Holders[0].Session == preSess.ID && len(post[name].Holders) > 0 &&
					post[name].Holders[0].Token == idx && cmd.Type == CmdCloseSession {
					st.CloseHandoffs++
				}
			}
		}
	}
	if da, db := a.Dump(), b.Dump(); !bytes.Equal(da, db) {
		t.Fatalf("seed %d: final states differ:\nA: %s\nC: %s", seed, da, db)
	}
	return st
}

// wantExhausted is the limit rule as the test knows it: whether cmd,
// with the limits it carries, is refused in the state of the locks pre and
// the sessions.
func wantExhausted(cmd Command, pre map[string]Lock, sessions []SessionRecord) bool {
	switch cmd.Type {
	case CmdOpenSession:
		c := cmd.OpenSession
		if c.Limits == nil || c.ID == "" || c.TTL <= 0 || c.LockDelay < 0 {
			return false
		}
		for _, s := range sessions {
			if s.ID == c.ID {
				return false
			}
		}
		return len(sessions) >= c.Limits.Sessions
	case CmdAcquire:
		c := cmd.Acquire
		i := slices.IndexFunc(sessions, func(s SessionRecord) bool { return s.ID == c.Session })
		if c.Limits == nil || c.Lock == "" || c.Holder == "" || !c.Mode.Valid() || i < 0 {
			return false
		}
		l, stored := pre[c.Lock]
		k := hkey{c.Session, c.Holder}
		if _, held := findHolder(l, k); held || isWaiter(l, k) {
			return false // a retry adds nothing
		}
		free := !stored || (!l.Delayed && len(l.Waiters) == 0 && (len(l.Holders) == 0 || (l.Mode == Shared && c.Mode == Shared)))
		if !free && !c.Wait {
			return false // busy
		}
		holds := 0
		for _, l := range pre {
			for _, h := range l.Holders {
				if h.Session == c.Session {
					holds++
				}
			}
			for _, w := range l.Waiters {
				if w.Session == c.Session {
					holds++
				}
			}
		}
		return (!stored && len(pre) >= c.Limits.Locks) || holds >= c.Limits.LocksPerSession ||
			(!free && len(l.Waiters) >= c.Limits.WaitersPerLock)
	}
	return false
}

func sessionOf(c Command) string {
	switch c.Type {
	case CmdCloseSession:
		return c.CloseSession.ID
	case CmdExpireSession:
		return c.ExpireSession.ID
	}
	return ""
}

func snapshotLocks(f *FSM) map[string]Lock {
	out := map[string]Lock{}
	for _, l := range f.Locks("") {
		out[l.Name] = l
	}
	return out
}

func findHolder(l Lock, k hkey) (Holder, bool) {
	for _, h := range l.Holders {
		if h.Session == k.s && h.Holder == k.h {
			return h, true
		}
	}
	return Holder{}, false
}

func isWaiter(l Lock, k hkey) bool { return waiterAt(l, k) >= 0 }

// waiterAt returns k's place in l's queue, or -1.
func waiterAt(l Lock, k hkey) int {
	for i, w := range l.Waiters {
		if w.Session == k.s && w.Holder == k.h {
			return i
		}
	}
	return -1
}

// genCommand draws the next command, mostly about things that exist in a.
func genCommand(rng *rand.Rand, a *FSM, m *randModel) (Command, string) {
	pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
	mode := func() sequencer.Mode {
		if rng.IntN(2) == 0 {
			return Exclusive
		}
		return Shared
	}
	var live []string
	for _, s := range a.Sessions() {
		live = append(live, s.ID)
	}
	session := func() string {
		if len(live) > 0 && rng.IntN(10) < 9 {
			return pick(live)
		}
		return pick(randSessions)
	}
	locks := a.Locks("")
	// existing holds or waits, as (lock, key)
	type ref struct {
		lock string
		k    hkey
		set  uint64 // a waiter's WaitSet
	}
	var holds, waits []ref
	for _, l := range locks {
		for _, h := range l.Holders {
			holds = append(holds, ref{lock: l.Name, k: hkey{h.Session, h.Holder}})
		}
		for _, w := range l.Waiters {
			waits = append(waits, ref{l.Name, hkey{w.Session, w.Holder}, w.WaitSet})
		}
	}
	// waitFor draws the length of a wait, mostly set.
	waitFor := func(c Command) Command {
		if c.Acquire.Wait && rng.IntN(5) > 0 {
			c.Acquire.WaitFor = int64(1+rng.IntN(600)) * int64(time.Second)
		}
		return c
	}

	switch p := rng.IntN(100); {
	case p < 8:
		ttl := int64(10 * time.Second)
		if rng.IntN(50) == 0 {
			ttl = 0 // invalid
		}
		id := pick(randSessions)
		return Command{Type: CmdOpenSession, OpenSession: &OpenSession{ID: id, Name: "name-" + id, TTL: ttl,
			LockDelay: int64(randDelays[rng.IntN(len(randDelays))])}}, ""
	case p < 12:
		return closeCmd(session()), ""
	case p < 17:
		return expireCmd(session()), ""
	case p < 35:
		if len(holds) > 0 && rng.IntN(10) < 7 {
			r := holds[rng.IntN(len(holds))]
			return relCmd(r.lock, r.k.s, r.k.h), "(holder)"
		}
		return relCmd(pick(randLocks), session(), pick(randHolders)), ""
	case p < 42:
		switch {
		case len(waits) > 0 && rng.IntN(10) < 6:
			r := waits[rng.IntN(len(waits))]
			c := cancelCmd(r.lock, r.k.s, r.k.h)
			switch rng.IntN(3) {
			case 0:
				c.CancelWait.WaitSet = r.set // its wait ran out
				return c, "(waiter, timeout)"
			case 1:
				c.CancelWait.WaitSet = r.set - 1 // a wait since set again
				return c, "(waiter, stale timeout)"
			}
			return c, "(waiter)"
		case len(holds) > 0 && rng.IntN(10) < 5:
			r := holds[rng.IntN(len(holds))]
			return cancelCmd(r.lock, r.k.s, r.k.h), "(holder)"
		}
		return cancelCmd(pick(randLocks), session(), pick(randHolders)), ""
	case p < 52:
		var delayed []Lock
		for _, l := range locks {
			if l.Delayed {
				delayed = append(delayed, l)
			}
		}
		if len(delayed) == 0 {
			return endDelayCmd(pick(randLocks), rng.Int64N(1<<62)), "(random)"
		}
		l := delayed[rng.IntN(len(delayed))]
		switch rng.IntN(10) {
		case 0, 1:
			return endDelayCmd(l.Name, l.DelayUntil-1-rng.Int64N(int64(time.Second))), "(stale)"
		case 2:
			return endDelayCmd(l.Name, l.DelayUntil+1), "(stale)"
		}
		return endDelayCmd(l.Name, l.DelayUntil), "(current)"
	case p < 54:
		return memberCmd(pick([]string{"n1", "n2", "n3"}), pick([]string{"r1", "r2"}), pick([]string{"h1", "h2"})), ""
	default:
		if len(holds) > 0 && rng.IntN(10) == 0 {
			r := holds[rng.IntN(len(holds))]
			return acqCmd(r.lock, r.k.s, r.k.h, mode(), rng.IntN(2) == 0), "(retry holder)"
		}
		if len(waits) > 0 && rng.IntN(10) == 0 {
			r := waits[rng.IntN(len(waits))]
			return waitFor(acqCmd(r.lock, r.k.s, r.k.h, mode(), rng.IntN(2) == 0)), "(retry waiter)"
		}
		c := waitFor(acqCmd(pick(randLocks), session(), pick(randHolders), mode(), rng.IntN(10) < 6))
		if rng.IntN(200) == 0 {
			c.Acquire.Mode = 0 // invalid
		}
		if rng.IntN(4) == 0 {
			c.Acquire.Value = fmt.Sprintf("v%d", rng.IntN(100))
		}
		return c, ""
	}
}

// checkBusy checks the description of a busy lock l (Result.Busy) for an
// acquire queued at place (0: not queued): the lock's holders, each by the
// name its session was opened with (sessions) and its holder id, and the
// lock's mode (when held), lock-delay and queue.
func checkBusy(fail func(string, ...any), b *Busy, l Lock, sessions map[string]string, place int) {
	if b == nil {
		fail("busy lock %+v described as nil", l)
		return
	}
	var got, want []string
	for _, h := range b.Holders {
		got = append(got, h.SessionName+"/"+h.Holder)
	}
	for _, h := range l.Holders {
		want = append(want, sessions[h.Session]+"/"+h.Holder)
	}
	wantMode, wantUntil := sequencer.Mode(0), int64(0)
	if len(l.Holders) > 0 {
		wantMode = l.Mode
	}
	if l.Delayed {
		wantUntil = l.DelayUntil
	}
	if !slices.Equal(got, want) || b.Mode != wantMode || b.DelayUntil != wantUntil ||
		b.Waiters != len(l.Waiters) || b.Place != place {
		fail("busy lock %+v described as %+v (holders %v, want %v, place %d)", l, b, got, want, place)
	}
}

// checkCommandResult checks the answer of cmd against the state before
// (pre) and after (post) it; sessions names the sessions by id.
func checkCommandResult(fail func(string, ...any), st *randStats, cmd Command, r Result, idx uint64,
	pre, post map[string]Lock, events []Event, sessions map[string]string) {
	granted := 0
	for _, e := range events {
		if e.Kind == EventGranted {
			granted++
		}
	}
	switch cmd.Type {
	case CmdAcquire:
		c := cmd.Acquire
		k := hkey{c.Session, c.Holder}
		if c.Lock == "" || c.Holder == "" || (c.Mode != Exclusive && c.Mode != Shared) {
			if r.Status != StatusInvalid || !reflect.DeepEqual(pre, post) {
				fail("invalid acquire: %+v", r)
			}
			return
		}
		if h, ok := findHolder(pre[c.Lock], k); ok {
			// A retried acquire of a holder: the same grant, never a second,
			// and never a grant of a mode it did not ask for.
			st.RetriedGrants++
			want := Result{Status: StatusGranted, Token: h.Token, Mode: pre[c.Lock].Mode, Index: idx}
			if c.Mode != pre[c.Lock].Mode {
				want = Result{Status: StatusModeMismatch, Mode: pre[c.Lock].Mode, Index: idx}
			}
			if r != want || granted != 0 || !reflect.DeepEqual(pre[c.Lock], post[c.Lock]) {
				fail("retried acquire of holder %+v (token %d): %+v, want %+v, lock %+v -> %+v", k, h.Token, r, want, pre[c.Lock], post[c.Lock])
			}
			return
		}
		if i := waiterAt(pre[c.Lock], k); i >= 0 {
			// A retry by a queued holder keeps its place: a wait sets the
			// wait again from this entry, a try finds the lock busy.
			st.RetriedWaits++
			w := pre[c.Lock].Waiters[i]
			wantLock := pre[c.Lock]
			want := Result{Status: StatusLockBusy, Index: idx}
			switch {
			case c.Mode != w.Mode:
				want = Result{Status: StatusModeMismatch, Mode: w.Mode, Index: idx}
			case c.Wait:
				want = Result{Status: StatusQueued, Index: idx}
				wantLock.Waiters = append([]Waiter(nil), wantLock.Waiters...)
				wantLock.Waiters[i].WaitFor, wantLock.Waiters[i].WaitSet = c.WaitFor, idx
			}
			got := r
			if want.Status == StatusLockBusy {
				checkBusy(fail, r.Busy, pre[c.Lock], sessions, i+1)
				got.Busy = nil
			}
			if got != want || granted != 0 || !reflect.DeepEqual(wantLock, post[c.Lock]) {
				fail("retried acquire of waiter %+v: %+v, want %+v, lock %+v -> %+v", k, r, want, pre[c.Lock], post[c.Lock])
			}
			return
		}
		switch r.Status {
		case StatusGranted:
			st.Grants++
			if l, ok := pre[c.Lock]; ok && (l.Delayed || len(l.Waiters) > 0 ||
				(len(l.Holders) > 0 && !(l.Mode == Shared && c.Mode == Shared))) {
				fail("granted a lock that was not available (delayed, queued or incompatible): %+v", l)
			}
			if h, ok := findHolder(post[c.Lock], k); !ok || r.Token != idx || h.Token != idx || r.Mode != c.Mode ||
				post[c.Lock].Mode != c.Mode || h.Value != c.Value {
				fail("grant %+v but lock %+v", r, post[c.Lock])
			}
		case StatusQueued:
			if !c.Wait || !isWaiter(post[c.Lock], k) {
				fail("queued %+v (wait=%v) but lock %+v", r, c.Wait, post[c.Lock])
			}
		case StatusLockBusy:
			st.Busy++
			if c.Wait || !reflect.DeepEqual(pre[c.Lock], post[c.Lock]) {
				fail("busy (wait=%v) changed lock %+v -> %+v", c.Wait, pre[c.Lock], post[c.Lock])
			}
			l, ok := pre[c.Lock]
			if !ok || (!l.Delayed && len(l.Waiters) == 0 && (len(l.Holders) == 0 || (l.Mode == Shared && c.Mode == Shared))) {
				fail("busy on a lock that was available: %+v", l)
			}
			checkBusy(fail, r.Busy, l, sessions, 0)
		case StatusSessionNotFound, StatusInvalid, StatusResourceExhausted:
			if !reflect.DeepEqual(pre, post) {
				fail("%s changed the locks", r.Status)
			}
		default:
			fail("acquire answered %s", r.Status)
		}
	case CmdRelease:
		c := cmd.Release
		k := hkey{c.Session, c.Holder}
		switch r.Status {
		case StatusNotHolder:
			st.NotHolder++
			l := pre[c.Lock]
			if len(l.Holders) == 0 || isWaiter(l, k) || !reflect.DeepEqual(pre, post) {
				fail("not holder: lock %+v -> %+v", l, post[c.Lock])
			}
			if _, ok := findHolder(l, k); ok {
				fail("release by the holder refused")
			}
		case StatusOK:
			if _, ok := findHolder(post[c.Lock], k); ok {
				fail("released holder %+v still holds %+v", k, post[c.Lock])
			}
			if _, ok := findHolder(pre[c.Lock], k); ok && granted > 0 {
				st.ReleaseHandoffs++
			}
			if _, held := findHolder(pre[c.Lock], k); !held && !isWaiter(pre[c.Lock], k) && !reflect.DeepEqual(pre, post) {
				fail("release by a stranger changed the locks: %+v -> %+v", pre[c.Lock], post[c.Lock])
			}
		case StatusSessionNotFound:
			if !reflect.DeepEqual(pre, post) {
				fail("release of a missing session changed the locks")
			}
		default:
			fail("release answered %s", r.Status)
		}
	case CmdCancelWait:
		c := cmd.CancelWait
		k := hkey{c.Session, c.Holder}
		h, held := findHolder(pre[c.Lock], k)
		switch {
		case held:
			st.CancelGranted++
			if r.Status != StatusGranted || r.Token != h.Token || r.Mode != pre[c.Lock].Mode || !reflect.DeepEqual(pre, post) {
				fail("cancel of holder %+v: %+v", h, r)
			}
		case isWaiter(pre[c.Lock], k) && c.WaitSet != 0 && pre[c.Lock].Waiters[waiterAt(pre[c.Lock], k)].WaitSet != c.WaitSet:
			// The end of a wait that was set again since: nothing happens.
			if r.Status != StatusNotWaiting || !reflect.DeepEqual(pre, post) {
				fail("stale timeout of waiter %+v: %+v", k, r)
			}
		case isWaiter(pre[c.Lock], k):
			st.Cancelled++
			want := WaitCancelled
			if c.WaitSet != 0 {
				want = WaitTimedOut
			}
			ended := false
			for _, e := range events {
				ended = ended || (e.Kind == EventWaitEnded && e.Session == k.s && e.Holder == k.h && e.Reason == want)
			}
			if r.Status != StatusOK || isWaiter(post[c.Lock], k) || !ended {
				fail("cancel of waiter %+v: %+v, lock %+v, events %+v", k, r, post[c.Lock], events)
			}
		default:
			if r.Status != StatusNotWaiting || !reflect.DeepEqual(pre, post) {
				fail("cancel of a stranger: %+v", r)
			}
		}
	case CmdEndDelay:
		if granted > 0 {
			st.EndDelayGrants++
		}
	}
}

// checkEvents checks the grants of one entry against the model (FIFO,
// token order) and advances the model.
func checkEvents(fail func(string, ...any), st *randStats, m *randModel, cmd Command, r Result, idx uint64,
	pre map[string]Lock, events []Event) {
	if cmd.Type == CmdAcquire && r.Status == StatusQueued {
		c := cmd.Acquire
		k := hkey{c.Session, c.Holder}
		if !isWaiter(pre[c.Lock], k) {
			m.queue[c.Lock] = append(m.queue[c.Lock], k)
		}
	}
	prevMax := map[string]uint64{}
	for name, t := range m.maxTok {
		prevMax[name] = t
	}
	perLock := map[string][]Event{}
	for _, e := range events {
		k := hkey{e.Session, e.Holder}
		switch e.Kind {
		case EventGranted:
			if e.Token != idx {
				fail("grant %+v: token is not the entry index %d", e, idx)
			}
			if e.Token <= prevMax[e.Lock] {
				fail("grant %+v: token not above the lock's previous highest %d", e, prevMax[e.Lock])
			}
			m.maxTok[e.Lock] = e.Token
			perLock[e.Lock] = append(perLock[e.Lock], e)
			q := m.queue[e.Lock]
			pos := -1
			for i, w := range q {
				if w == k {
					pos = i
				}
			}
			switch {
			case pos == 0:
				m.queue[e.Lock] = q[1:]
			case pos > 0:
				fail("FIFO violated on %s: granted %+v while %+v queued before it (queue %v)", e.Lock, k, q[:pos], q)
			case cmd.Type != CmdAcquire || cmd.Acquire.Lock != e.Lock || cmd.Acquire.Session != e.Session || cmd.Acquire.Holder != e.Holder:
				fail("grant %+v to someone neither queued nor asking", e)
			}
		case EventWaitEnded:
			q := m.queue[e.Lock]
			pos := -1
			for i, w := range q {
				if w == k {
					pos = i
				}
			}
			if pos < 0 {
				fail("wait ended for %+v on %s, which was not queued (queue %v)", k, e.Lock, q)
			}
			m.queue[e.Lock] = append(q[:pos:pos], q[pos+1:]...)
			if cmd.Type == CmdCloseSession || cmd.Type == CmdExpireSession {
				st.RemovedWaits++
			}
		}
	}
	for name, gs := range perLock {
		if len(gs) > 1 {
			st.SharedRuns++
			for _, g := range gs {
				if g.Mode != Shared {
					fail("entry granted %s %d times including an exclusive grant: %+v", name, len(gs), gs)
				}
			}
		}
	}
}

// modelHistories appends the grants of one entry to the model's histories
// (the value as the new holder carries it, the session by the name it
// was opened with) and drops the oldest beyond MaxGrantHistory.
func modelHistories(st *randStats, m *randModel, events []Event, pre, post map[string]Lock) {
	for _, e := range events {
		if e.Kind != EventGranted {
			continue
		}
		h, _ := findHolder(post[e.Lock], hkey{e.Session, e.Holder})
		if len(m.grants[e.Lock]) == 0 {
			// A lock first stored: four lock names never push a free
			// history out, so nothing was ever forgotten.
			m.since[e.Lock] = 1
		} else if _, stored := pre[e.Lock]; !stored {
			st.Revived++
		}
		g := append(m.grants[e.Lock], PastGrant{Token: e.Token, Mode: e.Mode, Holder: e.Holder, Value: h.Value,
			SessionName: m.names[e.Session]})
		if n := len(g) - MaxGrantHistory; n > 0 {
			st.HistoryDrops += n
			m.since[e.Lock] = g[n-1].Token + 1
			g = append([]PastGrant(nil), g[n:]...)
		}
		m.grants[e.Lock] = g
	}
}

// checkState checks the invariants of the whole state of a after entry idx.
func checkState(t *testing.T, fail func(string, ...any), a *FSM, m *randModel, idx uint64) {
	sessions := map[string]bool{}
	for _, s := range a.Sessions() {
		sessions[s.ID] = true
	}
	seen := map[string]bool{}
	for _, l := range a.Locks("") {
		seen[l.Name] = true
		if len(l.Holders) == 0 && len(l.Waiters) == 0 && !l.Delayed {
			fail("empty lock %s is stored", l.Name)
		}
		if len(l.Holders) > 0 && l.Mode != Exclusive && l.Mode != Shared {
			fail("lock %s held in mode %d", l.Name, l.Mode)
		}
		if l.Mode == Exclusive && len(l.Holders) > 1 {
			fail("exclusive lock %s has %d holders: %+v", l.Name, len(l.Holders), l.Holders)
		}
		keys := map[hkey]bool{}
		for _, h := range l.Holders {
			k := hkey{h.Session, h.Holder}
			if keys[k] {
				fail("lock %s: holder %+v twice", l.Name, k)
			}
			keys[k] = true
			if !sessions[h.Session] {
				fail("lock %s: holder of missing session %s", l.Name, h.Session)
			}
			if h.Token == 0 || h.Token > l.Index || h.Token > m.maxTok[l.Name] {
				fail("lock %s: holder token %d (lock index %d, highest grant %d)", l.Name, h.Token, l.Index, m.maxTok[l.Name])
			}
		}
		for _, w := range l.Waiters {
			k := hkey{w.Session, w.Holder}
			if keys[k] {
				fail("lock %s: %+v both holds/waits twice", l.Name, k)
			}
			keys[k] = true
			if !sessions[w.Session] {
				fail("lock %s: waiter of missing session %s", l.Name, w.Session)
			}
		}
		if l.Index > idx || l.Index == 0 {
			fail("lock %s: index %d after entry %d", l.Name, l.Index, idx)
		}
		// Work-conserving: a grantable head waiter would have been granted.
		if !l.Delayed && len(l.Waiters) > 0 && (len(l.Holders) == 0 || (l.Mode == Shared && l.Waiters[0].Mode == Shared)) {
			fail("lock %s: head waiter %+v could be granted: %+v", l.Name, l.Waiters[0], l)
		}
		// Lock-delay exactly as modelled from expiries of holders.
		until, want := m.delayed[l.Name]
		if length := m.lengths[l.Name]; l.Delayed != want || l.DelayUntil != until || l.DelayFor != length {
			fail("lock %s: delayed=%v until %d for %d, model says delayed=%v until %d for %d",
				l.Name, l.Delayed, l.DelayUntil, l.DelayFor, want, until, length)
		}
		// FIFO queue exactly as modelled.
		var got []hkey
		for _, w := range l.Waiters {
			got = append(got, hkey{w.Session, w.Holder})
		}
		if q := m.queue[l.Name]; len(q) != len(got) || (len(q) > 0 && !reflect.DeepEqual(q, got)) {
			fail("lock %s: waiters %v, model queue %v", l.Name, got, q)
		}
	}
	// Every lock's history is its last MaxGrantHistory grants as
	// modelled from the grant events, kept while the lock is free too (four
	// lock names never push a free history out), naming sessions by name.
	for _, name := range randLocks {
		l, ok, _ := a.LockRecord(name)
		want := m.grants[name]
		if ok != (len(want) > 0) {
			fail("lock %s: record found=%v, model has %d grants", name, ok, len(want))
		}
		if !ok {
			if len(l.Grants) != 0 || l.GrantsSince != 1 {
				fail("lock %s never granted: %+v, want no history since 1", name, l)
			}
			continue
		}
		if !seen[name] && (len(l.Holders) > 0 || len(l.Waiters) > 0 || l.Delayed || l.Index > idx) {
			fail("free lock %s: history record %+v is more than a history", name, l)
		}
		if !reflect.DeepEqual(l.Grants, want) || l.GrantsSince != m.since[name] {
			fail("lock %s: history %+v since %d, model %+v since %d", name, l.Grants, l.GrantsSince, want, m.since[name])
		}
	}
	for name, q := range m.queue {
		if len(q) > 0 && !seen[name] {
			fail("lock %s is gone but the model still queues %v", name, q)
		}
	}
	for name := range m.delayed {
		if !seen[name] {
			fail("lock %s is gone but the model says it is delayed", name)
		}
	}
	checkSessionIndex(t, a)
}
