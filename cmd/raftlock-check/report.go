package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Report is the outcome of a run: what happened and what the checks found.
type Report struct {
	// Setup describes the run.
	Setup    string
	Elapsed  time.Duration
	Warnings []string

	Ops      int
	OpCounts map[string]map[string]int // kind -> result -> count
	Accepted int
	Rejected int

	Faults  map[string]int
	Skipped map[string]int
	// Unavailable holds, per fault that took the leader away, the time
	// from the fault to the first answered request sent after it.
	Unavailable []unavailability

	SessionsOpened int
	// SessionsExpired counts sessions the cluster reported gone or their
	// client declared expired; ExpiredUnpaused those of them whose client
	// kept them alive (see keptAlive), each a violation of check 4.
	SessionsExpired int
	ExpiredUnpaused int

	// Freezes are the freeze-node faults.
	Freezes []FaultRec
	// LateAfterNewer counts the late-write faults whose held write landed
	// after a newer holder's write: those prove the resource's fence.
	LateAfterNewer int
	// LateAnswersHeld counts the late-answer faults whose client reported
	// the revoked grant held once its answer came (a hold): check 5 and
	// the fencing check judge those; the others' clients refused the
	// late grant, or gave up first.
	LateAnswersHeld int
	// MaxHoldGrants counts the acknowledged grants with a hold limit
	// (--max-hold-share), MaxHoldLost those whose Lost() closed before
	// their client asked to release them: the limit ended them.
	MaxHoldGrants, MaxHoldLost int

	// ClientCuts counts the partition-client faults, CutRegrants those
	// during which another client was granted the cut client's lock.
	ClientCuts  int
	CutRegrants int

	Lin        linearizability
	GrantReads int
	// LostJudged counts the grants the lost-before-regrant check judged.
	LostJudged int
	// QueueJudged counts the (waiter, later grant) pairs the queue-order
	// check judged; Ghost what the no-ghost-grant check judged.
	QueueJudged int
	Ghost       ghostStats
	// Watch is what the prefix-watch check judged (check 9).
	Watch watchStats
	// QueueReads counts the reads that showed two waiters or more, and
	// LongestQueue the most waiters a read showed.
	QueueReads, LongestQueue int
	// Naive counts the naive waiter's acquires by result.
	Naive map[string]int
	// NodeStartsJudged counts the disk faults after which the node-starts
	// check waited for the nodes they hit.
	NodeStartsJudged int
	// Worker is what the clients that drove a conformance worker did
	// (nil: none did).
	Worker *workerFigures
	// Execs is what the exec holders did (nil: none ran).
	Execs *execFigures
	// Permits is a semaphore run's (0: plain locks); SlotWrites counts the
	// accepted writes the semaphore-slots check judged, and SlotsUsed the
	// distinct slots granted.
	Permits, SlotWrites, SlotsUsed int
	// Mixed is a mixed-kinds run's: TenureWrites counts the accepted
	// writes the tenure check judged, KindsGranted the grants of each kind
	// ("exclusive", "shared", "semaphore of N").
	Mixed        bool
	TenureWrites int
	KindsGranted map[string]int

	Violations []Violation
	// Around lists the history around the first violation of a check
	// other than linearizability (aroundFirst), for a report that must
	// stand on its own.
	Around []string
	// Seed is the run's seed (--seed): with the same flags it makes the
	// same fault schedule and client choices.
	Seed int64
	// Artifacts are the files written for a failed run.
	Artifacts []string
	// Dir is where the run kept its logs.
	Dir string
}

// unavailability is the outage after one fault.
type unavailability struct {
	Kind string
	D    time.Duration
}

// analyze runs every check on h.
func analyze(h History, timeout time.Duration) *Report {
	r := &Report{OpCounts: map[string]map[string]int{}, Faults: map[string]int{}, Skipped: map[string]int{},
		Naive: map[string]int{}}
	r.Ops = len(h.Ops)
	r.MaxHoldGrants, r.MaxHoldLost = maxHoldEnds(h)
	for _, o := range h.Ops {
		if o.Kind == kindRead && o.Result == resOK && len(o.Queue) >= 2 {
			r.QueueReads++
		}
		r.LongestQueue = max(r.LongestQueue, len(o.Queue))
		if o.Kind == kindAcquire && o.Naive {
			res := o.Result
			if !o.Done() {
				res = "pending"
			}
			r.Naive[res]++
		}
		if r.OpCounts[o.Kind] == nil {
			r.OpCounts[o.Kind] = map[string]int{}
		}
		res := o.Result
		if !o.Done() {
			res = "pending"
		}
		r.OpCounts[o.Kind][res]++
	}
	for _, w := range h.Writes {
		if w.Accepted {
			r.Accepted++
		} else {
			r.Rejected++
		}
	}
	for _, f := range h.Faults {
		r.Faults[f.Kind]++
	}
	r.ClientCuts, r.CutRegrants = cutRegrants(h)
	r.Unavailable = unavailabilities(h)
	ss := sessionsOf(h)
	r.SessionsOpened = len(ss)
	for _, f := range ss {
		lost := f.LostAt()
		if lost == pending {
			continue
		}
		r.SessionsExpired++
		if keptAlive(h, f, lost) {
			r.ExpiredUnpaused++
		}
	}
	for _, f := range h.Faults {
		if f.Kind == faultFreezeNode {
			r.Freezes = append(r.Freezes, f)
		}
		if f.Kind == faultLateWrite && strings.Contains(f.Note, lateAfterNewerNote) {
			r.LateAfterNewer++
		}
		if f.Kind == faultLateAnswer && slices.ContainsFunc(h.Holds, func(hd HoldRec) bool {
			return fmt.Sprintf("client%d", hd.Client) == f.Target && hd.Lock == f.Lock && hd.Token == f.Token
		}) {
			r.LateAnswersHeld++
		}
	}
	r.Worker = workerFiguresOf(h, ss)
	r.Execs = execFiguresOf(h)
	if h.Permits > 0 {
		return r.analyzeSemaphores(h, timeout)
	}
	if h.Mixed {
		return r.analyzeMixed(h)
	}
	r.Lin = runPorcupine(h, timeout)
	if r.Lin.Result == porcupine.Illegal {
		r.Violations = append(r.Violations, illegalViolation(r.Lin))
	}
	r.Violations = append(r.Violations, quickChecks(h)...)
	_, r.GrantReads = checkGrantsKept(h)
	_, r.LostJudged = checkLostBeforeRegrant(h)
	_, r.QueueJudged = checkQueueOrder(h)
	_, r.Ghost = checkNoGhostGrant(h)
	_, r.Watch = checkPrefixWatch(h)
	sort.SliceStable(r.Violations, func(i, j int) bool { return r.Violations[i].At < r.Violations[j].At })
	return r
}

// analyzeMixed runs the checks of a mixed-kinds run (mixed.go) on h,
// whose figures r already holds.
func (r *Report) analyzeMixed(h History) *Report {
	r.Mixed = true
	r.Lin = linearizability{Result: porcupine.Ok, NotRun: "a mixed-kinds run: the lock model has one exclusive holder per lock"}
	r.Violations = append(r.Violations, mixedChecks(h)...)
	_, r.TenureWrites = checkTenures(h)
	_, r.GrantReads = checkGrantsKept(h)
	_, r.LostJudged = checkLostBeforeRegrant(h)
	r.KindsGranted = map[string]int{}
	grants, _ := kindsOf(h)
	for _, gs := range grants {
		for _, g := range gs {
			label := g.kind.String()
			if g.kind.permits > 0 {
				label = fmt.Sprintf("semaphore of %d", g.kind.permits)
			}
			r.KindsGranted[label]++
		}
	}
	sort.SliceStable(r.Violations, func(i, j int) bool { return r.Violations[i].At < r.Violations[j].At })
	return r
}

// analyzeSemaphores runs the checks of a semaphore run (semaphore.go) on
// h, whose figures r already holds, the semaphore model given timeout.
func (r *Report) analyzeSemaphores(h History, timeout time.Duration) *Report {
	r.Permits = h.Permits
	r.Lin = runSemPorcupine(h, timeout)
	if r.Lin.Result == porcupine.Illegal {
		r.Violations = append(r.Violations, illegalViolation(r.Lin))
	}
	r.Violations = append(r.Violations, semaphoreChecks(h)...)
	_, r.QueueJudged = checkSemQueueOrder(h)
	_, r.Ghost = checkNoGhostGrant(h)
	_, r.SlotWrites = checkSlots(h)
	ps := perSlot(h)
	_, r.GrantReads = checkGrantsKept(ps)
	_, r.LostJudged = checkLostBeforeRegrant(ps)
	slots := map[string]bool{}
	for _, o := range ps.Ops {
		if o.Kind == kindAcquire {
			slots[o.Lock] = true
		}
	}
	r.SlotsUsed = len(slots)
	sort.SliceStable(r.Violations, func(i, j int) bool { return r.Violations[i].At < r.Violations[j].At })
	return r
}

// clientPaused reports whether client was paused at some time in [from, to]
// (pause-client, or late-write, which stops it while its write is held).
func clientPaused(h History, client int, from, to int64) bool {
	target := fmt.Sprintf("client%d", client)
	for _, f := range h.Faults {
		if (f.Kind == faultPauseClient || f.Kind == faultLateWrite) && f.Target == target && f.Start <= to && f.End >= from {
			return true
		}
	}
	return false
}

// clientCut reports whether client was cut off from the cluster
// (partition-client) at some time in [from, to].
func clientCut(h History, client int, from, to int64) bool {
	target := fmt.Sprintf("client%d", client)
	for _, f := range h.Faults {
		if f.Kind == faultPartitionClient && f.Target == target && f.Start <= to && f.End >= from {
			return true
		}
	}
	return false
}

// cutRegrants counts the partition-client faults, and those during which
// the cut client's lock was granted to someone else (an acknowledged grant
// with a higher token).
func cutRegrants(h History) (cuts, regrants int) {
	grants := grantsOf(h)
	for _, f := range h.Faults {
		if f.Kind != faultPartitionClient {
			continue
		}
		cuts++
		for _, g := range grants[f.Lock] {
			if g.Token > f.Token && g.Acked >= f.Start && g.Acked <= f.End {
				regrants++
				break
			}
		}
	}
	return cuts, regrants
}

// definite reports whether an operation's answer came from a serving
// leader.
func definite(o Op) bool {
	return o.Done() && o.Result != resUnknown && o.Result != resFailed
}

// unavailabilities measures, after each fault that took the leader away,
// how long until a request sent after the fault was answered.
func unavailabilities(h History) []unavailability {
	var out []unavailability
	for _, f := range h.Faults {
		if !f.LeaderLoss {
			continue
		}
		first := int64(pending)
		for _, o := range h.Ops {
			if o.Call >= f.Start && definite(o) && o.Return < first {
				first = o.Return
			}
		}
		if first != pending {
			out = append(out, unavailability{Kind: f.Kind, D: time.Duration(first - f.Start)})
		}
	}
	return out
}

// percentiles returns the (lower) median and the maximum of ds.
func percentiles(ds []time.Duration) (p50, max time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[(len(s)-1)/2], s[len(s)-1]
}

// exitCode is 0 for a clean run, 1 for violations, 3 for an inconclusive
// linearizability check.
func (r *Report) exitCode() int {
	switch {
	case len(r.Violations) > 0:
		return 1
	case r.Lin.Result != porcupine.Ok:
		return 3
	}
	return 0
}

// FrozenClients counts, over every freeze-node fault, the clients that
// talked to the node when it froze.
func (r *Report) FrozenClients() int {
	n := 0
	for _, f := range r.Freezes {
		n += len(f.Clients)
	}
	return n
}

// count returns the number of violations of check.
func (r *Report) count(check string) int {
	n := 0
	for _, v := range r.Violations {
		if v.Check == check {
			n++
		}
	}
	return n
}

func (r *Report) print(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("raftlock-check: %s", r.Setup)
	for _, warn := range r.Warnings {
		p("WARNING: %s", warn)
	}
	if r.Elapsed > 0 {
		p("run time: %v", r.Elapsed.Round(time.Second))
	}
	p("operations: %d", r.Ops)
	for _, k := range slices.Sorted(maps.Keys(r.OpCounts)) {
		var parts []string
		total := 0
		for _, x := range slices.Sorted(maps.Keys(r.OpCounts[k])) {
			parts = append(parts, fmt.Sprintf("%s %d", x, r.OpCounts[k][x]))
			total += r.OpCounts[k][x]
		}
		p("  %-10s %6d  (%s)", k, total, strings.Join(parts, ", "))
	}
	p("resource writes: %d accepted, %d rejected by the fence", r.Accepted, r.Rejected)
	var fs []string
	total := 0
	for _, k := range knownFaults {
		if n, s := r.Faults[k], r.Skipped[k]; n > 0 || s > 0 {
			f := fmt.Sprintf("%s %d", k, n)
			if s > 0 {
				f += fmt.Sprintf(" (+%d skipped)", s)
			}
			fs = append(fs, f)
			total += n
		}
	}
	p("faults: %d: %s", total, strings.Join(fs, ", "))
	if n := r.Faults[faultLateAnswer]; n > 0 {
		p("late answers: %d, the revoked grant reported held by its client after %d", n, r.LateAnswersHeld)
	}
	if r.MaxHoldGrants > 0 {
		p("hold limits: %d grants with one, %d of them lost before their release", r.MaxHoldGrants, r.MaxHoldLost)
	}
	if r.ClientCuts > 0 {
		p("client cuts: %d, the cut client's lock granted to another during %d", r.ClientCuts, r.CutRegrants)
	}
	var all []time.Duration
	byKind := map[string][]time.Duration{}
	for _, u := range r.Unavailable {
		all = append(all, u.D)
		byKind[u.Kind] = append(byKind[u.Kind], u.D)
	}
	p50, max := percentiles(all)
	p("unavailability after leader loss (%d): p50 %v, max %v", len(all), p50.Round(time.Millisecond), max.Round(time.Millisecond))
	for _, k := range knownFaults {
		if ds := byKind[k]; len(ds) > 0 {
			a, b := percentiles(ds)
			p("  %-17s %3d: p50 %v, max %v", k, len(ds), a.Round(time.Millisecond), b.Round(time.Millisecond))
		}
	}
	p("sessions: %d opened, %d expired (reported gone by the cluster or declared expired by their client; %d of them kept alive by their client)",
		r.SessionsOpened, r.SessionsExpired, r.ExpiredUnpaused)
	if len(r.Freezes) > 0 {
		var parts []string
		for _, f := range r.Freezes {
			role := "follower"
			if f.LeaderLoss {
				role = "leader"
			}
			parts = append(parts, fmt.Sprintf("%s (%s) %d/%d", f.Target, role, len(f.Clients), f.Asked))
		}
		p("node freezes: %d; clients talking to the frozen node when it froze: %s (%d in all)",
			len(r.Freezes), strings.Join(parts, ", "), r.FrozenClients())
	}
	p("queues: %d reads showed 2 waiters or more, the longest %d", r.QueueReads, r.LongestQueue)
	if len(r.Naive) > 0 {
		var parts []string
		total := 0
		for _, x := range slices.Sorted(maps.Keys(r.Naive)) {
			parts = append(parts, fmt.Sprintf("%s %d", x, r.Naive[x]))
			total += r.Naive[x]
		}
		p("naive waits: %d  (%s)", total, strings.Join(parts, ", "))
	}
	p("checks:")
	if r.Permits > 0 {
		p("  semaphores of %d permits: each slot judged as a lock (%d slots granted); %d violations of at most %d writers at once  (%d accepted writes judged)",
			r.Permits, r.SlotsUsed, r.count(checkSlotBound), r.Permits, r.SlotWrites)
	}
	if r.Mixed {
		var ks []string
		for _, k := range slices.Sorted(maps.Keys(r.KindsGranted)) {
			ks = append(ks, fmt.Sprintf("%s %d", k, r.KindsGranted[k]))
		}
		p("  mixed kinds: grants %s; %d tenure violations  (%d accepted writes judged)", strings.Join(ks, ", "), r.count(checkTenure), r.TenureWrites)
	}
	if r.Lin.NotRun != "" {
		p("  1 linearizable (porcupine): not run (%s)", r.Lin.NotRun)
	} else {
		model := ""
		if r.Permits > 0 {
			model = fmt.Sprintf(", the semaphore model of %d slots", r.Permits)
		}
		p("  1 linearizable (porcupine): %s  (%d operations, %d of unknown outcome, %d locks%s, %v)", r.Lin.Result, r.Lin.Ops, r.Lin.Unknown,
			r.Lin.Partitions, model, r.Lin.Elapsed.Round(time.Millisecond))
	}
	if r.Lin.Result == porcupine.Unknown {
		p("    INCONCLUSIVE: porcupine gave up after %v (--check-timeout): it found no violation, nor a linearization; \"raftlock-check analyze\" of the history tries again",
			r.Lin.Timeout)
	}
	if r.Mixed {
		p("  2 fencing at the resource:  judged by the tenure check (mixed kinds)")
	} else {
		p("  2 fencing at the resource:  %d violations", r.count(checkFencing))
	}
	p("  3 acknowledged grants kept: %d violations  (%d reads judged)", r.count(checkGrantKept), r.GrantReads)
	p("  4 live sessions kept:       %d violations", r.count(checkSessionKept))
	p("  5 Lost() before re-grant:   %d violations  (%d grants judged)", r.count(checkLostRegrant), r.LostJudged)
	if r.Mixed {
		p("  6, 7 queue order, no ghost grants: not run (a mixed-kinds run; no naive waiter)")
	} else {
		p("  6 grants in queue order:    %d violations  (%d waiter pairs judged)", r.count(checkQueueFIFO), r.QueueJudged)
		p("  7 no ghost grants:          %d violations  (%d holders judged, %d after no_leader)", r.count(checkNoGhost), r.Ghost.Judged, r.Ghost.AfterNoLeader)
	}
	if r.NodeStartsJudged > 0 || r.count(checkNodeStarts) > 0 {
		p("  8 nodes start again:        %d violations  (%d disk faults judged)", r.count(checkNodeStarts), r.NodeStartsJudged)
	}
	p("  9 prefix watch:             %d violations  (%d answers, %d resets, %d grants judged)",
		r.count(checkPrefixWatchName), r.Watch.Answers, r.Watch.Resets, r.Watch.Judged)
	r.Worker.print(p, r.Violations)
	r.Execs.print(p, r.Violations)
	p("violations: %d", len(r.Violations))
	for i, v := range r.Violations {
		if i == 20 {
			p("  ... %d more", len(r.Violations)-20)
			break
		}
		p("  [%s] %s", v.Check, v.What)
	}
	for _, l := range r.Around {
		p("%s", l)
	}
	if r.exitCode() != 0 {
		p("seed %d: run again with the same flags and --seed %d", r.Seed, r.Seed)
	}
	for _, a := range r.Artifacts {
		p("wrote %s", a)
	}
	if r.Dir != "" {
		p("logs in %s", r.Dir)
	}
}

// workerFigures is what the worker clients (--worker-clients) did: their
// operations, writes, holds and sessions.
type workerFigures struct {
	Clients  []int
	Command  []string
	Ops      map[string]map[string]int // kind -> result -> count
	Accepted int
	Rejected int
	// Holds counts their grants worked under, LostReported those whose
	// lost event came.
	Holds, LostReported     int
	SessionsOpened, Expired int
}

func workerFiguresOf(h History, ss map[string]*sessionFacts) *workerFigures {
	if len(h.Workers) == 0 {
		return nil
	}
	f := &workerFigures{Clients: h.Workers, Command: h.Worker, Ops: map[string]map[string]int{}}
	is := func(c int) bool { return slices.Contains(h.Workers, c) }
	for _, o := range h.Ops {
		if !is(o.Client) {
			continue
		}
		if f.Ops[o.Kind] == nil {
			f.Ops[o.Kind] = map[string]int{}
		}
		res := o.Result
		if !o.Done() {
			res = "pending"
		}
		f.Ops[o.Kind][res]++
	}
	for _, w := range h.Writes {
		switch {
		case !is(w.Client):
		case w.Accepted:
			f.Accepted++
		default:
			f.Rejected++
		}
	}
	for _, hr := range h.Holds {
		if is(hr.Client) {
			f.Holds++
			if hr.Lost != pending && hr.Lost != 0 {
				f.LostReported++
			}
		}
	}
	for _, s := range ss {
		if is(s.Client) {
			f.SessionsOpened++
			if s.LostAt() != pending {
				f.Expired++
			}
		}
	}
	return f
}

// print writes the worker clients' figures and the violations that name
// one of them, by check.
func (f *workerFigures) print(p func(string, ...any), vs []Violation) {
	if f == nil {
		return
	}
	p("worker clients %v (%s):", f.Clients, strings.Join(f.Command, " "))
	total := 0
	var kinds []string
	for _, k := range slices.Sorted(maps.Keys(f.Ops)) {
		var parts []string
		n := 0
		for _, x := range slices.Sorted(maps.Keys(f.Ops[k])) {
			parts = append(parts, fmt.Sprintf("%s %d", x, f.Ops[k][x]))
			n += f.Ops[k][x]
		}
		total += n
		kinds = append(kinds, fmt.Sprintf("%s %d (%s)", k, n, strings.Join(parts, ", ")))
	}
	p("  operations: %d: %s", total, strings.Join(kinds, "; "))
	p("  writes: %d accepted, %d rejected; holds: %d, their lost reported %d; sessions: %d opened, %d expired",
		f.Accepted, f.Rejected, f.Holds, f.LostReported, f.SessionsOpened, f.Expired)
	var parts []string
	n := 0
	for _, c := range []string{checkFencing, checkGrantKept, checkSessionKept, checkLostRegrant, checkQueueFIFO, checkNoGhost} {
		k := 0
		for _, v := range vs {
			if v.Check == c && slices.Contains(f.Clients, v.Client) {
				k++
			}
		}
		n += k
		parts = append(parts, fmt.Sprintf("%s %d", c, k))
	}
	p("  violations naming them: %d (%s; linearizability judges all clients at once)", n, strings.Join(parts, ", "))
}

// maxHoldEnds counts h's acknowledged grants with a hold limit, and those
// of them whose Lost() closed before their client asked to release them.
func maxHoldEnds(h History) (grants, lost int) {
	type key struct{ s, h, l string }
	lostAt := map[key]int64{}
	for _, hd := range h.Holds {
		lostAt[key{hd.Session, hd.Holder, hd.Lock}] = hd.Lost
	}
	for _, gs := range grantsOf(h) {
		for _, g := range gs {
			if g.LimitAt == pending {
				continue
			}
			grants++
			if at, ok := lostAt[key{g.Session, g.Holder, g.Lock}]; ok && at < g.ReleaseCall {
				lost++
			}
		}
	}
	return grants, lost
}
