package main

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
)

// The checks besides linearizability. Each one is sound: it reports only
// what a correct cluster, with the documented semantics, cannot produce.

// Violation is one broken guarantee.
type Violation struct {
	// Check names the guarantee: "linearizable", "fencing", "grant-kept",
	// "session-kept", "lost-before-regrant", "queue-order",
	// "no-ghost-grant", "node-starts", "prefix-watch", (a semaphore run)
	// "semaphore-slots" or (exec holders, exec_checks.go)
	// "exec-writer-dead" and "exec-exit".
	Check string `json:"check"`
	At    int64  `json:"at"`
	// Client is the client the violation is about (-1: none).
	Client int    `json:"client"`
	What   string `json:"what"`
}

// Check names.
const (
	checkLinearizable = "linearizable"
	checkFencing      = "fencing"
	checkGrantKept    = "grant-kept"
	checkSessionKept  = "session-kept"
	checkLostRegrant  = "lost-before-regrant"
	// checkNodeStarts: every node restarted after a power loss, or whose
	// disk was slow or full, is healthy again within nodeStartTimeout
	// (judged by the disk faults as they heal, disks.go).
	checkNodeStarts = "node-starts"
)

// grant is an acknowledged acquisition.
type grant struct {
	Client          int
	Lock            string
	Session, Holder string
	Token           uint64
	// Acked is when the client knew it held the lock.
	Acked int64
	// ReleaseCall is when the client first asked to release it (pending
	// if never).
	ReleaseCall int64
	// LimitAt is the earliest moment the cluster may revoke it at its
	// hold limit (pending: no limit; Op.limitAt).
	LimitAt int64
}

// ended is the earliest moment g may end by its client's release or its
// hold limit: an expected end (checks 2 and 3). Check 5 judges a grant
// revoked at its hold limit as any other revoked grant.
func (g grant) ended() int64 { return min(g.ReleaseCall, g.LimitAt) }

// grantsOf returns the acknowledged grants of h by lock, in token order.
func grantsOf(h History) map[string][]grant {
	type key struct{ s, h, l string }
	released := map[key]int64{}
	for _, o := range h.Ops {
		if o.Kind == kindRelease {
			k := key{o.Session, o.Holder, o.Lock}
			if t, ok := released[k]; !ok || o.Call < t {
				released[k] = o.Call
			}
		}
	}
	seen := map[key]bool{}
	out := map[string][]grant{}
	for _, o := range h.Ops {
		if o.Kind != kindAcquire || o.Result != resOK {
			continue
		}
		k := key{o.Session, o.Holder, o.Lock}
		if seen[k] {
			continue
		}
		seen[k] = true
		rc, ok := released[k]
		if !ok {
			rc = pending
		}
		out[o.Lock] = append(out[o.Lock], grant{Client: o.Client, Lock: o.Lock, Session: o.Session,
			Holder: o.Holder, Token: o.Token, Acked: o.Return, ReleaseCall: rc, LimitAt: o.limitAt()})
	}
	execGrants(h, out)
	for _, gs := range out {
		sort.Slice(gs, func(i, j int) bool { return gs[i].Token < gs[j].Token })
	}
	return out
}

// checkFence checks the writes at the fenced resource (check 2):
//
//   - accepted writes of a lock carry non-decreasing tokens, and two
//     writers never share a token;
//   - no write is accepted after a grant with a higher token was
//     acknowledged: the resource would then have taken an old holder's
//     write inside the new holder's tenure (the lock-delay must keep a
//     stale holder that wakes up within it out of the next holder's way);
//   - no write of a holder that provably still held its grant is rejected:
//     a higher token then existed while that grant was current.
//
// An operator action that revoked the writer's grant (revoked: a restore,
// or its token deleted) between the grant and the write exempts that write
// from the last two: the holder is told at its next request, and may then
// already be past its last look at Lost() before a write (the resource's
// ordering, the first rule, still holds it back); and a revoked grant is
// not current.
//
// So does a late write (heldInTransit: the write a late-write fault held
// on its way, past the lock-delay). The second rule rests on the
// lock-delay: a holder that looked at Lost() and then stalled wakes up
// within it. A write stalled on the wire longer than that may land in the
// next tenure before the next holder's first write; the fence has not
// seen the newer token then, and admits it. Fencing promises only what
// the first rule judges: once the resource has seen a newer token, an
// older one is refused (docs/FENCING.md, "Late writes").
func checkFence(h History) []Violation {
	var vs []Violation
	grants := grantsOf(h)
	ss := sessionsOf(h)
	type writer struct{ s, h string }
	last := map[string]WriteRec{}
	for _, w := range h.Writes {
		if !w.Accepted {
			continue
		}
		if p, ok := last[w.Lock]; ok {
			if w.Token < p.Token {
				vs = append(vs, Violation{Check: checkFencing, At: w.At, Client: w.Client,
					What: fmt.Sprintf("lock %s: write with token %d accepted after one with token %d", w.Lock, w.Token, p.Token)})
			}
			if w.Token == p.Token && (writer{w.Session, w.Holder}) != (writer{p.Session, p.Holder}) {
				vs = append(vs, Violation{Check: checkFencing, At: w.At, Client: w.Client,
					What: fmt.Sprintf("lock %s: clients %d and %d both wrote with token %d", w.Lock, p.Client, w.Client, w.Token)})
			}
		}
		last[w.Lock] = w
		if revoked(h, w.Client, grantAcked(grants[w.Lock], w), w.At) || heldInTransit(h, w) {
			continue
		}
		for _, g := range grants[w.Lock] {
			if g.Token > w.Token && g.Acked < w.At {
				vs = append(vs, Violation{Check: checkFencing, At: w.At, Client: w.Client,
					What: fmt.Sprintf("lock %s: client %d's write with token %d was accepted %v after client %d was granted token %d: a stale holder wrote inside the next holder's tenure",
						w.Lock, w.Client, w.Token, time.Duration(w.At-g.Acked).Round(time.Millisecond), g.Client, g.Token)})
				break
			}
		}
	}
	for _, w := range h.Writes {
		if w.Accepted {
			continue
		}
		f := ss[w.Session]
		if f == nil || !f.aliveAfter(w.At) || f.ClosedOK && f.CloseCall < w.At {
			continue
		}
		for _, g := range grants[w.Lock] {
			if g.Session == w.Session && g.Holder == w.Holder && g.Token == w.Token && g.Acked < w.At && g.ended() > w.At &&
				!revoked(h, w.Client, g.Acked, w.At) {
				vs = append(vs, Violation{Check: checkFencing, At: w.At, Client: w.Client,
					What: fmt.Sprintf("lock %s: client %d's write with token %d was rejected (%s) while its grant was current (session alive, not released): a newer grant coexisted with it",
						w.Lock, w.Client, w.Token, w.Err)})
				break
			}
		}
	}
	return vs
}

// checkGrantsKept checks that no acknowledged grant is lost (check 3):
// every read of a lock at a time when an acknowledged grant was surely
// current (granted before the read, not released before it ended, its
// session provably alive after it, not revoked by an operator action in
// between) must name exactly that grant. It
// returns the violations and how many reads it could judge.
func checkGrantsKept(h History) ([]Violation, int) {
	var vs []Violation
	grants := grantsOf(h)
	ss := sessionsOf(h)
	judged := 0
	for _, o := range h.Ops {
		if o.Kind != kindRead || o.Result != resOK || !o.Done() {
			continue
		}
		for _, g := range grants[o.Lock] {
			f := ss[g.Session]
			if f == nil || g.Acked >= o.Call || g.ended() <= o.Return || !f.aliveAfter(o.Return) ||
				f.CloseCall <= o.Return || revoked(h, g.Client, g.Acked, o.Return) {
				continue
			}
			judged++
			if len(o.Holders) == 1 && o.Holders[0] == (holderInfo{Session: g.Session, Holder: g.Holder, Token: g.Token}) {
				continue
			}
			// A mixed-kinds run's shared and slot grants have company.
			if h.Mixed && slices.ContainsFunc(o.Holders, func(hd holderInfo) bool {
				return hd.Session == g.Session && hd.Holder == g.Holder && hd.Token == g.Token
			}) {
				continue
			}
			vs = append(vs, Violation{Check: checkGrantKept, At: o.Return, Client: g.Client,
				What: fmt.Sprintf("lock %s: client %d held token %d (session alive, not released) but a read by client %d via %s answered %s: a lost grant or a stale read",
					o.Lock, g.Client, g.Token, o.Client, o.Node, describeHolders(o.Holders))})
		}
	}
	return vs, judged
}

// checkSessionsKept checks that no live session is expired (check 4): a
// session is never reported gone before the lease its last acknowledged
// keepalive granted (counted from when it was sent) has run out, and never
// answers again once reported gone. Leader changes included: a new leader
// must honour the leases the old one granted.
//
// And a session whose client kept it alive is never lost at all: neither
// reported gone by the cluster nor declared expired by its client (its
// jeopardy outlasting the grace period), unless its client stopped keeping
// it (see keptAlive). The faults leave a majority up (restart-all starts
// every node again after 0.5-1.5 s, and a new leader restarts every lease
// in full), and a frozen node (freeze-node, past ttl + grace) costs a
// client a bounded delay, never its session: a client that keeps calling
// the node that stopped answering, instead of moving on, loses it.
//
// A session an operator action may have ended (revoked: a restore, its
// client's token deleted) after its last acknowledged keepalive (less a
// lease, as for a pause) and before it was lost is not judged: the action
// ends it without regard for its lease. A session that was kept alive
// after the action is judged from then on.
func checkSessionsKept(h History) []Violation {
	var vs []Violation
	ss := sessionsOf(h)
	for _, id := range slices.Sorted(maps.Keys(ss)) {
		f := ss[id]
		if revoked(h, f.Client, f.LastAlive()-f.TTL, f.LostAt()) {
			continue
		}
		if v, ok := goneEarly(f); ok {
			vs = append(vs, v)
			continue
		}
		lost := f.LostAt()
		if lost == pending || !keptAlive(h, f, lost) {
			continue
		}
		last := f.LastAlive()
		vs = append(vs, Violation{Check: checkSessionKept, At: lost, Client: f.Client,
			What: fmt.Sprintf("session %s of client %d was lost %v after the send of its last acknowledged keepalive (%s), though its client kept it alive (never paused, cut off or closed)%s",
				short(id, ""), f.Client, time.Duration(lost-last).Round(time.Millisecond), f.lostHow(), faultsDuring(h, last, lost))})
	}
	return vs
}

// goneEarly finds the first breach of the lease rule of session f: a
// keepalive acknowledged after it was reported gone, or a report of it gone
// before the lease of an acknowledged keepalive ended.
func goneEarly(f *sessionFacts) (Violation, bool) {
	if f.GoneAt == pending {
		return Violation{}, false
	}
	for _, k := range f.Alive {
		if k > f.GoneAt {
			return Violation{Check: checkSessionKept, At: k, Client: f.Client,
				What: fmt.Sprintf("session %s of client %d acknowledged a keepalive sent %v after it was reported gone (%s)",
					short(f.ID, ""), f.Client, time.Duration(k-f.GoneAt).Round(time.Millisecond), f.GoneKind)}, true
		}
		if k+f.TTL > f.GoneAt {
			return Violation{Check: checkSessionKept, At: f.GoneAt, Client: f.Client,
				What: fmt.Sprintf("session %s of client %d was reported gone (%s) %v before the lease of a keepalive acknowledged to it ended",
					short(f.ID, ""), f.Client, f.GoneKind, time.Duration(k+f.TTL-f.GoneAt).Round(time.Millisecond))}, true
		}
	}
	return Violation{}, false
}

// keptAlive reports whether the client of session f kept it alive until
// to: it was neither paused (pause-client) nor cut off from the cluster
// (partition-client), nor its session revoked by an operator action
// (revoked), at any moment from a lease before the session's last
// acknowledged keepalive to to, it had not asked to close the session, and
// its process still ran.
func keptAlive(h History, f *sessionFacts, to int64) bool {
	from := f.LastAlive() - f.TTL
	return !clientPaused(h, f.Client, from, to) && !clientCut(h, f.Client, from, to) && !revoked(h, f.Client, from, to) &&
		f.CloseCall > to && h.exitOf(f.Client) > to
}

// faultsDuring names the faults that overlapped [from, to], as ", during
// KIND TARGET, ..." ("" if none).
func faultsDuring(h History, from, to int64) string {
	var fs []string
	for _, f := range h.Faults {
		if f.Start <= to && f.End >= from {
			fs = append(fs, f.Kind+" "+f.Target)
		}
	}
	if len(fs) == 0 {
		return ""
	}
	return ", during " + strings.Join(fs, ", ")
}

// lateGrantSlack is how soon after a hold begins its Lost() must be
// reported closed when the grant had ended before its client knew of it
// (the late-grant rule of checkLostBeforeRegrant): a client may hand out
// such a lock with Lost() already closed, whose report trails the hold's.
const lateGrantSlack = time.Second

// checkLostBeforeRegrant checks the client's promise about Lost() (check
// 5): a lock's Lost() channel closes before the cluster could grant the
// lock to anyone else. For every grant g1 a client worked under (a hold)
// and the first acknowledgement A2 of a later grant of that lock to
// another (session, holder) (a higher token), g1's Lost() must have been
// reported closed by A2. It returns the violations and how many grants it
// could judge (Lost() reported closed by A2, or a violation).
//
// It is sound: a correct cluster grants an exclusive lock to someone else
// only after the holder released it, its session was closed, or its
// session expired and then the lock-delay ran out; expiry comes at the
// earliest TTL after the last acknowledged keepalive was sent. A correct
// client closes Lost() before it sends a release (Unlock) or a close
// (Session.Close), and otherwise by lease end + lock-delay − a margin,
// counted from that same send, so before any grant to someone else. Left
// out, because the promise does not cover them or the history cannot
// judge them:
//
//   - a later grant acknowledged before the client had g1's handle (its
//     hold): no Lost() existed yet. The late-grant rule judges it instead:
//     a client that learns of a grant only after the lock was granted to
//     another (a late answer: the late-answer fault, a connection that
//     delivers it after a cut) must not report it held with Lost() open;
//     Lost() must be reported closed within lateGrantSlack of the hold
//     (the exemptions below apply, up to the hold);
//   - g1 released by its client (any release of that holder sent) or its
//     session closed by its client (a close sent) before A2: both close
//     Lost() first, and the report may trail the call;
//   - a client paused (SIGSTOP, pause-client) at any moment from the open
//     of g1's session to A2: a stopped process runs no timer (the fencing
//     check covers stale paused holders);
//   - g1's Lost() never reported and the client's process ended by A2 (a
//     process that is gone trusts nothing; while it runs, every Lost()
//     that closes is reported, before the process exits).
//
// The workload takes exclusive locks only; a shared grant does not
// exclude later shared grants and would have to be left out too.
func checkLostBeforeRegrant(h History) ([]Violation, int) {
	type key struct{ s, h, l string }
	holds := map[key]HoldRec{}
	for _, hd := range h.Holds {
		k := key{hd.Session, hd.Holder, hd.Lock}
		if _, ok := holds[k]; !ok {
			holds[k] = hd
		}
	}
	grants := grantsOf(h)
	ss := sessionsOf(h)
	var kinds map[[3]string]grantKind
	if h.Mixed {
		_, kinds = kindsOf(h)
	}
	var vs []Violation
	judged := 0
	for _, lock := range slices.Sorted(maps.Keys(grants)) {
		gs := grants[lock]
		for i, g1 := range gs {
			hd, ok := holds[key{g1.Session, g1.Holder, lock}]
			if !ok {
				continue
			}
			var g2 *grant
			for j := i + 1; j < len(gs); j++ {
				g := &gs[j]
				if g.Token > g1.Token && (g.Session != g1.Session || g.Holder != g1.Holder) &&
					(g2 == nil || g.Acked < g2.Acked) &&
					(kinds == nil || conflicts(kinds[[3]string{g1.Session, g1.Holder, lock}], kinds[[3]string{g.Session, g.Holder, lock}])) {
					g2 = g
				}
			}
			if g2 == nil {
				continue
			}
			a2 := g2.Acked
			from := hd.Held
			f := ss[g1.Session]
			if f != nil {
				from = min(from, f.Opened)
			}
			if a2 <= hd.Held {
				// The late-grant rule: the client learnt of g1 only after
				// the cluster had granted the lock to another.
				if g1.ReleaseCall <= hd.Held || f != nil && f.CloseCall <= hd.Held || clientPaused(h, g1.Client, from, hd.Held) {
					continue
				}
				judged++
				if hd.Lost != pending && hd.Lost <= hd.Held+int64(lateGrantSlack) {
					continue
				}
				open := "never closed while the client ran"
				if hd.Lost != pending {
					open = fmt.Sprintf("closed %v later", time.Duration(hd.Lost-hd.Held).Round(time.Millisecond))
				}
				vs = append(vs, Violation{Check: checkLostRegrant, At: hd.Held, Client: g1.Client,
					What: fmt.Sprintf("client %d reported it held lock %s (token %d, Lost() open; %s) at %.3fs, after client %d was granted it (token %d) at %.3fs: a grant that ended before its client knew of it was trusted",
						g1.Client, lock, g1.Token, open, float64(hd.Held-h.Start)/1e9, g2.Client, g2.Token, float64(a2-h.Start)/1e9)})
				continue
			}
			if hd.Lost <= a2 {
				judged++
				continue
			}
			if g1.ReleaseCall <= a2 || f != nil && f.CloseCall <= a2 || clientPaused(h, g1.Client, from, a2) ||
				hd.Lost == pending && h.exitOf(g1.Client) <= a2 {
				continue
			}
			judged++
			open := "never closed while the client ran"
			if hd.Lost != pending {
				open = fmt.Sprintf("closed %v later", time.Duration(hd.Lost-a2).Round(time.Millisecond))
			}
			vs = append(vs, Violation{Check: checkLostRegrant, At: a2, Client: g1.Client,
				What: fmt.Sprintf("client %d still trusted lock %s (token %d, Lost() open; %s) when client %d was granted it (token %d) at %.3fs: Lost() must close before the cluster can grant the lock to anyone else",
					g1.Client, lock, g1.Token, open, g2.Client, g2.Token, float64(a2-h.Start)/1e9)})
		}
	}
	return vs, judged
}

// heldInTransit reports whether w is the write a late-write fault held on
// its way to the resource: of the fault's client, lock and token, decided
// while the fault lasted (the fault lets it land, waits for its decision,
// and only then ends; its client is stopped meanwhile).
func heldInTransit(h History, w WriteRec) bool {
	target := fmt.Sprintf("client%d", w.Client)
	for _, f := range h.Faults {
		if f.Kind == faultLateWrite && f.Target == target && f.Lock == w.Lock && f.Token == w.Token &&
			f.Start <= w.At && w.At <= f.End {
			return true
		}
	}
	return false
}

// grantAcked returns when the grant that write w was made under was
// acknowledged (the first grant of gs with w's session, holder and token;
// w.At if none is).
func grantAcked(gs []grant, w WriteRec) int64 {
	for _, g := range gs {
		if g.Session == w.Session && g.Holder == w.Holder && g.Token == w.Token {
			return g.Acked
		}
	}
	return w.At
}

// quickChecks runs every check but linearizability.
func quickChecks(h History) []Violation {
	ev, _ := checkExecWriters(h)
	if h.Permits > 0 {
		return append(semaphoreChecks(h), ev...)
	}
	if h.Mixed {
		return mixedChecks(h)
	}
	vs := append(checkFence(h), ev...)
	gv, _ := checkGrantsKept(h)
	lv, _ := checkLostBeforeRegrant(h)
	qv, _ := checkQueueOrder(h)
	nv, _ := checkNoGhostGrant(h)
	vs = append(append(append(vs, gv...), checkSessionsKept(h)...), lv...)
	wv, _ := checkPrefixWatch(h)
	return append(append(append(vs, qv...), nv...), wv...)
}

func describeHolders(hs []holderInfo) string {
	if len(hs) == 0 {
		return "free"
	}
	s := ""
	for i, h := range hs {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s token %d", short(h.Session, h.Holder), h.Token)
	}
	return s
}
