package node

import (
	"context"
	"sort"

	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/sequencer"
)

// RevokeGrant revokes one grant (admin): the grant ends at once (its
// sequencer no longer checks valid), its session stays open, the lock
// stays unavailable for the session's ttl + lock-delay (timed by the
// leader like a lock-delay), and the session's next keepalive answer
// names it (DESIGN.md, "Revocation"). A lock not held is not_found; a
// held lock of which no grant matches is not_holder; a holder id that
// matches grants of several sessions (a shared lock) must be narrowed by
// the session handle (invalid_argument).
func (n *Node) RevokeGrant(ctx context.Context, req api.RevokeRequest) (api.Revocation, error) {
	if err := n.authorize(ctx, api.AccessAdmin, ""); err != nil {
		return api.Revocation{}, err
	}
	if err := req.Check(); err != nil {
		return api.Revocation{}, err
	}
	if n.leadership() == nil {
		return api.Revocation{}, n.noLeader()
	}
	l, ok := n.fsm.Lock(req.Name)
	if !ok || len(l.Holders) == 0 {
		return api.Revocation{}, api.Errorf(api.CodeNotFound, "lock %q is not held", req.Name)
	}
	var match []fsm.Holder
	for _, h := range l.Holders {
		if (req.Holder == "" || h.Holder == req.Holder) && (req.SessionHandle == "" || api.SessionHandle(h.Session) == req.SessionHandle) {
			match = append(match, h)
		}
	}
	switch {
	case len(match) == 0:
		return api.Revocation{}, api.Errorf(api.CodeNotHolder, "lock %q is held, but not by holder %q (session_handle %q)", req.Name, req.Holder, req.SessionHandle)
	case len(match) > 1:
		return api.Revocation{}, api.Errorf(api.CodeInvalidArgument, "lock %q: %d grants match holder %q; name the session_handle too", req.Name, len(match), req.Holder)
	}
	h := match[0]
	if err := n.needLockOptions(ctx, "revoke"); err != nil {
		return api.Revocation{}, err
	}
	by, err := n.owner(ctx)
	if err != nil {
		return api.Revocation{}, err
	}
	s, _ := n.fsm.Session(h.Session)
	res, err := n.propose(ctx, &fsm.Command{Type: fsm.CmdRevokeGrant, RevokeGrant: &fsm.RevokeGrant{Lock: req.Name, Session: h.Session,
		Holder: h.Holder, Token: h.Token, Kind: fsm.RevokeKindAdmin, Reason: req.Reason, By: by}})
	if err != nil {
		return api.Revocation{}, err
	}
	if res.Status == fsm.StatusNotHolder {
		return api.Revocation{}, api.Errorf(api.CodeNotHolder, "lock %q: the grant (token %d) ended before the revocation", req.Name, h.Token)
	}
	if err := mapStatus(res, "revoke"); err != nil {
		return api.Revocation{}, err
	}
	handle := api.SessionHandle(h.Session)
	n.log.Info("grant revoked", "lock", req.Name, "holder", h.Holder, "session", handle, "token", h.Token,
		"reason", req.Reason, "acl_token_id", by)
	if t := n.leadership(); t != nil && n.cfg.Faults.revokeWithoutNotice() {
		t.endDelaysNow()
	}
	return api.Revocation{Name: req.Name, Holder: h.Holder, SessionHandle: handle, SessionName: s.Name,
		Token: sequencer.Token(h.Token), Unavailable: time.Duration(s.TTL + s.LockDelay)}, nil
}

// summary is a session as an operator may see it (never its id).
func summary(s fsm.SessionRecord) api.SessionSummary {
	sum := api.SessionSummary{Handle: api.SessionHandle(s.ID), Name: s.Name,
		TTL: time.Duration(s.TTL).String(), LockDelay: time.Duration(s.LockDelay).String(),
		Created: time.Unix(0, s.Created).UTC().Format(time.RFC3339), Locks: make([]string, 0, len(s.Locks))}
	for name := range s.Locks {
		sum.Locks = append(sum.Locks, name)
	}
	sort.Strings(sum.Locks)
	return sum
}

// Sessions lists the open sessions (admin), by handle and name, never by
// id: those named q.Name, the one of handle q.Handle, or all; sorted by
// handle, at most api.MaxSessionsListed.
func (n *Node) Sessions(ctx context.Context, q api.SessionsQuery) (api.SessionsReply, error) {
	if err := n.authorize(ctx, api.AccessAdmin, ""); err != nil {
		return api.SessionsReply{}, err
	}
	if err := q.Check(); err != nil {
		return api.SessionsReply{}, err
	}
	if err := n.verifyRead(ctx); err != nil {
		return api.SessionsReply{}, err
	}
	out := api.SessionsReply{Sessions: []api.SessionSummary{}}
	for _, s := range n.fsm.Sessions() {
		if (q.Name != "" && s.Name != q.Name) || (q.Handle != "" && api.SessionHandle(s.ID) != q.Handle) {
			continue
		}
		out.Sessions = append(out.Sessions, summary(s))
	}
	sort.Slice(out.Sessions, func(i, j int) bool { return out.Sessions[i].Handle < out.Sessions[j].Handle })
	if len(out.Sessions) > api.MaxSessionsListed {
		out.Sessions, out.Truncated = out.Sessions[:api.MaxSessionsListed], true
	}
	return out, nil
}

// CloseSessionByHandle ends the session of a handle (admin) as revoked,
// as deleting its token would: each lock it held stays unavailable for
// its ttl + lock-delay, and its client learns at its next request that
// the session is gone (session_not_found). An unknown handle is
// not_found.
func (n *Node) CloseSessionByHandle(ctx context.Context, req api.CloseByHandleRequest) (api.ClosedSession, error) {
	if err := n.authorize(ctx, api.AccessAdmin, ""); err != nil {
		return api.ClosedSession{}, err
	}
	if err := req.Check(); err != nil {
		return api.ClosedSession{}, err
	}
	if n.leadership() == nil {
		return api.ClosedSession{}, n.noLeader()
	}
	var found *fsm.SessionRecord
	for _, s := range n.fsm.Sessions() {
		if api.SessionHandle(s.ID) == req.Handle {
			found = &s
			break
		}
	}
	if found == nil {
		return api.ClosedSession{}, api.Errorf(api.CodeNotFound, "session (handle %s): unknown, closed or expired", req.Handle)
	}
	if err := n.needLockOptions(ctx, "close session by handle"); err != nil {
		return api.ClosedSession{}, err
	}
	by, err := n.owner(ctx)
	if err != nil {
		return api.ClosedSession{}, err
	}
	res, err := n.propose(ctx, &fsm.Command{Type: fsm.CmdRevokeSession, RevokeSession: &fsm.RevokeSession{ID: found.ID, Reason: req.Reason, By: by}})
	if err != nil {
		return api.ClosedSession{}, err
	}
	if res.Status == fsm.StatusSessionNotFound {
		return api.ClosedSession{}, api.Errorf(api.CodeNotFound, "session (handle %s): unknown, closed or expired", req.Handle)
	}
	if err := mapStatus(res, "close session by handle"); err != nil {
		return api.ClosedSession{}, err
	}
	sum := summary(*found)
	n.log.Info("session closed by an operator", "session", req.Handle, "name", found.Name, "locks", len(sum.Locks),
		"reason", req.Reason, "acl_token_id", by)
	if t := n.leadership(); t != nil && n.cfg.Faults.revokeWithoutNotice() {
		t.endDelaysNow()
	}
	return api.ClosedSession{Handle: req.Handle, Name: found.Name, Locks: sum.Locks, Unavailable: time.Duration(found.TTL + found.LockDelay)}, nil
}

// RequestRelease asks the holders of a lock to release it, on behalf of
// the session (write on the lock, and the session's own token): each
// grant but the asker's is marked until it ends (shown on the lock, named
// at its holder's keepalives); the holders choose. A lock not held is
// not_found.
func (n *Node) RequestRelease(ctx context.Context, req api.RequestReleaseRequest) error {
	if err := req.Check(); err != nil {
		return err
	}
	if err := n.authorize(ctx, api.AccessWrite, req.Name); err != nil {
		return err
	}
	if err := n.authorizeSession(ctx, req.Session); err != nil {
		return err
	}
	if n.leadership() == nil {
		return n.noLeader()
	}
	if l, ok := n.fsm.Lock(req.Name); !ok || len(l.Holders) == 0 {
		return api.Errorf(api.CodeNotFound, "lock %q is not held", req.Name)
	}
	if err := n.needLockOptions(ctx, "request release"); err != nil {
		return err
	}
	res, err := n.propose(ctx, &fsm.Command{Type: fsm.CmdRequestRelease, RequestRelease: &fsm.RequestRelease{Lock: req.Name,
		Session: req.Session, Holder: req.Holder}})
	if err != nil {
		return err
	}
	if res.Status == fsm.StatusNotHolder {
		return api.Errorf(api.CodeNotFound, "lock %q is not held", req.Name)
	}
	return mapStatus(res, "request release of "+req.Name)
}
