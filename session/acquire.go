package session

import (
	"context"
	"time"

	"github.com/raftlock/raftlock/api"

	"github.com/raftlock/raftlock/sequencer"
)

// This file is the acquire protocol of a Session: the series of requests
// one Lock, TryLock, RLock or TryRLock makes, and the two bounds it keeps
// on when its grant was made (DESIGN.md, "Revocation", "Hold limits").

// acquire runs the acquire protocol: one holder id for the whole attempt, so
// that every request is idempotent; a wait is a series of requests, each
// bounded by lockPollSlice (half the hold limit, if that is shorter),
// re-issued when the slice ends or the server answers wait_timeout.
// Transient failures are the Backend's to retry (api.Backend): any other
// error is the answer.
//
// A grant answered LostAfter(ttl, lockDelay) or more after its request was
// sent is not trusted: a revocation of it may have come and gone from the
// keepalive answers meanwhile. The request is sent again (lateGrant); the
// grant is the answer's only if that answer comes in time.
func (s *Session) acquire(ctx context.Context, name string, mode sequencer.Mode, wait bool, opts []LockOption) (*Lock, error) {
	var cfg lockConfig
	for _, o := range opts {
		o(&cfg)
	}
	if s.State().over() {
		return nil, s.overErr()
	}
	if err := s.claim(name); err != nil {
		return nil, err
	}
	defer s.unclaim(name)
	actx, stop := s.link(ctx)
	defer stop()
	req := api.AcquireRequest{Name: name, Session: s.id, Holder: newHolderID(), Mode: mode, Value: cfg.value, MaxHold: cfg.maxHold,
		Permits: cfg.permits}
	// notBefore is a moment the grant cannot have been made before: the
	// send time of the latest request answered "not granted" (wait_timeout,
	// or lock_busy to a waiter's probe), else that of the first request.
	// A request whose outcome is unknown does not move it: an earlier one
	// may be the one the cluster applies. The hold limit runs on the
	// cluster from the grant, so the client's, from notBefore, ends first.
	notBefore := s.clock.Now()
	slice := lockPollSlice
	if req.MaxHold > 0 {
		// A slice ends in a probe that moves notBefore: at least half the
		// hold limit is left when the grant comes.
		slice = min(slice, req.MaxHold/2)
	}
	uncertain := false // a request may have been granted without our knowing
	probe := false     // a hold-limited wait's slice ended: ask once without waiting
	giveUp := func() (*Lock, error) {
		if uncertain {
			s.releaseAbandoned(name, req.Holder)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if s.State().over() {
			return nil, s.overErr()
		}
		return nil, context.DeadlineExceeded
	}
	for {
		rctx, rcancel := actx, context.CancelFunc(func() {})
		if wait {
			req.Wait = api.MaxWait
			if dl, ok := ctx.Deadline(); ok {
				rem := time.Until(dl)
				if rem <= 0 {
					return giveUp()
				}
				if rem < req.Wait {
					req.Wait = rem
				}
			}
			rctx, rcancel = withTimeout(actx, s.clock, slice)
		}
		r := req
		if probe {
			r.Wait = 0
		}
		sent := s.clock.Now()
		g, err := s.b.Acquire(rctx, r)
		sliceEnded := rctx.Err() != nil && actx.Err() == nil
		rcancel()
		if err == nil {
			if s.lateGrant(sent) {
				// Ask again: the same grant if it is still held, answered
				// in time; else what the cluster says now.
				uncertain, probe = true, false
				continue
			}
			return s.register(req, g, notBefore)
		}
		if actx.Err() != nil {
			// A wait may have queued us: give the place (or a grant) back.
			uncertain = true
			return giveUp()
		}
		if sliceEnded {
			// The place is kept; asking again renews its wait.
			uncertain = true
			probe = req.MaxHold > 0
			continue
		}
		switch code := api.CodeOf(err); {
		case probe && code == api.CodeLockBusy:
			// Not granted when the cluster read it: the grant is later.
			// The place (if any) is kept, so uncertain stays.
			notBefore, probe = sent, false
			continue
		case code == api.CodeWaitTimeout && wait:
			uncertain = false
			notBefore = sent
			continue
		default:
			if code == api.CodeLockBusy {
				uncertain = false
			}
			if sessionGone(err) {
				s.reportGone(err)
				return nil, err
			}
			if uncertain {
				s.releaseAbandoned(name, req.Holder)
			}
			return nil, err
		}
	}
}

// lateGrant reports whether a grant answered now to a request sent at sent
// is too late to trust. The answer shows the grant held when the cluster
// read the request, after sent, so a revocation of it comes after sent, and
// every keepalive answered from then for ttl + lock-delay names it
// (fsm.Revocation). An answer that arrives before LostAfter(ttl,
// lockDelay) has passed since sent is checked against the last keepalive
// answer (register) and the later ones (revoke): one of them was answered
// in that window, or the lease would have lost the lock. A later answer
// may come after the window closed, with no keepalive answer left to tell.
func (s *Session) lateGrant(sent time.Time) bool {
	if s.faults.trustLateGrants() {
		return false
	}
	return !s.clock.Now().Before(sent.Add(LostAfter(s.TTL(), s.lockDelay)))
}
