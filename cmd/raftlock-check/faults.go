package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"slices"
	"sort"
	"syscall"
	"time"
)

// clientPauseExtra is how much longer than its TTL a paused client stays
// stopped (unless someone else is granted its lock first).
const clientPauseExtra = 2 * time.Second

// clientPauseMax is the longest pause of a client.
func clientPauseMax(ttl time.Duration) time.Duration { return ttl + clientPauseExtra }

// A client cut off from the cluster stays cut for TTL + lock-delay +
// clientCutExtraMin..clientCutExtraMax (unless healed early, see
// partitionClient): past the moment the cluster can grant its lock to a
// waiting client, with time for that grant to be acknowledged.
const clientCutExtraMin, clientCutExtraMax = 2 * time.Second, 4 * time.Second

// pinTimeout bounds the wait for a client's answer to msgPin.
const pinTimeout = 2 * time.Second

// whereTimeout bounds the wait for the clients' answers to msgWhere.
const whereTimeout = time.Second

// A frozen node (freeze-node) stays stopped for the clients' TTL + grace +
// freezeExtraMin..freezeExtraMax: longer than a client stuck on it could
// keep its session, on either side.
const freezeExtraMin, freezeExtraMax = 2 * time.Second, 4 * time.Second

// errSkipped marks a fault that could not be injected now.
var errSkipped = errors.New("skipped")

// injector injects faults into a run, one at a time.
type injector struct {
	cfg      Config
	cl       *cluster
	fw       *firewall // nil: no partitions
	cs       *clientSet
	track    *tracker
	hist     *historyLog
	rng      *rand.Rand
	progress io.Writer
	start    int64

	counts  map[string]int
	skipped map[string]int
	// freezes counts the freeze-node faults injected: the role of the
	// next frozen node alternates with it.
	freezes int
	// powerLosses and fills count the power-loss and fill-disk faults:
	// their targets take turns with them (disks.go).
	powerLosses, fills int
	// failures are the node-starts violations: nodes that did not come
	// back after a disk fault.
	failures []Violation
	// tokens are the clients' ACL tokens now (ACLs on), by client.
	tokens []clientToken
	// execs are the exec holders (nil: none).
	execs *execHolders
}

func (in *injector) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(in.rng.Int63n(int64(hi-lo)+1))
}

func (in *injector) logf(format string, args ...any) {
	fmt.Fprintf(in.progress, "[%7.1fs] %s\n", float64(monoNow()-in.start)/1e9, fmt.Sprintf(format, args...))
}

// kinds returns the fault kinds this run can inject.
func (in *injector) kinds() []string {
	var out []string
	for _, k := range in.cfg.Faults {
		if isPartition(k) && in.fw == nil || k == faultDeleteToken && !in.cfg.ACL || isExecFault(k) && in.execs == nil {
			continue
		}
		out = append(out, k)
	}
	return out
}

// loop injects faults until ctx ends: a quiet gap, a fault (each kind in
// turn, in an order shuffled every round, the kinds never injected yet
// first; one that cannot be injected now is tried once more at the end of
// the round), its heal, then it waits
// for the cluster to settle and asks every holder to verify its lock.
func (in *injector) loop(ctx context.Context) {
	kinds := in.kinds()
	if len(kinds) == 0 {
		<-ctx.Done()
		return
	}
	var (
		order   []string
		retried map[string]bool
	)
	for {
		if len(order) == 0 {
			order = append([]string(nil), kinds...)
			in.rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			// The kinds not injected yet (skipped each time so far) go
			// first, so that a run long enough for two rounds tries each
			// of them early in the second, not only where the shuffle
			// happens to put it.
			slices.SortStableFunc(order, func(a, b string) int {
				return cmp.Compare(min(in.counts[a], 1), min(in.counts[b], 1))
			})
			retried = map[string]bool{}
		}
		kind := order[0]
		order = order[1:]
		if !sleep(ctx, in.between(in.cfg.GapMin, in.cfg.GapMax)) {
			return
		}
		rec, err := in.inject(ctx, kind)
		if err != nil {
			in.hist.dropFault()
			in.skipped[kind]++
			in.logf("%s skipped: %v", kind, err)
			if !retried[kind] {
				// Once more at the end of the round.
				retried[kind] = true
				order = append(order, kind)
			}
			continue
		}
		in.counts[kind]++
		in.hist.addFault(rec)
		in.logf("%s %s for %v %s", kind, rec.Target, time.Duration(rec.End-rec.Start).Round(time.Millisecond), rec.Note)
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		if err := in.cl.waitSettled(sctx); err != nil && ctx.Err() == nil {
			in.logf("after %s: %v", kind, err)
		}
		cancel()
		in.cs.broadcast(message{T: msgVerify})
	}
}

// inject injects one fault and heals it; the heal happens even if ctx
// ends meanwhile.
func (in *injector) inject(ctx context.Context, kind string) (FaultRec, error) {
	switch kind {
	case faultKillLeader:
		return in.killLeader(ctx)
	case faultKillFollower:
		return in.killFollower(ctx)
	case faultPauseLeader:
		return in.pauseLeader(ctx)
	case faultFreezeNode:
		return in.freezeNode(ctx)
	case faultPauseClient:
		return in.pauseClient(ctx)
	case faultPartitionLeader:
		return in.partitionLeader(ctx)
	case faultPartitionSplit:
		return in.partitionSplit(ctx)
	case faultPartitionClient:
		return in.partitionClient(ctx)
	case faultLateWrite:
		return in.lateWrite(ctx)
	case faultRestartAll:
		return in.restartAll(ctx)
	case faultTransferLeader:
		return in.transferLeader(ctx)
	case faultReplaceNode:
		return in.replaceNode(ctx)
	case faultRemoveLeader:
		return in.removeLeader(ctx)
	case faultCorruptFollower:
		return in.corruptFollower(ctx)
	case faultRestore:
		return in.restore(ctx)
	case faultDeleteToken:
		return in.deleteToken(ctx)
	case faultRevokeGrant:
		return in.revokeGrant(ctx)
	case faultLateAnswer:
		return in.lateAnswer(ctx)
	case faultRotateMembers:
		return in.rotateMembers(ctx)
	case faultKillExec:
		return in.killExec(ctx)
	case faultFreezeExec:
		return in.freezeExec(ctx)
	case faultPowerLoss:
		return in.powerLoss(ctx)
	case faultSlowDisk:
		return in.slowDisk(ctx)
	case faultFillDisk:
		return in.fillDisk(ctx)
	}
	return FaultRec{}, fmt.Errorf("unknown fault %q", kind)
}

func (in *injector) findLeader(ctx context.Context) (*nodeProc, error) {
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ld, err := in.cl.leader(lctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errSkipped, err)
	}
	return ld, nil
}

// restart starts n again, reporting a failure.
func (in *injector) restart(n *nodeProc) {
	if err := in.cl.start(n); err != nil {
		in.logf("restart %s: %v", n.id, err)
	}
}

func (in *injector) killLeader(ctx context.Context) (FaultRec, error) {
	ld, err := in.findLeader(ctx)
	if err != nil {
		return FaultRec{}, err
	}
	rec := FaultRec{Kind: faultKillLeader, Target: ld.id, Start: monoNow(), LeaderLoss: true}
	in.cl.kill(ld)
	sleep(ctx, in.between(1500*time.Millisecond, 3*time.Second))
	in.restart(ld)
	rec.End = monoNow()
	return rec, nil
}

func (in *injector) killFollower(ctx context.Context) (FaultRec, error) {
	ld, err := in.findLeader(ctx)
	if err != nil {
		return FaultRec{}, err
	}
	var fs []*nodeProc
	for _, n := range in.cl.nodes {
		if n != ld && n.serving() {
			fs = append(fs, n)
		}
	}
	if len(fs) == 0 {
		return FaultRec{}, fmt.Errorf("%w: no follower up", errSkipped)
	}
	f := fs[in.rng.Intn(len(fs))]
	rec := FaultRec{Kind: faultKillFollower, Target: f.id, Start: monoNow()}
	in.cl.kill(f)
	sleep(ctx, in.between(1500*time.Millisecond, 3*time.Second))
	in.restart(f)
	rec.End = monoNow()
	return rec, nil
}

func (in *injector) pauseLeader(ctx context.Context) (FaultRec, error) {
	ld, err := in.findLeader(ctx)
	if err != nil {
		return FaultRec{}, err
	}
	// Well beyond the election timeout (1 s): the others elect a new
	// leader while the old one sleeps, and it wakes believing it leads.
	rec := FaultRec{Kind: faultPauseLeader, Target: ld.id, Start: monoNow(), LeaderLoss: true}
	in.cl.signal(ld, syscall.SIGSTOP)
	sleep(ctx, in.between(3*time.Second, 5*time.Second))
	in.cl.signal(ld, syscall.SIGCONT)
	rec.End = monoNow()
	return rec, nil
}

// freezeNode stops one node with SIGSTOP for longer than the clients' TTL
// + grace (TTL + grace + freezeExtraMin..freezeExtraMax), then resumes it:
// the gray failure of a node that keeps its connections open and answers
// nothing (a long GC or VM pause, a stalled disk), while a majority is up.
// The role alternates, the leader first, then a follower; the node chosen
// is the one of that role that most clients talk to now (their last
// request went to it, asked with msgWhere), or, if none does, the node of
// the other role that most do: the freeze must meet clients. A client
// that keeps calling the frozen node instead of moving on loses its
// session, which check 4 judges.
func (in *injector) freezeNode(ctx context.Context) (FaultRec, error) {
	ld, err := in.findLeader(ctx)
	if err != nil {
		return FaultRec{}, err
	}
	where, asked := in.cs.where(ctx, whereTimeout)
	at := func(n *nodeProc) []int {
		var cs []int
		for c, addr := range where {
			if addr == n.httpAddr() {
				cs = append(cs, c)
			}
		}
		sort.Ints(cs)
		return cs
	}
	var follower *nodeProc
	for _, i := range in.rng.Perm(len(in.cl.nodes)) {
		n := in.cl.nodes[i]
		if n != ld && n.serving() && (follower == nil || len(at(n)) > len(at(follower))) {
			follower = n
		}
	}
	target, other := ld, follower
	if in.freezes%2 == 1 && follower != nil {
		target, other = follower, ld
	}
	if len(at(target)) == 0 && other != nil && len(at(other)) > 0 {
		target = other
	}
	in.freezes++
	role := "follower"
	if target == ld {
		role = "leader"
	}
	rec := FaultRec{Kind: faultFreezeNode, Target: target.id, Start: monoNow(), LeaderLoss: target == ld,
		Clients: at(target), Asked: asked}
	in.cl.signal(target, syscall.SIGSTOP)
	sleep(ctx, in.cfg.TTL+in.cfg.Grace+in.between(freezeExtraMin, freezeExtraMax))
	in.cl.signal(target, syscall.SIGCONT)
	rec.End = monoNow()
	names := "none"
	if len(rec.Clients) > 0 {
		names = ""
		for i, c := range rec.Clients {
			if i > 0 {
				names += ","
			}
			names += fmt.Sprintf("client%d", c)
		}
	}
	rec.Note = fmt.Sprintf("(the %s; %d of %d clients talking to it: %s)", role, len(rec.Clients), asked, names)
	return rec, nil
}

// pauseClient stops a client that holds a lock (preferably one that
// others wait for) for longer than its TTL: its session expires and the
// lock goes to the next client after the lock-delay. The client is woken
// at the latest after TTL+clientPauseExtra, or at once when someone else
// is granted its lock, the worst moment: it then writes to the resource
// with its old sequencer, without checking again.
func (in *injector) pauseClient(ctx context.Context) (FaultRec, error) {
	c, hold, ok := in.awaitHolder(ctx)
	if !ok {
		return FaultRec{}, fmt.Errorf("%w: no client held a lock within %s", errSkipped, holderWait)
	}
	p := in.cs.procs[c]
	newer := in.track.grantAbove(hold.Lock, hold.Slot, hold.Token)
	rec := FaultRec{Kind: faultPauseClient, Target: fmt.Sprintf("client%d", c), Start: monoNow(),
		Note: fmt.Sprintf("(holding %s token %d)", hold.Lock, hold.Token), Lock: hold.Lock, Token: hold.Token}
	// Recorded at once: a check run meanwhile (--stop-on-violation) must
	// know that this client's timers are stopped.
	in.hist.beginFault(rec)
	p.signal(syscall.SIGSTOP)
	t := time.NewTimer(clientPauseMax(in.cfg.TTL))
	select {
	case <-newer:
		rec.Note += ", woken when another client was granted the lock"
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
	p.signal(syscall.SIGCONT)
	rec.End = monoNow()
	return rec, nil
}

// partitionClient cuts a client that holds a lock (preferably one that
// others wait for) off from the cluster with iptables, both ways, while
// it keeps running: its keepalives go unanswered, its session expires at
// the cluster, and after the lock-delay the lock goes to a waiting client.
// The client is first pinned (msgPin) so that it does not let go of the
// lock of its own accord: it waits in jeopardy and relies on Lost() to
// learn that the lock is gone, which the lost-before-regrant check judges.
// The cut lasts TTL + lock-delay + clientCutExtraMin..clientCutExtraMax,
// or ends as soon as both another client was granted the lock and the cut
// client reported its Lost() closed: nothing more can happen then that the
// check would judge. Then it heals and unpins the client.
func (in *injector) partitionClient(ctx context.Context) (FaultRec, error) {
	c, hold, ok := in.awaitHolder(ctx)
	if !ok {
		return FaultRec{}, fmt.Errorf("%w: no client held a lock within %s", errSkipped, holderWait)
	}
	unpin, err := in.pin(ctx, c, hold)
	if err != nil {
		return FaultRec{}, err
	}
	defer unpin()
	newer := in.track.grantAbove(hold.Lock, hold.Slot, hold.Token)
	lostCh := in.track.lostOf(c, hold.Lock, hold.Token)
	rec := FaultRec{Kind: faultPartitionClient, Target: fmt.Sprintf("client%d", c), Start: monoNow(),
		Note: fmt.Sprintf("(holding %s token %d)", hold.Lock, hold.Token), Lock: hold.Lock, Token: hold.Token}
	// Recorded at once: a check run meanwhile (--stop-on-violation) must
	// know that this client cannot keep its session alive.
	in.hist.beginFault(rec)
	err = in.fw.cutClient(ctx, clientIP(c), in.cl.nodes)
	if err == nil {
		t := time.NewTimer(in.cfg.TTL + in.cfg.LockDelay + in.between(clientCutExtraMin, clientCutExtraMax))
		regranted, lostAt := int64(0), int64(0)
	wait:
		for regranted == 0 || lostAt == 0 {
			select {
			case <-newer:
				regranted, newer = monoNow(), nil
			case <-lostCh:
				lostAt, lostCh = monoNow(), nil
			case <-t.C:
				break wait
			case <-ctx.Done():
				break wait
			}
		}
		t.Stop()
		after := func(at int64) string { return time.Duration(at - rec.Start).Round(100 * time.Millisecond).String() }
		if regranted != 0 {
			rec.Note += ", re-granted after " + after(regranted)
		} else {
			rec.Note += ", not re-granted"
		}
		if lostAt != 0 {
			rec.Note += ", Lost() after " + after(lostAt)
		} else {
			rec.Note += ", Lost() still open at the heal"
		}
	}
	return in.heal(rec, err)
}

func (in *injector) partitionLeader(ctx context.Context) (FaultRec, error) {
	ld, err := in.findLeader(ctx)
	if err != nil {
		return FaultRec{}, err
	}
	var rest []*nodeProc
	for _, n := range in.cl.nodes {
		if n != ld {
			rest = append(rest, n)
		}
	}
	return in.partition(ctx, faultPartitionLeader, []*nodeProc{ld}, rest, true)
}

// partitionSplit cuts the cluster into a minority and a majority (2/1
// with three nodes, 3/2 with five), at random.
func (in *injector) partitionSplit(ctx context.Context) (FaultRec, error) {
	ld, err := in.findLeader(ctx)
	if err != nil {
		return FaultRec{}, err
	}
	nodes := append([]*nodeProc(nil), in.cl.nodes...)
	in.rng.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
	minority, majority := nodes[:(len(nodes)-1)/2], nodes[(len(nodes)-1)/2:]
	lost := false
	for _, n := range minority {
		lost = lost || n == ld
	}
	return in.partition(ctx, faultPartitionSplit, minority, majority, lost)
}

func (in *injector) partition(ctx context.Context, kind string, a, b []*nodeProc, leaderLoss bool) (FaultRec, error) {
	rec := FaultRec{Kind: kind, Target: ids(a) + " | " + ids(b), Start: monoNow(), LeaderLoss: leaderLoss}
	err := in.fw.partition(ctx, a, b)
	if err == nil {
		sleep(ctx, in.between(3*time.Second, 6*time.Second))
	}
	return in.heal(rec, err)
}

// heal removes every firewall rule of the run and ends the fault rec; a
// fault that failed to start (err) or to heal is reported as skipped.
func (in *injector) heal(rec FaultRec, err error) (FaultRec, error) {
	hctx, cancel := waitCtx(30 * time.Second)
	defer cancel()
	if herr := in.fw.heal(hctx); herr != nil {
		err = errors.Join(err, herr)
	}
	rec.End = monoNow()
	if err != nil {
		return FaultRec{}, fmt.Errorf("%w: %v", errSkipped, err)
	}
	return rec, nil
}

func (in *injector) restartAll(ctx context.Context) (FaultRec, error) {
	rec := FaultRec{Kind: faultRestartAll, Target: "all", Start: monoNow(), LeaderLoss: true}
	for _, n := range in.cl.nodes {
		in.cl.kill(n)
	}
	sleep(ctx, in.between(500*time.Millisecond, 1500*time.Millisecond))
	for _, n := range in.cl.nodes {
		in.restart(n)
	}
	rec.End = monoNow()
	return rec, nil
}

func ids(ns []*nodeProc) string {
	s := ""
	for i, n := range ns {
		if i > 0 {
			s += ","
		}
		s += n.id
	}
	return s
}

// holderWait bounds how long a client fault waits for some client to hold
// a lock: under leader faults, grants can be rare for a while, and a fault
// skipped each time it comes up would never be tried in a short run.
const holderWait = 10 * time.Second

// awaitHolder picks a running client that holds a lock (pickHolder),
// waiting up to holderWait for one.
func (in *injector) awaitHolder(ctx context.Context) (int, message, bool) {
	ctx, cancel := context.WithTimeout(ctx, holderWait)
	defer cancel()
	for {
		c, hold, ok := in.track.pickHolder(in.rng, func(i int, _ message) bool { return !in.cs.procs[i].isPaused() })
		if ok || !sleep(ctx, 100*time.Millisecond) {
			return c, hold, ok
		}
	}
}

// pin asks client c not to let go of its grant hold of its own accord
// (msgPin) and returns the function that releases it (msgUnpin); an error
// (wrapping errSkipped) if the client did not answer or no longer held it.
func (in *injector) pin(ctx context.Context, c int, hold message) (unpin func(), err error) {
	p := in.cs.procs[c]
	pctx, cancel := context.WithTimeout(ctx, pinTimeout)
	r, err := p.request(pctx, message{T: msgPin, Lock: hold.Lock, Token: hold.Token})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("%w: pin %s token %d: %v", errSkipped, hold.Lock, hold.Token, err)
	}
	unpin = func() { p.send(message{T: msgUnpin}) }
	if !r.OK {
		unpin()
		return nil, fmt.Errorf("%w: client%d let go of %s token %d before it was pinned", errSkipped, c, hold.Lock, hold.Token)
	}
	return unpin, nil
}
