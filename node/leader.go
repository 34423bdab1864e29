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

// onEvent runs inside Apply with the FSM locked: it must not block or read
// the FSM.
func (n *Node) onEvent(e fsm.Event) {
	n.metrics.count(e)
	n.events.record(e)
	n.prefixChanges.note(e)
	if t := n.leadership(); t != nil {
		t.onEvent(e)
	}
	switch e.Kind {
	case fsm.EventRevoked:
		if e.RevokeKind == fsm.RevokeKindMaxHold && n.leadership() != nil {
			n.log.Info("grant revoked at its hold limit", "lock", e.Lock, "holder", e.Holder,
				"session", api.SessionHandle(e.Session), "token", e.Token)
		}
	case fsm.EventHalted:
		n.halt(e.Err)
	case fsm.EventLockChanged, fsm.EventRestored:
		if e.Kind == fsm.EventRestored {
			n.lockWakers.wakeAll()
		} else {
			n.lockWakers.wake(e.Lock)
		}
		n.mu.Lock()
		close(n.changed)
		n.changed = make(chan struct{})
		n.mu.Unlock()
	}
}

// onEvent is Node.onEvent's part for the term: it answers waiting
// acquires, arms the timers of new waits and lock-delays, and tracks
// sessions in the lease table. It runs inside Apply with the FSM locked:
// it must not block or read the FSM.
func (t *leaderTerm) onEvent(e fsm.Event) {
	switch e.Kind {
	case fsm.EventGranted:
		t.notifyWait(waitKey{e.Lock, e.Session, e.Holder}, waitResult{token: e.Token, mode: e.Mode, slot: e.Slot})
		if e.MaxHold > 0 {
			t.scheduleTimer(holdLimitKey{e.Lock, e.Session, e.Holder, e.Token}, time.Duration(e.MaxHold))
		}
	case fsm.EventWaitEnded:
		t.notifyWait(waitKey{e.Lock, e.Session, e.Holder}, waitResult{why: e.Reason})
	case fsm.EventWaitSet:
		t.scheduleTimer(waitTimerKey{waitKey{e.Lock, e.Session, e.Holder}, e.Index}, waitLength(e.WaitFor))
	case fsm.EventSessionOpened:
		t.leases.Add(e.Session, time.Duration(e.TTL))
	case fsm.EventSessionRemoved:
		t.leases.Remove(e.Session)
	case fsm.EventDelayStarted:
		d := delayLength(e.DelayFor)
		if e.Semaphore && e.Lock == t.revoking && t.n.cfg.Faults.revokeSlotEarly() {
			d = 0
		}
		t.armDelay(delayKey{e.Lock, e.DelayUntil, e.Slot}, d)
	case fsm.EventRevoked:
		t.revoking = e.Lock
	case fsm.EventLockChanged:
		t.revoking = ""
	}
}

// lead is the leader's loop: catch up with a Barrier, restart every session
// deadline with the failover grace, serve, restart every lock-delay for its
// full length, then expire sessions whose deadline passed.
func (t *leaderTerm) lead() {
	n := t.n
	defer n.wg.Done()
	// ctx ends with the leadership: a Raft future the loop waits on may
	// never be answered once Raft shuts down (an entry still in its apply
	// queue), and Shutdown waits for this loop.
	ctx, done := t.ctx, t.done()
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
	t.leases.Reset(ttls, n.cfg.FailoverGrace)
	if !t.serve() {
		return
	}
	// Like the leases, every lock-delay restarts for its full length on
	// this node's monotonic clock: how much of it ran under the previous
	// leader is unknown here (DelayUntil is another node's wall clock,
	// which may be behind this one's). Armed once the node serves, so that
	// a timer that fires at once (SkipLockDelay) does not fail to propose.
	// Waits likewise restart for their full length (a wait may run long
	// after a failover, never forever).
	t.restartLockTimers()
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
			t.expireDue(ctx)
		}
	}
}

// expireDue proposes the expiry of sessions whose deadline passed, at most
// MaxExpiriesPerTick at a time, after confirming leadership with a quorum:
// a leader that was paused must not expire sessions that a newer leader
// keeps alive. A session with a keepalive that arrived before its deadline
// and awaits its confirmation is not expired (leaseTable.Arrive). It
// waits for Raft until ctx (the leadership) ends.
func (t *leaderTerm) expireDue(ctx context.Context) {
	n := t.n
	if n.snap.restoring.Load() {
		return // a restore replaces the sessions (snapshot.go)
	}
	ids := t.leases.Expired(n.cfg.MaxExpiriesPerTick)
	if len(ids) == 0 {
		return
	}
	unmark := func(ids []string) {
		for _, id := range ids {
			t.leases.Unmark(id)
		}
	}
	if err := waitFuture(ctx, n.raft.VerifyLeader()); err != nil {
		unmark(ids)
		return
	}
	// A keepalive that came in time may have arrived while the expiry
	// waited for its confirmation (slow on a slow disk): it keeps the
	// session (leaseTable.Arrive).
	if ids = t.leases.Reprieve(ids); len(ids) == 0 {
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
			t.leases.Unmark(ids[i])
			continue
		}
		n.logExpired(sessions[i])
	}
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
	return noLeaderError(n.cfg.ID, string(id), n.leading() || string(id) == n.cfg.ID, n.raft.CurrentTerm())
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
// records itself only when it leads. Until the table holds the record
// (a new cluster's leader holds back what needs a newer command version
// until then: needCommands), it looks again registerRetry after its first
// attempt, twice as long after each next one up to registerCheck, and
// every registerRetry while it knows no leader to ask; every
// registerCheck once recorded.
func (n *Node) registerLoop() {
	defer n.wg.Done()
	t := time.NewTimer(registerRetry)
	defer t.Stop()
	wait := registerRetry
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		switch registered, tried := n.registerOnce(); {
		case registered:
			wait = registerRetry
			t.Reset(registerCheck)
		case tried:
			t.Reset(wait)
			wait = min(2*wait, registerCheck)
		default:
			t.Reset(registerRetry)
		}
	}
}

// registerRetry is registerLoop's shortest pause, registerCheck its
// longest.
const (
	registerRetry = 100 * time.Millisecond
	registerCheck = time.Second
)

// registerOnce is one round of registerLoop: it reports whether the
// member table held this node's record already and, if not, whether it
// asked for it (as the leader, or of the leader it knows).
func (n *Node) registerOnce() (registered, tried bool) {
	self := n.self()
	if _, registered = n.memberRecord(self); registered {
		return true, false
	}
	if n.ready.Load() {
		n.registerSelf()
		return false, true
	}
	li := n.Leader()
	to := li.PeerAddr
	if to == "" || li.Self {
		return false, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := raftnet.PostMember(ctx, n.DialPeer, to, self); err != nil {
		n.log.Debug("register with the leader", "leader", li.ID, "error", err)
	}
	return false, true
}
