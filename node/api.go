package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/raftlock/raftlock/api"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/sequencer"
)

var _ api.Backend = (*Node)(nil)

// verifyRead confirms with a quorum that this node still leads, so that a
// read answered now is linearizable. A paused leader that woke up believing
// it leads fails here.
func (n *Node) verifyRead(ctx context.Context) error {
	if n.cfg.Faults.localReads() {
		return ctx.Err()
	}
	if !n.ready.Load() {
		return n.noLeader()
	}
	return n.confirmLeadership(ctx)
}

// verifyLeading confirms with a quorum that this node leads, serving or
// not yet (Cluster).
func (n *Node) verifyLeading(ctx context.Context) error {
	if !n.leading() {
		return n.noLeader()
	}
	return n.confirmLeadership(ctx)
}

// confirmLeadership asks a quorum whether this node still leads
// (VerifyLeader), until ctx ends.
func (n *Node) confirmLeadership(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := waitFuture(ctx, n.raft.VerifyLeader()); err != nil {
		if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
			return cerr
		}
		return api.Errorf(api.CodeNoLeader, "leadership not confirmed: %v", err)
	}
	return nil
}

func newSessionID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", api.Errorf(api.CodeInternal, "session id: %v", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// OpenSession creates a session; the id is 128 random bits drawn by the
// leader. Zero TTL and lock-delay take the defaults.
func (n *Node) OpenSession(ctx context.Context, req api.OpenRequest) (api.Info, error) {
	if err := req.Resolve(); err != nil {
		return api.Info{}, err
	}
	owner, err := n.owner(ctx)
	if err != nil {
		return api.Info{}, err
	}
	id, err := newSessionID()
	if err != nil {
		return api.Info{}, err
	}
	res, err := n.propose(ctx, &fsm.Command{Type: fsm.CmdOpenSession, OpenSession: &fsm.OpenSession{
		ID: id, Name: req.Name, TTL: int64(req.TTL), LockDelay: int64(req.LockDelay), Limits: &n.cfg.Limits, Owner: owner}})
	if err != nil {
		return api.Info{}, err
	}
	if err := mapStatus(res, "open session"); err != nil {
		return api.Info{}, err
	}
	return api.Info{ID: id, Name: req.Name, TTL: req.TTL, LockDelay: req.LockDelay, Locks: []string{}}, nil
}

// KeepAlive extends the session's lease to now+ttl on the leader, without a
// Raft write, after confirming leadership. The caller should count its lease
// from when it sent the request. A keepalive is judged by when it arrived:
// one that arrived before the deadline is honoured even if the
// confirmation made it wait past it, and even if its caller gave up
// waiting (ctx ended): the lease is then extended when the confirmation
// comes, and no expiry is taken for the session meanwhile
// (leaseTable.Arrive).
func (n *Node) KeepAlive(ctx context.Context, id string) (api.KeepAliveAnswer, error) {
	ttl, err := n.keepAlive(ctx, id)
	if err != nil {
		return api.KeepAliveAnswer{}, err
	}
	// Read after the lease was extended: a revocation applied later
	// started its delay after this keepalive arrived, so the lease it
	// gives the client ends before that delay does.
	revoked, requested := n.fsm.KeepAliveNews(id)
	return api.KeepAliveAnswer{TTL: ttl, Revoked: revokedGrants(revoked), ReleaseRequested: n.releaseRequests(requested)}, nil
}

// keepAlive is KeepAlive's lease extension.
func (n *Node) keepAlive(ctx context.Context, id string) (time.Duration, error) {
	arrived := n.cfg.Now()
	if err := api.CheckSessionID(id); err != nil {
		return 0, err
	}
	if err := n.authorizeSession(ctx, id); err != nil {
		return 0, err
	}
	t := n.leadership()
	if t == nil {
		return 0, n.noLeader()
	}
	gen, marked := t.leases.Arrive(id, arrived)
	if r, err := n.confirmKeepAlive(ctx, t); err != nil {
		switch {
		case marked && r != nil:
			go n.settleLate(t, r, id, gen, arrived)
		case marked:
			t.leases.Settle(id, gen, arrived, false)
		}
		return 0, err
	}
	var ttl time.Duration
	var ok bool
	if marked {
		ttl, ok = t.leases.Settle(id, gen, arrived, true)
	} else {
		ttl, ok = t.leases.KeepAliveArrived(id, arrived)
	}
	// One that came after the deadline, while an earlier keepalive that
	// came in time awaits its confirmation, waits for that one: it may
	// extend the lease past this one's arrival.
	for !ok {
		settled, open := t.leases.Unsettled(id)
		if !open {
			break
		}
		select {
		case <-settled:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		ttl, ok = t.leases.KeepAliveArrived(id, arrived)
	}
	if !ok {
		if n.leadership() != t {
			// The term ended meanwhile: the next leader restarts the
			// lease; this one cannot say the session is gone.
			return 0, n.noLeader()
		}
		if _, alive := n.fsm.Session(id); alive {
			// Its lease ran out, but the session is not gone until its
			// expiry is applied, which may yet not happen (this node may
			// lose its leadership first, and the next leader restarts
			// the lease): a client told session_not_found ends its
			// session, so it is told to retry instead.
			return 0, api.Errorf(api.CodeNoLeader, "session (handle %s): its lease ran out and its expiry is under way; retry", api.SessionHandle(id))
		}
		return 0, api.Errorf(api.CodeSessionNotFound, "session (handle %s): unknown, closed or expired", api.SessionHandle(id))
	}
	n.metrics.keepalive.Inc()
	return ttl, nil
}

// settleLate settles a keepalive whose caller gave up before its
// leadership confirmation r (in term t) was answered, once it is: a confirmed one
// extends the lease from its arrival, as if it had been answered.
func (n *Node) settleLate(t *leaderTerm, r *confirmRound, id string, gen uint64, arrived time.Time) {
	<-r.done
	if ttl, ok := t.leases.Settle(id, gen, arrived, r.err == nil); ok {
		n.metrics.keepalive.Inc()
		n.log.Debug("a keepalive whose caller gave up extended its lease", "session", api.SessionHandle(id), "ttl", ttl)
	}
}

// CloseSession ends a session and releases its locks at once, without
// lock-delay.
func (n *Node) CloseSession(ctx context.Context, id string) error {
	if err := api.CheckSessionID(id); err != nil {
		return err
	}
	if err := n.authorizeSession(ctx, id); err != nil {
		return err
	}
	res, err := n.propose(ctx, &fsm.Command{Type: fsm.CmdCloseSession, CloseSession: &fsm.SessionRef{ID: id}})
	if err != nil {
		return err
	}
	return mapStatus(res, "close session (handle "+api.SessionHandle(id)+")")
}

// SessionInfo describes a session and the locks it holds.
func (n *Node) SessionInfo(ctx context.Context, id string) (api.Info, error) {
	if err := api.CheckSessionID(id); err != nil {
		return api.Info{}, err
	}
	if err := n.authorizeSession(ctx, id); err != nil {
		return api.Info{}, err
	}
	if err := n.verifyRead(ctx); err != nil {
		return api.Info{}, err
	}
	s, ok := n.fsm.Session(id)
	if !ok {
		return api.Info{}, api.Errorf(api.CodeSessionNotFound, "session (handle %s): unknown, closed or expired", api.SessionHandle(id))
	}
	info := api.Info{ID: s.ID, Name: s.Name, TTL: time.Duration(s.TTL), LockDelay: time.Duration(s.LockDelay), Locks: []string{}}
	for name := range s.Locks {
		if l, ok := n.fsm.Lock(name); ok {
			for _, h := range l.Holders {
				if h.Session == id {
					info.Locks = append(info.Locks, name)
					break
				}
			}
		}
	}
	sort.Strings(info.Locks)
	return info, nil
}

// grant is the answer to a granted acquire; permits above 0: slot slot
// of a semaphore of that many, whose sequencer names the slot.
func (n *Node) grant(name string, token uint64, mode sequencer.Mode, permits, slot uint64) api.Grant {
	m := mode
	g := api.Grant{Name: name, Mode: m, Token: sequencer.Token(token),
		Sequencer: sequencer.Sequencer{Name: name, Mode: m, Token: sequencer.Token(token)},
		Term:      n.raft.CurrentTerm()}
	if permits > 0 {
		g.Permits, g.Slot = permits, slot
		g.Sequencer.Semaphore, g.Sequencer.Slot, g.Sequencer.Permits = true, slot, permits
		if n.cfg.Faults.extraSlot() {
			g.Sequencer.Permits++ // the broken build's semaphore has a slot more; its sequencers say so
		}
	}
	return g
}

// Acquire takes a lock, trying once (Wait 0) or waiting in the lock's FIFO
// queue up to Wait. The holder id makes it idempotent: a retry returns the
// same grant, or finds the same place in the queue (a try answers
// lock_busy; a wait sets the wait again from now, with a Raft write only
// when less than half of the new wait is left of the old one). The place belongs to the
// replicated state: the leader's timer ends a wait that runs out
// (wait_timeout), a release by the queued holder ends it (wait_cancelled),
// and a request whose ctx ends, or whose node stops leading
// (unknown_outcome), leaves it as it is.
func (n *Node) Acquire(ctx context.Context, req api.AcquireRequest) (api.Grant, error) {
	if err := req.Resolve(); err != nil {
		return api.Grant{}, err
	}
	if err := n.authorize(ctx, api.AccessWrite, req.Name); err != nil {
		return api.Grant{}, err
	}
	if err := n.authorizeSession(ctx, req.Session); err != nil {
		return api.Grant{}, err
	}
	if req.MaxHold != 0 {
		if err := n.needLockOptions(ctx, "acquire "+req.Name+" with max_hold"); err != nil {
			return api.Grant{}, err
		}
	}
	if req.Permits > 0 {
		if err := n.needLockOptions(ctx, "acquire "+req.Name+" with permits"); err != nil {
			return api.Grant{}, err
		}
	}
	key := waitKey{req.Name, req.Session, req.Holder}
	// The wait belongs to this term: the term's end answers it
	// (unknown_outcome). A node that does not lead answers no_leader
	// below (propose), having waited for nothing.
	t := n.leadership()
	var ch chan waitResult
	var done <-chan struct{} = n.noTerm
	if t != nil {
		done = t.done()
		if req.Wait > 0 {
			ch = t.addWait(key)
			defer t.removeWait(key, ch)
		}
	}
	res := fsm.Result{Status: fsm.StatusQueued}
	if req.Wait == 0 || t == nil || !t.placeKept(key, req.Mode, req.Permits, req.Wait) {
		var err error
		permits := req.Permits
		if permits > 0 && n.cfg.Faults.extraSlot() {
			permits++ // the broken build of the fault switch: one slot too many
		}
		res, err = n.propose(ctx, &fsm.Command{Type: fsm.CmdAcquire, Acquire: &fsm.Acquire{
			Lock: req.Name, Session: req.Session, Holder: req.Holder, Mode: req.Mode,
			Wait: req.Wait > 0, WaitFor: int64(req.Wait), Value: req.Value, Limits: &n.cfg.Limits,
			MaxHold: int64(req.MaxHold), Permits: permits}})
		if err != nil {
			return api.Grant{}, err
		}
	}
	switch res.Status {
	case fsm.StatusGranted:
		return n.grant(req.Name, res.Token, res.Mode, req.Permits, res.Slot), nil
	case fsm.StatusQueued:
	case fsm.StatusLockBusy:
		return api.Grant{}, lockBusy(req.Name, req.Holder, res.Busy)
	case fsm.StatusModeMismatch:
		return api.Grant{}, api.Errorf(api.CodeInvalidArgument,
			"acquire %s: holder %s already holds or waits for the lock in %s mode; it asked for %s", req.Name, req.Holder,
			res.Mode, req.Mode)
	case fsm.StatusPermitsMismatch:
		return api.Grant{}, permitsMismatch(req.Name, res.Permits, req.Permits)
	default:
		return api.Grant{}, mapStatus(res, "acquire "+req.Name)
	}

	// The place in the queue belongs to the replicated state now: this
	// request only waits for its outcome. The leader's wait timer ends the
	// wait (waitBackstop bounds a request whose timer could not end it);
	// a request that stops waiting leaves the place as it is.
	backstop := time.NewTimer(req.Wait + waitBackstop)
	defer backstop.Stop()
	select {
	case r := <-ch:
		if r.token > 0 {
			return n.grant(req.Name, r.token, r.mode, req.Permits, r.slot), nil
		}
		switch r.why {
		case fsm.WaitTimedOut:
			return api.Grant{}, api.Errorf(api.CodeWaitTimeout, "acquire %s: not granted within %v; no longer queued", req.Name, req.Wait)
		case fsm.WaitCancelled:
			return api.Grant{}, api.Errorf(api.CodeWaitCancelled, "acquire %s: the wait was cancelled by its holder (released while queued)", req.Name)
		default:
			return api.Grant{}, api.Errorf(api.CodeSessionNotFound, "acquire %s: the wait ended: session closed or expired", req.Name)
		}
	case <-done:
		return api.Grant{}, &api.Error{Code: api.CodeUnknownOutcome, Message: fmt.Sprintf(
			"acquire %s: this node stopped leading while the request waited; the place in the queue is kept: retry the same request (same holder) to learn its outcome", req.Name)}
	case <-backstop.C:
		return api.Grant{}, &api.Error{Code: api.CodeUnknownOutcome, Message: fmt.Sprintf(
			"acquire %s: the wait's end was not seen within %v; retry the same request (same holder) to learn its outcome", req.Name, req.Wait+waitBackstop)}
	case <-ctx.Done():
		return api.Grant{}, ctx.Err()
	}
}

// permitsMismatch is the invalid_argument answer to an acquire of lock
// with permits asked while the stored lock has permits has (0: a plain
// lock).
func permitsMismatch(lock string, has, asked uint64) error {
	kind := func(p uint64) string {
		if p == 0 {
			return "a plain lock (no permits)"
		}
		return fmt.Sprintf("a semaphore of %d permits", p)
	}
	return api.Errorf(api.CodeInvalidArgument,
		"acquire %s: the lock is %s, and this acquire asks for %s: every holder and waiter must agree on permits (%d vs %d)",
		lock, kind(has), kind(asked), has, asked)
}

// waitBackstop is how long past its wait a waiting request gives up on
// seeing the wait's end (answering unknown_outcome).
const waitBackstop = 30 * time.Second

// Release gives a lock up. Releasing a lock held by someone else is
// refused (not_holder); releasing a free lock is a no-op.
func (n *Node) Release(ctx context.Context, req api.ReleaseRequest) error {
	if err := req.Check(); err != nil {
		return err
	}
	if err := n.authorize(ctx, api.AccessWrite, req.Name); err != nil {
		return err
	}
	if err := n.authorizeSession(ctx, req.Session); err != nil {
		return err
	}
	res, err := n.propose(ctx, &fsm.Command{Type: fsm.CmdRelease, Release: &fsm.LockRef{
		Lock: req.Name, Session: req.Session, Holder: req.Holder}})
	if err != nil {
		return err
	}
	return mapStatus(res, "release "+req.Name)
}

func (n *Node) lockStateOf(l fsm.Lock) api.LockState {
	st := api.LockState{Name: l.Name, Mode: l.Mode, Holders: []api.Holder{},
		Waiters: len(l.Waiters), Index: l.Index, Permits: l.Permits}
	for _, d := range l.SlotDelays {
		st.SlotDelays = append(st.SlotDelays, api.SlotDelay{Slot: d.Slot, Until: time.Unix(0, d.Until).UTC()})
	}
	for _, w := range l.Waiters {
		st.Queue = append(st.Queue, api.QueuedHolder{Holder: w.Holder, Mode: w.Mode})
	}
	if len(l.Holders) == 0 {
		st.Mode = 0
	}
	for _, h := range l.Holders {
		ah := api.Holder{SessionHandle: api.SessionHandle(h.Session),
			SessionName: n.holderSessionName(l, h), Holder: h.Holder, Token: sequencer.Token(h.Token), Value: h.Value,
			Slot: h.Slot}
		if r := h.ReleaseRequested; r != nil {
			ah.ReleaseRequested = &api.ReleaseRequestInfo{SessionHandle: api.SessionHandle(r.Session), Holder: r.Holder,
				SessionName: n.sessionName(r.Session), At: time.Unix(0, r.At).UTC()}
		}
		st.Holders = append(st.Holders, ah)
	}
	if l.Delayed {
		st.DelayUntil = time.Unix(0, l.DelayUntil).UTC()
	}
	for _, g := range l.Grants {
		st.Grants = append(st.Grants, api.PastGrant{Token: sequencer.Token(g.Token), Mode: g.Mode,
			Holder: g.Holder, Value: g.Value, SessionName: g.SessionName, Permits: g.Permits, Slot: g.Slot})
	}
	// A lock recorded before histories were kept has none yet (GrantsSince
	// 0): no grant of it has a token above its last change.
	st.GrantsSince = sequencer.Token(l.GrantsSince)
	if st.GrantsSince == 0 {
		st.GrantsSince = sequencer.Token(l.Index + 1)
	}
	return st
}

// holderSessionName is the name of h's session: from the grant that made
// h a holder, read with the lock, or from the session when the lock's
// history no longer holds that grant.
func (n *Node) holderSessionName(l fsm.Lock, h fsm.Holder) string {
	for _, g := range slices.Backward(l.Grants) {
		if g.Token == h.Token && g.Holder == h.Holder {
			return g.SessionName
		}
	}
	s, _ := n.fsm.Session(h.Session)
	return s.Name
}

// LockState returns the state of one lock (a free lock has no holders).
func (n *Node) LockState(ctx context.Context, name string) (api.LockState, error) {
	if err := api.ValidateLockName(name); err != nil {
		return api.LockState{}, err
	}
	if err := n.authorize(ctx, api.AccessRead, name); err != nil {
		return api.LockState{}, err
	}
	if err := n.verifyRead(ctx); err != nil {
		return api.LockState{}, err
	}
	return n.lockState(name), nil
}

// lockState reads one lock, with its grant history (a free lock's, while
// it is kept). A free lock the state machine keeps nothing of gets the
// applied index, read with it atomically, so that its Index never goes
// backwards, and an empty history reaching back to the last entry that
// forgot grants (fsm.FSM.LockRecord).
func (n *Node) lockState(name string) api.LockState {
	l, ok, applied := n.fsm.LockRecord(name)
	if !ok {
		return api.LockState{Name: name, Holders: []api.Holder{}, Index: applied,
			GrantsSince: sequencer.Token(l.GrantsSince)}
	}
	return n.lockStateOf(l)
}

// Locks lists the locks (held, waited for or delayed) whose names start
// with prefix.
func (n *Node) Locks(ctx context.Context, prefix string) ([]api.LockState, error) {
	if err := api.CheckPrefix(prefix); err != nil {
		return nil, err
	}
	if err := n.authorize(ctx, api.AccessRead, prefix); err != nil {
		return nil, err
	}
	if err := n.verifyRead(ctx); err != nil {
		return nil, err
	}
	ls := n.fsm.Locks(prefix)
	out := make([]api.LockState, 0, len(ls))
	for _, l := range ls {
		out = append(out, n.lockStateOf(l))
	}
	return out, nil
}

// LocksPage lists one page of the locks (held, waited for or delayed)
// whose names start with q.Prefix: at most q.Limit after q.After, in name
// order (api.LocksQuery), and no more than fit in api.MaxAnswerBytes
// (always one). The page holds its bytes of the node's answer budget
// (holdAnswer) until it is written.
func (n *Node) LocksPage(ctx context.Context, q api.LocksQuery) (api.LocksPage, error) {
	if err := q.Resolve(); err != nil {
		return api.LocksPage{}, err
	}
	// A listing needs read access to its whole prefix: every name under
	// it is then readable, and no name it may not read is shown.
	if err := n.authorize(ctx, api.AccessRead, q.Prefix); err != nil {
		return api.LocksPage{}, err
	}
	if err := n.verifyRead(ctx); err != nil {
		return api.LocksPage{}, err
	}
	keep, _, err := n.holdAnswer(ctx)
	if err != nil {
		return api.LocksPage{}, err
	}
	defer keep()
	ls, next := n.fsm.LocksPage(q.Prefix, q.After, q.Limit, api.MaxAnswerBytes)
	page := api.LocksPage{Locks: make([]api.LockState, 0, len(ls)), Next: next}
	for _, l := range ls {
		page.Locks = append(page.Locks, n.lockStateOf(l))
	}
	return page, nil
}

// CheckSequencer tells whether a sequencer is still current: the lock is
// held in that mode by a grant with exactly that token. CurrentToken is the
// highest token among the lock's holders (0 when free).
func (n *Node) CheckSequencer(ctx context.Context, text string) (api.SequencerCheck, error) {
	seq, err := sequencer.Parse(text)
	if err != nil {
		return api.SequencerCheck{}, invalid("%v", err)
	}
	if err := api.ValidateLockName(seq.Name); err != nil {
		return api.SequencerCheck{}, err
	}
	if err := n.authorize(ctx, api.AccessRead, seq.Name); err != nil {
		return api.SequencerCheck{}, err
	}
	if err := n.verifyRead(ctx); err != nil {
		return api.SequencerCheck{}, err
	}
	var out api.SequencerCheck
	l, ok := n.fsm.Lock(seq.Name)
	if !ok {
		return out, nil
	}
	// matched is the token of the holder the sequencer names (for a shared
	// lock, one reader among several; for a semaphore, the holder of the
	// slot it names), 0 if none.
	var matched sequencer.Token
	for _, h := range l.Holders {
		tok := sequencer.Token(h.Token)
		if tok > out.CurrentToken {
			out.CurrentToken = tok
		}
		if tok == seq.Token && (!seq.Semaphore || h.Slot == seq.Slot) {
			matched = tok
		}
	}
	// A slot sequencer is current only on a semaphore of its permits, a
	// plain one only on a plain lock (Permits 0 both).
	out.Valid = sequencer.IsCurrent(seq, matched, l.Mode == seq.Mode && l.Permits == seq.Permits)
	return out, nil
}

// Leader reports the local view of leadership.
func (n *Node) Leader() api.LeaderInfo {
	addr, id := n.raft.LeaderWithID()
	li := api.LeaderInfo{ID: string(id), Self: n.raft.State() == raft.Leader, Term: n.raft.CurrentTerm()}
	if n.peer != nil {
		li.PeerAddr = string(addr)
	}
	mv := n.membersView()
	li.Members = mv.tag
	if li.Self {
		li.ID = n.cfg.ID
		li.HTTPAddr = n.cfg.HTTPAddr
		li.Serving = n.ready.Load()
		return li
	}
	for _, m := range mv.members {
		if m.ID == li.ID {
			// A record without the field is a build from before the
			// binary format: it reads checksummed JSON.
			li.HTTPAddr, li.Commands = m.HTTPAddr, max(m.Commands, fsm.VersionJSON)
		}
	}
	return li
}

// membersView is the membership as Leader reports it: the member records
// and their digest (membersTag), for one Raft configuration and one
// generation of the records. It is never changed once built.
type membersView struct {
	// servers is the Raft configuration's server slice the view was built
	// from: hashicorp/raft stores a fresh copy of it on every
	// configuration change and hands out that same slice until the next,
	// so the slice's identity names the configuration.
	servers []raft.Server
	gen     uint64
	members []fsm.Member
	tag     string
}

// membersView returns the current membersView, built again only when the
// Raft configuration or the member records changed since the cached one
// (Leader runs on every request: copying and hashing both each time cost
// allocations and a read lock on the state machine).
func (n *Node) membersView() *membersView {
	// The generation is read before the records: a change between the two
	// leaves a view with an old generation and newer records, which the
	// next call rebuilds; never the other way round.
	gen := n.fsm.MembersGeneration()
	servers := n.raft.GetConfiguration().Configuration().Servers
	if v := n.members.Load(); v != nil && v.gen == gen && sameServerSlice(v.servers, servers) {
		return v
	}
	members := n.fsm.Members()
	v := &membersView{servers: servers, gen: gen, members: members, tag: membersTag(servers, members)}
	n.members.Store(v)
	return v
}

// sameServerSlice reports whether a and b are the same slice (same backing
// array and length), which for the configuration's servers means the same
// configuration. The cached view holds its slice, so its array cannot be
// freed and reused for another configuration.
func sameServerSlice(a, b []raft.Server) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// membersTag digests the membership: each server of the Raft
// configuration, its address and suffrage, and the HTTP address its member
// record names (FNV-1a, 64 bits, in hex; no allocation but the string).
// Equal views give equal tags on every node.
func membersTag(servers []raft.Server, members []fsm.Member) string {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	add := func(s string) {
		for i := 0; i < len(s); i++ {
			h = (h ^ uint64(s[i])) * prime
		}
		h = (h ^ 0xff) * prime // a separator no UTF-8 text holds
	}
	for _, s := range servers {
		add(string(s.ID))
		add(string(s.Address))
		add(s.Suffrage.String())
		for _, m := range members {
			if m.ID == string(s.ID) {
				add(m.HTTPAddr)
			}
		}
	}
	if len(servers) == 0 {
		return ""
	}
	return strconv.FormatUint(h, 16)
}

// Cluster describes the cluster (leader only, leadership confirmed with a
// quorum). A leader answers it from its election on, before it serves
// anything else, with Serving false until it serves: so a script can tell
// "elected" from "serving". (The member table it reads may then lag by the
// entries the new leader has not applied yet.)
func (n *Node) Cluster(ctx context.Context) (api.ClusterInfo, error) {
	// Any valid token may read it (with ACLs on): the Go client follows
	// the members through it (their addresses, no secret), whatever its
	// token's rules.
	if _, err := n.owner(ctx); err != nil {
		return api.ClusterInfo{}, err
	}
	serving := n.ready.Load()
	if serving {
		if err := n.verifyRead(ctx); err != nil {
			return api.ClusterInfo{}, err
		}
	} else if err := n.verifyLeading(ctx); err != nil {
		return api.ClusterInfo{}, err
	}
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return api.ClusterInfo{}, mapRaftError(err)
	}
	records := make(map[string]fsm.Member)
	for _, m := range n.fsm.Members() {
		records[m.ID] = m
	}
	info := api.ClusterInfo{Leader: n.cfg.ID, Term: n.raft.CurrentTerm(), Serving: serving,
		CommitIndex: n.raft.CommitIndex(), Members: []api.Member{}}
	for _, s := range cf.Configuration().Servers {
		rec := records[string(s.ID)]
		info.Members = append(info.Members, api.Member{ID: string(s.ID), RaftAddr: string(s.Address),
			HTTPAddr: rec.HTTPAddr, Voter: s.Suffrage == raft.Voter, Commands: rec.Commands})
	}
	return info, nil
}

// RegisterMember records a member's HTTP address in the replicated table.
func (n *Node) RegisterMember(ctx context.Context, m api.Member) error {
	if err := m.ValidateRecord(); err != nil {
		return err
	}
	if !n.inConfiguration(m.ID) {
		// A member removed (or not added yet) does not register itself.
		return api.Errorf(api.CodeNotFound, "%s is not a member of the Raft configuration", m.ID)
	}
	return n.setMemberRecord(ctx, m)
}

// WaitLeader blocks until some node of the cluster is known to lead (ready
// when it is this node) or ctx ends.
func (n *Node) WaitLeader(ctx context.Context) (string, error) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if n.ready.Load() {
			return n.cfg.ID, nil
		}
		if _, id := n.raft.LeaderWithID(); id != "" && string(id) != n.cfg.ID {
			return string(id), nil
		}
		select {
		case <-ctx.Done():
			return "", errors.Join(ctx.Err(), n.noLeader())
		case <-t.C:
		}
	}
}

// revokedGrants is the API form of a session's revoked grants.
func revokedGrants(rs []fsm.RevokedGrant) []api.RevokedGrant {
	if len(rs) == 0 {
		return nil
	}
	out := make([]api.RevokedGrant, 0, len(rs))
	for _, r := range rs {
		out = append(out, api.RevokedGrant{Name: r.Lock, Holder: r.Holder, Token: sequencer.Token(r.Token), Kind: r.Kind, Reason: r.Reason})
	}
	return out
}

// releaseRequests is the API form of a session's grants whose release
// another session asked for.
func (n *Node) releaseRequests(rs []fsm.RequestedRelease) []api.ReleaseRequestedGrant {
	if len(rs) == 0 {
		return nil
	}
	out := make([]api.ReleaseRequestedGrant, 0, len(rs))
	for _, r := range rs {
		out = append(out, api.ReleaseRequestedGrant{Name: r.Lock, Holder: r.Holder, Token: sequencer.Token(r.Token),
			BySessionHandle: api.SessionHandle(r.Request.Session), BySessionName: n.sessionName(r.Request.Session),
			ByHolder: r.Request.Holder, At: time.Unix(0, r.Request.At).UTC()})
	}
	return out
}

// sessionName is the name of session id ("" if none or gone).
func (n *Node) sessionName(id string) string {
	if s, ok := n.fsm.Session(id); ok {
		return s.Name
	}
	return ""
}
