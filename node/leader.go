package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/transport/raftnet"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/sequencer"
)

// waitKey names one waiting acquire.
type waitKey struct{ lock, session, holder string }

// waitResult answers a waiting acquire: a grant (token > 0) or the end of
// the wait without one.
type waitResult struct {
	token uint64
	mode  sequencer.Mode
	why   fsm.WaitEnd // without a grant: why the wait ended
}

// leaderTimer is a timer of the leader whose end is a proposal: the end of
// a lock-delay, or of a wait that ran out. Keys are comparable values.
type leaderTimer interface {
	// command is the proposal made when the timer fires (idempotent).
	command() *fsm.Command
	// what names the timer in logs.
	what() string
}

// delayKey names a lock-delay: the lock and the DelayUntil that EndDelay
// carries.
type delayKey struct {
	lock  string
	until int64
}

func (k delayKey) command() *fsm.Command {
	return &fsm.Command{Type: fsm.CmdEndDelay, EndDelay: &fsm.EndDelay{Lock: k.lock, Until: k.until}}
}

func (k delayKey) what() string { return "end lock-delay of " + k.lock }

// holdKey names the restore hold (fsm.Hold) by the Until that EndHold
// carries.
type holdKey struct{ until int64 }

func (k holdKey) command() *fsm.Command {
	return &fsm.Command{Type: fsm.CmdEndHold, EndHold: &fsm.EndHold{Until: k.until}}
}

func (k holdKey) what() string { return "end the restore hold" }

// waitTimerKey names one wait: the waiter and the index that set it.
type waitTimerKey struct {
	waitKey
	set uint64
}

func (k waitTimerKey) command() *fsm.Command {
	return &fsm.Command{Type: fsm.CmdCancelWait, CancelWait: &fsm.LockRef{Lock: k.lock, Session: k.session,
		Holder: k.holder, WaitSet: k.set}}
}

func (k waitTimerKey) what() string { return "end the wait on " + k.lock }

// onEvent runs inside Apply with the FSM locked: it must not block or read
// the FSM.
func (n *Node) onEvent(e fsm.Event) {
	n.metrics.count(e)
	n.events.record(e)
	switch e.Kind {
	case fsm.EventGranted:
		n.notifyWait(waitKey{e.Lock, e.Session, e.Holder}, waitResult{token: e.Token, mode: e.Mode})
	case fsm.EventWaitEnded:
		n.notifyWait(waitKey{e.Lock, e.Session, e.Holder}, waitResult{why: e.Reason})
	case fsm.EventWaitSet:
		if n.leading.Load() {
			n.scheduleTimer(waitTimerKey{waitKey{e.Lock, e.Session, e.Holder}, e.Index}, waitLength(e.WaitFor))
		}
	case fsm.EventSessionOpened:
		n.leases.Add(e.Session, time.Duration(e.TTL))
	case fsm.EventSessionRemoved:
		n.leases.Remove(e.Session)
	case fsm.EventDelayStarted:
		if n.leading.Load() {
			n.armDelay(delayKey{e.Lock, e.DelayUntil}, delayLength(e.DelayFor))
		}
	case fsm.EventHalted:
		n.halt(e.Err)
	case fsm.EventLockChanged, fsm.EventRestored:
		n.mu.Lock()
		close(n.changed)
		n.changed = make(chan struct{})
		n.mu.Unlock()
	}
}

func (n *Node) notifyWait(k waitKey, r waitResult) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, ch := range n.waits[k] {
		select {
		case ch <- r:
		default:
		}
	}
}

// addWait registers a waiter before its acquire is proposed, so that no
// grant can slip by unseen.
func (n *Node) addWait(k waitKey) chan waitResult {
	ch := make(chan waitResult, 1)
	n.mu.Lock()
	n.waits[k] = append(n.waits[k], ch)
	n.mu.Unlock()
	return ch
}

func (n *Node) removeWait(k waitKey, ch chan waitResult) {
	n.mu.Lock()
	defer n.mu.Unlock()
	chans := n.waits[k]
	for i, c := range chans {
		if c == ch {
			chans = append(chans[:i:i], chans[i+1:]...)
			break
		}
	}
	if len(chans) == 0 {
		delete(n.waits, k)
	} else {
		n.waits[k] = chans
	}
}

// leadershipDone returns a channel closed when the current leadership ends.
func (n *Node) leadershipDone() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.leaderCh
}

func (n *Node) watchLeadership() {
	defer n.wg.Done()
	for {
		select {
		case <-n.stop:
			return
		case isLeader := <-n.raft.LeaderCh():
			if isLeader {
				n.startLeadership()
			} else {
				n.endLeadership()
			}
		}
	}
}

func (n *Node) startLeadership() {
	n.mu.Lock()
	if n.leading.Load() {
		n.mu.Unlock()
		return
	}
	n.leading.Store(true)
	n.leaderCh = make(chan struct{})
	done := n.leaderCh
	n.mu.Unlock()
	n.wg.Add(1)
	go n.lead(done)
}

func (n *Node) endLeadership() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.leading.Load() {
		return
	}
	n.leading.Store(false)
	n.ready.Store(false)
	close(n.leaderCh)
	for k, t := range n.timers {
		t.Stop()
		delete(n.timers, k)
		delete(n.timerDue, k)
	}
	n.log.Info("lost leadership")
}

// lead is the leader's loop: catch up with a Barrier, restart every session
// deadline with the failover grace, serve, restart every lock-delay for its
// full length, then expire sessions whose deadline passed.
func (n *Node) lead(done <-chan struct{}) {
	defer n.wg.Done()
	// ctx ends with the leadership: a Raft future the loop waits on may
	// never be answered once Raft shuts down (an entry still in its apply
	// queue), and Shutdown waits for this loop.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-done:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		err := waitFuture(ctx, n.raft.Barrier(n.cfg.ElectionTimeout*5))
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		n.log.Warn("barrier failed", "error", err)
		select {
		case <-done:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
	ttls := make(map[string]time.Duration)
	for _, s := range n.fsm.Sessions() {
		ttls[s.ID] = time.Duration(s.TTL)
	}
	n.leases.Reset(ttls, n.cfg.FailoverGrace)
	select {
	case <-done:
		return
	default:
	}
	n.ready.Store(true)
	// Like the leases, every lock-delay restarts for its full length on
	// this node's monotonic clock: how much of it ran under the previous
	// leader is unknown here (DelayUntil is another node's wall clock,
	// which may be behind this one's). Armed once the node serves, so that
	// a timer that fires at once (SkipLockDelay) does not fail to propose.
	// Waits likewise restart for their full length (a wait may run long
	// after a failover, never forever).
	n.restartLockTimers()
	n.log.Info("leading", "term", n.raft.CurrentTerm(), "sessions", len(ttls))
	n.registerSelf()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.agreementLoop(ctx)
	}()

	tick := time.NewTicker(n.cfg.ExpiryInterval)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
			n.expireDue(ctx)
		}
	}
}

// expireDue proposes the expiry of sessions whose deadline passed, at most
// MaxExpiriesPerTick at a time, after confirming leadership with a quorum:
// a leader that was paused must not expire sessions that a newer leader
// keeps alive. It waits for Raft until ctx (the leadership) ends.
func (n *Node) expireDue(ctx context.Context) {
	if n.snap.restoring.Load() {
		return // a restore replaces the sessions (snapshot.go)
	}
	ids := n.leases.Expired(n.cfg.MaxExpiriesPerTick)
	if len(ids) == 0 {
		return
	}
	unmark := func(ids []string) {
		for _, id := range ids {
			n.leases.Unmark(id)
		}
	}
	if err := waitFuture(ctx, n.raft.VerifyLeader()); err != nil {
		unmark(ids)
		return
	}
	futures := make([]raft.ApplyFuture, len(ids))
	sessions := make([]expiring, len(ids))
	for i, id := range ids {
		sessions[i] = n.expiringSession(id)
		data, err := (&fsm.Command{Type: fsm.CmdExpireSession, Now: n.cfg.Now().UnixNano(),
			ExpireSession: &fsm.SessionRef{ID: id}}).Encode()
		if err != nil {
			n.log.Error("encode expiry", "error", err)
			continue
		}
		futures[i] = n.raft.Apply(data, DefaultApplyTimeout)
	}
	for i, f := range futures {
		if f == nil {
			continue
		}
		if err := waitFuture(ctx, f); err != nil {
			n.leases.Unmark(ids[i])
			continue
		}
		n.logExpired(sessions[i])
	}
}

// delayLength is how long a leader times a lock-delay whose replicated
// length is delayFor (fsm.Lock.DelayFor, nanoseconds), from when it arms the
// timer. A length of 0 is unknown (state written before lengths were
// replicated): such a delay waits api.MaxLockDelay, the longest any
// lock-delay can be, for a delay may run long but never short.
func delayLength(delayFor int64) time.Duration {
	if delayFor <= 0 {
		return api.MaxLockDelay
	}
	return time.Duration(delayFor)
}

// restartedDelay is a lock-delay that a new leader times again.
type restartedDelay struct {
	key delayKey
	d   time.Duration
}

// delaysToRestart lists the lock-delays running in locks (the state a new
// leader takes over), each to be timed for its full length.
func delaysToRestart(locks []fsm.Lock) []restartedDelay {
	var out []restartedDelay
	for _, l := range locks {
		if l.Delayed {
			out = append(out, restartedDelay{delayKey{l.Name, l.DelayUntil}, delayLength(l.DelayFor)})
		}
	}
	return out
}

// endDelaysNow ends every running lock-delay at once: the broken build of
// the fault switch revoke-without-notice (Faults), which frees the locks an
// operator's action revoked before their holders can know. Never called
// otherwise.
func (n *Node) endDelaysNow() {
	for _, r := range delaysToRestart(n.fsm.Locks("")) {
		n.mu.Lock()
		if t, ok := n.timers[r.key]; ok {
			t.Stop()
			delete(n.timers, r.key)
			delete(n.timerDue, r.key)
		}
		n.mu.Unlock()
		n.scheduleTimer(r.key, 0)
	}
}

// armDelay schedules the end of the lock-delay k after d, on this node's
// monotonic clock. k.until names the delay in the log (EndDelay carries
// it); it is a wall-clock value stamped by whichever leader started the
// delay and is never compared with this node's clock: d is the delay's
// length, timed in full by the leader that starts it and again by every
// new leader (a delay runs long after a failover, never short).
func (n *Node) armDelay(k delayKey, d time.Duration) {
	if n.cfg.Faults.skipLockDelay() {
		d = 0
	}
	n.scheduleTimer(k, d)
}

// placeKept reports whether (lock, session, holder) waits in mode m on
// this leader with at least half of a wait of d still to run: a renewal
// (a client re-asking after its request slice) then needs no Raft write,
// the request just waits for the outcome. A read of the local state on a
// leader that may have been deposed without knowing is harmless here: it
// grants nothing, and the request learns the outcome or ends.
func (n *Node) placeKept(k waitKey, m sequencer.Mode, d time.Duration) bool {
	if !n.ready.Load() {
		return false
	}
	l, ok := n.fsm.Lock(k.lock)
	if !ok {
		return false
	}
	for _, w := range l.Waiters {
		if w.Session != k.session || w.Holder != k.holder {
			continue
		}
		if w.Mode != m {
			return false
		}
		n.mu.Lock()
		due, armed := n.timerDue[waitTimerKey{k, w.WaitSet}]
		n.mu.Unlock()
		return armed && !due.Before(time.Now().Add(d/2))
	}
	return false
}

// waitLength is how long a leader times a wait whose replicated length is
// waitFor (nanoseconds) from when it arms the timer; 0 (a wait recorded
// before lengths were replicated) waits api.MaxWait.
func waitLength(waitFor int64) time.Duration {
	if waitFor <= 0 {
		return api.MaxWait
	}
	return time.Duration(waitFor)
}

// timerRetry is how soon the leader proposes a timer's end again after a
// proposal failed.
const timerRetry = 100 * time.Millisecond

// scheduleTimer proposes k's command after d, unless a timer for k is
// armed already or this node does not lead. A proposal that fails while
// the node still leads (not serving yet right after a promotion, when a
// timer armed by an entry applied before the Barrier fires at once under
// SkipLockDelay; an apply queue that stays full) is tried again after
// timerRetry: the commands are idempotent, and a delay or a wait that is
// never ended would last until the next leader change. endLeadership stops
// the timers.
func (n *Node) scheduleTimer(k leaderTimer, d time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.timers[k]; ok || !n.leading.Load() {
		return
	}
	n.timerDue[k] = time.Now().Add(d)
	n.timers[k] = time.AfterFunc(d, func() {
		n.mu.Lock()
		delete(n.timers, k)
		delete(n.timerDue, k)
		n.mu.Unlock()
		if _, err := n.propose(context.Background(), k.command()); err != nil {
			n.log.Warn(k.what()+" failed; trying again", "retry_in", timerRetry, "error", err)
			n.scheduleTimer(k, timerRetry)
		}
	})
}

// propose stamps the leader's time into cmd, replicates it and returns the
// state machine's result. Errors are *api.Error: no_leader when the
// entry surely was not appended, unknown_outcome when it may have been.
func (n *Node) propose(ctx context.Context, cmd *fsm.Command) (fsm.Result, error) {
	if !n.ready.Load() {
		return fsm.Result{}, n.noLeader()
	}
	if err := ctx.Err(); err != nil {
		return fsm.Result{}, err
	}
	cmd.Now = n.cfg.Now().UnixNano()
	data, err := cmd.EncodeAs(n.commandVersion())
	if err != nil {
		return fsm.Result{}, api.Errorf(api.CodeInternal, "%v", err)
	}
	f := n.raft.Apply(data, DefaultApplyTimeout)
	if err := waitFuture(ctx, f); err != nil {
		if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
			// Raft has the entry: it may still commit; the idempotent
			// retry learns the outcome.
			return fsm.Result{}, &api.Error{Code: api.CodeUnknownOutcome, Message: fmt.Sprintf(
				"request ended before its outcome was known (%v): retry the same request", cerr)}
		}
		return fsm.Result{}, mapRaftError(err)
	}
	res, ok := f.Response().(fsm.Result)
	if !ok {
		return fsm.Result{}, api.Errorf(api.CodeInternal, "unexpected apply response %T", f.Response())
	}
	return res, nil
}

// waitFuture waits for a Raft future until ctx ends: it returns the
// future's error, or ctx's if ctx ended first (the future's work goes on:
// an entry handed to Raft may still commit).
func waitFuture(ctx context.Context, f raft.Future) error {
	if ctx.Done() == nil {
		return f.Error()
	}
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// noLeader is the no_leader answer of a node that does not serve: shut
// down, elected but not serving yet (catching up after its election), or
// a follower, naming the leader it knows.
func (n *Node) noLeader() error {
	select {
	case <-n.stop:
		return api.Errorf(api.CodeNoLeader, "node %s: %v", n.cfg.ID, errShutdown)
	default:
	}
	_, id := n.raft.LeaderWithID()
	return noLeaderError(n.cfg.ID, string(id), n.leading.Load() || string(id) == n.cfg.ID, n.raft.CurrentTerm())
}

// noLeaderError words the no_leader answer of node self, which knows
// leader as the leader ("" if none) and leads (or is named leader by Raft)
// in term without serving yet when leading is true.
func noLeaderError(self, leader string, leading bool, term uint64) error {
	switch {
	case leading:
		return api.Errorf(api.CodeNoLeader, "node %s leads (term %d) but is not serving yet; retry", self, term)
	case leader == "":
		return api.Errorf(api.CodeNoLeader, "node %s: no leader known", self)
	default:
		return api.Errorf(api.CodeNoLeader, "node %s is not the leader (leader: %s)", self, leader)
	}
}

// mapRaftError maps Raft's errors onto API errors, once, here (nil stays
// nil).
func mapRaftError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrRaftShutdown),
		errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return api.Errorf(api.CodeNoLeader, "%v", err)
	case errors.Is(err, raft.ErrAbortedByRestore): // never applied (snapshot.go)
		return api.Errorf(api.CodeNoLeader, "%v: the state was restored from a backup; retry", err)
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrEnqueueTimeout):
		return &api.Error{Code: api.CodeUnknownOutcome, Message: fmt.Sprintf("%v: retry the same request", err)}
	default:
		return api.Errorf(api.CodeInternal, "raft: %v", err)
	}
}

// mapStatus maps the state machine's business outcomes onto API errors.
func mapStatus(r fsm.Result, what string) error {
	switch r.Status {
	case fsm.StatusOK, fsm.StatusGranted, fsm.StatusQueued:
		return nil
	case fsm.StatusSessionNotFound:
		return api.Errorf(api.CodeSessionNotFound, "%s: session not found (unknown, closed or expired)", what)
	case fsm.StatusLockBusy:
		return api.Errorf(api.CodeLockBusy, "%s: lock is held or in its lock-delay", what) // Acquire says why (lockBusy)
	case fsm.StatusNotHolder:
		return api.Errorf(api.CodeNotHolder, "%s: this session/holder does not hold the lock", what)
	case fsm.StatusInvalid:
		return api.Errorf(api.CodeInvalidArgument, "%s: invalid command", what)
	case fsm.StatusResourceExhausted:
		return api.Errorf(api.CodeResourceExhausted, "%s: %s", what, r.Refusal)
	case fsm.StatusCorrupt:
		return api.Errorf(api.CodeInternal, "%s: this node's log is corrupt and it has stopped; retry on another node", what)
	default:
		return api.Errorf(api.CodeInternal, "%s: unexpected outcome %s", what, r.Status)
	}
}

// maxBusyHolders is how many holders a lock_busy message names.
const maxBusyHolders = 3

// lockBusy is the lock_busy answer to holder's try of lock, saying why from
// the state the entry found (b; nil: unknown): who holds it, by session
// name and holder id (a session id is a secret and never named), until
// when its lock-delay runs (RFC 3339, rounded up to the second: the end as
// stamped by the leader that started it; a later leader may run it longer)
// and its queue. For example:
//
//	lock "jobs/a" is held by session "demo" (holder h1)
//	lock "jobs/a" is free but in lock-delay until 2026-11-24T10:00:05Z
//	lock "cfg" is held in shared mode by session "r1" (holder a), with 1 waiter queued
//	lock "jobs/a" is held by session "demo" (holder h1); holder q1 waits in its queue (place 1 of 1)
func lockBusy(lock, holder string, b *fsm.Busy) error {
	if b == nil {
		return api.Errorf(api.CodeLockBusy, "lock %q is held or in its lock-delay", lock)
	}
	var msg strings.Builder
	fmt.Fprintf(&msg, "lock %q is ", lock)
	if len(b.Holders) == 0 {
		msg.WriteString("free")
	} else {
		msg.WriteString("held ")
		if b.Mode == sequencer.Shared {
			msg.WriteString("in shared mode ")
		}
		msg.WriteString("by ")
		for i, h := range b.Holders {
			if i == maxBusyHolders {
				fmt.Fprintf(&msg, " and %d more", len(b.Holders)-i)
				break
			}
			if i > 0 {
				msg.WriteString(", ")
			}
			if h.SessionName == "" {
				fmt.Fprintf(&msg, "an unnamed session (holder %s)", h.Holder)
			} else {
				fmt.Fprintf(&msg, "session %q (holder %s)", h.SessionName, h.Holder)
			}
		}
	}
	if b.DelayUntil != 0 {
		if len(b.Holders) == 0 {
			msg.WriteString(" but")
		} else {
			msg.WriteString(" and")
		}
		until := time.Unix(0, b.DelayUntil).UTC()
		if r := until.Truncate(time.Second); !r.Equal(until) {
			until = r.Add(time.Second)
		}
		fmt.Fprintf(&msg, " in lock-delay until %s", until.Format(time.RFC3339))
	}
	switch {
	case b.Place > 0:
		fmt.Fprintf(&msg, "; holder %s waits in its queue (place %d of %d)", holder, b.Place, b.Waiters)
	case b.Waiters == 1:
		msg.WriteString(", with 1 waiter queued")
	case b.Waiters > 1:
		fmt.Fprintf(&msg, ", with %d waiters queued", b.Waiters)
	}
	return api.Errorf(api.CodeLockBusy, "%s", msg.String())
}

// registerSelf records this node's HTTP address and the command version
// it reads in the replicated member table (leader only).
func (n *Node) registerSelf() {
	if err := n.RegisterMember(context.Background(), n.self()); err != nil {
		select {
		case <-n.stop:
			// Stopping (or handing leadership over to stop): the next
			// leader records it; a clean stop logs no warning.
			n.log.Debug("register self: stopping", "error", err)
		default:
			if n.IsLeader() {
				n.log.Warn("register self", "error", err)
			} else {
				// Leadership moved on while committing: the new leader
				// records this node's member through registerLoop.
				n.log.Debug("register self: no longer the leader", "error", err)
			}
		}
	}
}

// registerLoop makes sure the member table holds this node's record (its
// HTTP address, empty without one, and the command version it reads: a
// leader writes the binary command format only once every member's record
// says it reads it): a follower asks the leader to record it, at the
// leader's peer port (the only port that takes member records: the client
// HTTP API does not). A node without a peer port (Config.RaftTransport)
// records itself only when it leads.
func (n *Node) registerLoop() {
	defer n.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		self := n.self()
		_, registered := n.memberRecord(self)
		if registered || n.ready.Load() {
			if !registered {
				n.registerSelf()
			}
			continue
		}
		li := n.Leader()
		to := li.PeerAddr
		if to == "" || li.Self {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := raftnet.PostMember(ctx, n.DialPeer, to, self); err != nil {
			n.log.Debug("register with the leader", "leader", li.ID, "error", err)
		}
		cancel()
	}
}

// restartLockTimers arms the timers of every lock-delay and every wait
// for their full length: a new leader's, and a restore's (the deadlines
// were another node's clock, or the backup's).
func (n *Node) restartLockTimers() {
	if h, ok := n.fsm.Hold(); ok {
		n.scheduleTimer(holdKey{h.Until}, time.Duration(h.For))
	}
	locks := n.fsm.Locks("")
	for _, r := range delaysToRestart(locks) {
		n.armDelay(r.key, r.d)
	}
	for _, l := range locks {
		for _, w := range l.Waiters {
			n.scheduleTimer(waitTimerKey{waitKey{l.Name, w.Session, w.Holder}, w.WaitSet}, waitLength(w.WaitFor))
		}
	}
}
