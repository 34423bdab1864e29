package main

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"time"
)

// The checks of a lock's queue (issue "Waits that keep their word"): a
// waiter's place belongs to (lock, session, holder) in the replicated
// state until it is granted, its wait runs out (the requested wait, timed
// by every leader on its own clock from no earlier than the request, and
// restarted in full after a failover, so never short), its session ends,
// or its holder releases (cancels) it. A retry with the same holder id
// finds the same place; a request that stops waiting does not dequeue;
// no_leader means nothing was appended.

// Check names of the queue checks.
const (
	checkQueueFIFO = "queue-order"
	checkNoGhost   = "no-ghost-grant"
)

// grantSeen is one grant of a lock as the history shows it: its holder,
// its token, and the earliest moment it was known (an acknowledged
// acquire, or the return of a read naming it): the grant took effect
// before Seen.
type grantSeen struct {
	Session, Holder string
	Token           uint64
	Seen            int64
	// Client is the client of the holder (-1: not known).
	Client int
}

// grantsSeen returns, per lock, every grant the history shows (by holder
// and token, from acknowledged acquires and from reads), in token order.
func grantsSeen(h History) map[string][]grantSeen {
	type key struct {
		lock, session, holder string
		token                 uint64
	}
	client := holderClients(h)
	seen := map[key]*grantSeen{}
	add := func(lock, session, holder string, token uint64, at int64, c int) {
		k := key{lock, session, holder, token}
		if g, ok := seen[k]; ok {
			g.Seen = min(g.Seen, at)
			return
		}
		seen[k] = &grantSeen{Session: session, Holder: holder, Token: token, Seen: at, Client: c}
	}
	for _, o := range h.Ops {
		switch {
		case o.Kind == kindAcquire && o.Result == resOK && o.Done():
			add(o.Lock, o.Session, o.Holder, o.Token, o.Return, o.Client)
		case o.Kind == kindRead && o.Result == resOK && o.Done():
			for _, hd := range o.Holders {
				c, ok := client[hd.Holder]
				if !ok {
					c = -1
				}
				add(o.Lock, hd.Session, hd.Holder, hd.Token, o.Return, c)
			}
		}
	}
	out := map[string][]grantSeen{}
	for k, g := range seen {
		out[k.lock] = append(out[k.lock], *g)
	}
	for _, gs := range out {
		sort.Slice(gs, func(i, j int) bool {
			if gs[i].Token != gs[j].Token {
				return gs[i].Token < gs[j].Token
			}
			return gs[i].Holder < gs[j].Holder
		})
	}
	return out
}

// holderClients maps every holder id that asked for a lock to its client.
func holderClients(h History) map[string]int {
	out := map[string]int{}
	for _, o := range h.Ops {
		if o.Kind == kindAcquire && o.Holder != "" {
			out[o.Holder] = o.Client
		}
	}
	return out
}

// holderOps is what one holder id did on one lock: its acquires and
// releases, in call order, and its session.
type holderOps struct {
	Client   int
	Session  string
	Acquires []Op
	Releases []Op
}

// opsByHolder groups the acquires and releases of h by lock and holder id.
func opsByHolder(h History) map[[2]string]*holderOps {
	out := map[[2]string]*holderOps{}
	for _, o := range h.Ops {
		if (o.Kind != kindAcquire && o.Kind != kindRelease) || o.Holder == "" {
			continue
		}
		k := [2]string{o.Lock, o.Holder}
		ho := out[k]
		if ho == nil {
			ho = &holderOps{Client: o.Client, Session: o.Session}
			out[k] = ho
		}
		if o.Kind == kindAcquire {
			ho.Acquires = append(ho.Acquires, o)
		} else {
			ho.Releases = append(ho.Releases, o)
		}
	}
	return out
}

// endsPlace reports whether an acquire's answer says that the holder's
// place ended, not granted (or, not_found, that its session is gone).
func endsPlace(res string) bool {
	return res == resWaitTimeout || res == resWaitCancelled || res == resNotFound
}

// placeEndBound returns the earliest moment at which the place in lock's
// queue that a read r showed for holder could have ended other than by a
// grant to it (math.MinInt64: at any time, as far as the history tells):
//
//   - its wait running out: no earlier than Call + WaitFor of some
//     acquire of the holder (a leader times the requested wait from no
//     earlier than the request, and a retry resets it to the retry's own
//     wait from then, so the earliest such sum bounds every deadline); a
//     try, or a wait whose length is not known, counts from its Call;
//   - an answer that its wait ended (wait_timeout, wait_cancelled,
//     session_not_found): no earlier than that acquire's Call;
//   - its holder's release (cancel): no earlier than the release's Call;
//   - its session's end: no earlier than the first close sent, the lease
//     of its last acknowledged keepalive (sent + TTL), or the call of the
//     first operation answered session_not_found.
//
// An acquire or release that returned a definite answer before r was
// sent is left out: it took effect before r, so it neither set the
// deadline of the place r saw (answered ok, wait_timeout, wait_cancelled
// or not_found: that place came later) nor ended it.
func placeEndBound(ho *holderOps, ss map[string]*sessionFacts, notFoundCall map[string]int64, r Op) int64 {
	if ho == nil {
		return math.MinInt64
	}
	f := ss[ho.Session]
	if f == nil {
		return math.MinInt64
	}
	bound := min(f.CloseCall, f.LastAlive()+f.TTL)
	if c, ok := notFoundCall[ho.Session]; ok {
		bound = min(bound, c)
	}
	before := func(o Op) bool {
		return o.Done() && o.Return < r.Call && o.Result != resUnknown && o.Result != resFailed
	}
	for _, a := range ho.Acquires {
		if before(a) && (a.Result == resOK || endsPlace(a.Result)) {
			continue
		}
		b := a.Call
		if a.Wait && a.WaitFor > 0 {
			b = a.Call + a.WaitFor
		}
		if a.Done() && endsPlace(a.Result) {
			b = a.Call
		}
		bound = min(bound, b)
	}
	for _, rel := range ho.Releases {
		if before(rel) {
			continue
		}
		bound = min(bound, rel.Call)
	}
	return bound
}

// firstNotFoundCalls returns, per session, the call time of the first
// operation answered session_not_found.
func firstNotFoundCalls(h History) map[string]int64 {
	out := map[string]int64{}
	for _, o := range h.Ops {
		if o.Result == resNotFound && o.Session != "" {
			if c, ok := out[o.Session]; !ok || o.Call < c {
				out[o.Session] = o.Call
			}
		}
	}
	return out
}

// checkQueueOrder checks that grants follow queue order (check 6): if a
// read r of a lock showed holder A waiting, no later grant of that lock
// may go to a holder B that was behind A in r's queue, or not in it at
// all, before A is granted, unless A's place could have ended first. It
// returns the violations (one per waiter A: the first overtaking grant
// found) and how many (lock, A, B) pairs it judged: B listed behind A and
// both granted after r, A first, or a violation.
//
// "Later" is by Raft index, not by time: r's Index is the index of the
// lock's last change r saw, and a grant's token is the index of the entry
// that granted it, so a grant with a token above r's Index came after r's
// state, and between two grants after r the lower token came first (a run
// of shared waiters is granted by one entry, under one token: together).
// B's grant took effect before it was first seen (its acknowledgement, or
// a read naming it); A's place could not have ended before placeEndBound.
// When B's grant, with a token below A's first token after r (or A not
// granted after r at all), was seen before that bound, B was granted
// while A still waited ahead of it (or ahead of where B joined the queue),
// which a FIFO queue forbids: a correct cluster cannot produce it.
//
// A restore replaces the queues with the backup's: grants first seen
// after a restore that began after r was sent are not judged against r.
// A waiter whose client's token was deleted (its session closed) after r
// was sent may have lost its place then (see revoked).
//
// Left out: holders ahead of A in r's queue (they are granted first, and
// one whose place ended may come back behind A unseen), and a shared A
// (it may be granted without being seen and keep its grant while later
// shared waiters join it). The workload takes exclusive locks only; the
// check assumes, as the cluster does, that a shared waiter does not
// overtake an exclusive one ahead of it. Reads without an Index (older
// histories) are not used.
func checkQueueOrder(h History) ([]Violation, int) {
	grants := grantsSeen(h)
	byHolder := opsByHolder(h)
	ss := sessionsOf(h)
	nf := firstNotFoundCalls(h)
	client := holderClients(h)
	type pair struct{ lock, a, b string }
	judged := map[pair]bool{}
	// Reported once per waiter: its first overtaking grant found.
	reported := map[[2]string]bool{}
	var vs []Violation
	for _, r := range h.Ops {
		if r.Kind != kindRead || r.Result != resOK || !r.Done() || len(r.Queue) == 0 || r.Index == 0 {
			continue
		}
		gs := grants[r.Lock]
		after := gs[sort.Search(len(gs), func(i int) bool { return gs[i].Token > r.Index }):]
		after = slices.DeleteFunc(slices.Clone(after), func(g grantSeen) bool { return restoredBetween(h, r.Call, g.Seen) })
		// first[x] is the first token granted to holder x after r.
		first := map[string]uint64{}
		for _, g := range after {
			if _, ok := first[g.Holder]; !ok {
				first[g.Holder] = g.Token
			}
		}
		ahead := map[string]bool{}
		for i, q := range r.Queue {
			a := q.Holder
			if q.Mode == "shared" {
				// A shared waiter may be granted without being seen, and
				// keep its grant while later shared waiters join it.
				ahead[a] = true
				continue
			}
			tA := first[a]
			// Listed behind A and granted after r, with A granted first:
			// a pair judged in order.
			for _, b := range r.Queue[i+1:] {
				if tB, ok := first[b.Holder]; ok && tA != 0 && tA <= tB {
					judged[pair{r.Lock, a, b.Holder}] = true
				}
			}
			var bound int64
			haveBound := false
			for _, g := range after {
				if tA != 0 && g.Token >= tA {
					break // from here on A came first (or together)
				}
				if g.Holder == a || ahead[g.Holder] {
					continue
				}
				if !haveBound {
					bound, haveBound = placeEndBound(byHolder[[2]string{r.Lock, a}], ss, nf, r), true
					if ca, ok := client[a]; ok && revoked(h, ca, r.Call, bound) {
						bound = r.Call
					}
				}
				if g.Seen >= bound {
					continue // A's place may have ended first
				}
				judged[pair{r.Lock, a, g.Holder}] = true
				key := [2]string{r.Lock, a}
				if reported[key] {
					continue
				}
				reported[key] = true
				ca, ok := client[a]
				if !ok {
					ca = -1
				}
				where := "behind it"
				if !slices.ContainsFunc(r.Queue, func(x queuedInfo) bool { return x.Holder == g.Holder }) {
					where = "not yet queued"
				}
				ends := "never"
				if bound != pending {
					ends = fmt.Sprintf("%.3fs", float64(bound-h.Start)/1e9)
				}
				vs = append(vs, Violation{Check: checkQueueFIFO, At: g.Seen, Client: ca,
					What: fmt.Sprintf("lock %s: a read by client %d returned at %.3fs (index %d) showed %s waiting at place %d, %s %s; the latter was granted token %d (seen at %.3fs) before it, though its place could not have ended before %s (its wait, a release, its session): a waiter was overtaken",
						r.Lock, r.Client, float64(r.Return-h.Start)/1e9, r.Index, describeWaiter(a, ca), i+1,
						describeWaiter(g.Holder, g.Client), where, g.Token,
						float64(g.Seen-h.Start)/1e9, ends)})
			}
			ahead[a] = true
		}
	}
	sort.SliceStable(vs, func(i, j int) bool { return vs[i].At < vs[j].At })
	return vs, len(judged)
}

// describeWaiter names a holder id and its client for a report.
func describeWaiter(holder string, client int) string {
	if len(holder) > 6 {
		holder = holder[:6]
	}
	if client < 0 {
		return "holder " + holder
	}
	return fmt.Sprintf("holder %s (client %d)", holder, client)
}

// noPlaceAnswer reports whether an acquire's answer is definite and says
// that the call left its holder with no place and no grant, and no
// attempt of the call may take effect later: no_leader (nothing was
// appended), wait_timeout or wait_cancelled (the wait ended, not
// granted), or lock_busy to a try (a try never queues), every HTTP
// request of the call accounted for (counted, none unsure).
func noPlaceAnswer(o Op) bool {
	if !o.Done() || o.Attempts == 0 || o.Unsure > 0 {
		return false
	}
	switch o.Result {
	case resNoLeader, resWaitTimeout, resWaitCancelled:
		return true
	case resBusy:
		return !o.Wait
	}
	return false
}

// ghostStats is what checkNoGhostGrant judged.
type ghostStats struct {
	// Judged counts the holder ids whose place surely ended; AfterNoLeader
	// those of them whose last acquire was answered no_leader.
	Judged, AfterNoLeader int
}

// checkNoGhostGrant checks that a holder whose place surely ended is never
// seen again (check 7): no read sent after that moment shows it holding
// the lock or waiting in its queue. A holder id's place surely ended at T
// when its last acquire (no other acquire of that holder id invoked after
// it, none still running when it was sent) returned at T with
//
//   - session_not_found: its session is gone, and with it every place and
//     grant of the session, for good; or
//   - an answer that leaves no place (noPlaceAnswer: no_leader, which
//     promises that nothing was appended; wait_timeout; wait_cancelled;
//     lock_busy to a try), and so did every earlier acquire of that holder
//     id, with every HTTP request of all of them accounted for: no request
//     of that holder id can still be on its way to take effect.
//
// A restore may bring a place back (the backup's queues and holders):
// reads that returned after a restore began, of a holder whose place
// ended before that restore, are not used.
//
// Not judged, because the place may legitimately live on: a holder with
// an acquire answered ok or of unknown outcome (a request that stopped
// waiting keeps its place; an attempt may be applied late), lock_busy to
// a wait, or an acquire whose retries hid an attempt that broke after it
// was sent. Acknowledged grants appear only through acquires, so with no
// later acquire of the holder id, a ghost grant can only be seen by reads.
func checkNoGhostGrant(h History) ([]Violation, ghostStats) {
	var st ghostStats
	var vs []Violation
	groups := opsByHolder(h)
	keys := slices.SortedFunc(maps.Keys(groups), func(a, b [2]string) int {
		if a[0] != b[0] {
			return cmpString(a[0], b[0])
		}
		return cmpString(a[1], b[1])
	})
	reads := map[string][]Op{}
	for _, o := range h.Ops {
		if o.Kind == kindRead && o.Result == resOK && o.Done() {
			reads[o.Lock] = append(reads[o.Lock], o)
		}
	}
	for _, k := range keys {
		ho := groups[k]
		if len(ho.Acquires) == 0 {
			continue
		}
		x := ho.Acquires[len(ho.Acquires)-1]
		if !x.Done() {
			continue
		}
		ok := x.Result == resNotFound || noPlaceAnswer(x)
		for _, o := range ho.Acquires[:len(ho.Acquires)-1] {
			if !o.Done() || o.Return >= x.Call || (x.Result != resNotFound && !noPlaceAnswer(o)) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		st.Judged++
		if x.Result == resNoLeader {
			st.AfterNoLeader++
		}
		lock, holder := k[0], k[1]
		for _, r := range reads[lock] {
			if r.Call <= x.Return || restoredBetween(h, x.Call, r.Return) {
				continue
			}
			seen := ""
			for _, hd := range r.Holders {
				if hd.Holder == holder && hd.Session == x.Session {
					seen = fmt.Sprintf("holding it (token %d)", hd.Token)
				}
			}
			for i, q := range r.Queue {
				if seen == "" && q.Holder == holder {
					seen = fmt.Sprintf("waiting in its queue (place %d)", i+1)
				}
			}
			if seen == "" {
				continue
			}
			naive := ""
			if x.Naive {
				naive = " (the naive waiter took it at its word)"
			}
			vs = append(vs, Violation{Check: checkNoGhost, At: r.Return, Client: x.Client,
				What: fmt.Sprintf("lock %s: client %d's holder %s was answered %s at %.3fs%s, its place surely ended, yet a read by client %d via %s sent %v later showed it %s: a ghost grant",
					lock, x.Client, short(x.Session, holder), x.Result, float64(x.Return-h.Start)/1e9, naive,
					r.Client, r.Node, time.Duration(r.Call-x.Return).Round(time.Millisecond), seen)})
			break
		}
	}
	sort.SliceStable(vs, func(i, j int) bool { return vs[i].At < vs[j].At })
	return vs, st
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
