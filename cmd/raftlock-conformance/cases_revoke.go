package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/fsm"
)

// revokeReason is the operator's reason the revocation case gives; the
// worker's lost event must carry it back.
const revokeReason = "conformance: an operator revokes the grant"

// caseRevokedBeforeGrant: the worker holds a lock (ttl 1 s, lock-delay
// 1 s), the suite's own client waits for it, and the suite revokes the
// worker's grant through the API (POST /v1/locks/revoke). The worker's
// lost event, carrying the revocation's kind and reason, must come before
// the other client's grant; the worker's session goes on (never expired),
// and its unlock of the revoked lock is no error. Figures: how long after
// the revocation the lost event came, and how long before the grant.
func caseRevokedBeforeGrant(ctx context.Context, s *suite, w *worker) (string, error) {
	if err := s.connect(ctx, w, 1); err != nil {
		return "", err
	}
	if err := s.lockOptionsReady(ctx); err != nil {
		return "", err
	}
	const ttl, delay = 1.0, 1.0
	rounds := s.cfg.rounds
	var told, before []time.Duration
	for round := 0; round < rounds; round++ {
		t, b, err := revokeRound(ctx, s, w, ttl, delay, round)
		if err != nil {
			return "", fmt.Errorf("round %d: %w", round+1, err)
		}
		told, before = append(told, t), append(before, b)
	}
	sortDurations(told)
	sortDurations(before)
	return fmt.Sprintf("%d runs (ttl %gs, lock-delay %gs): told %v .. %v after the revocation, %v .. %v before the other grant",
		rounds, ttl, delay, told[0].Round(time.Millisecond), told[len(told)-1].Round(time.Millisecond),
		before[0].Round(time.Millisecond), before[len(before)-1].Round(time.Millisecond)), nil
}

// lockOptionsReady waits until every member has recorded that its build
// reads command version 5 (fsm.VersionLockOptions), which revocations and
// release requests need: members record it shortly after they start.
func (s *suite) lockOptionsReady(ctx context.Context) error {
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return until(wctx, "every member reads command version 5", func() error {
		ci, err := s.direct.Cluster(wctx)
		if err != nil {
			return err
		}
		for _, m := range ci.Members {
			if m.Commands < fsm.VersionLockOptions {
				return fmt.Errorf("member %s reads command version %d", m.ID, m.Commands)
			}
		}
		return nil
	})
}

func sortDurations(ds []time.Duration) {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
}

func revokeRound(ctx context.Context, s *suite, w *worker, ttl, delay float64, round int) (told, before time.Duration, err error) {
	ref := fmt.Sprintf("v%d", round)
	name := s.lockName("revoke", ref)
	if _, err := w.open(ctx, message{Op: "open", Session: ref, TTL: ttl, LockDelay: ptr(delay), Grace: 30}); err != nil {
		return 0, 0, err
	}
	r, err := w.do(ctx, message{Op: "lock", Session: ref, Lock: ref, Name: name})
	if err != nil {
		return 0, 0, err
	}
	other, err := s.openDirect(ctx, 10*time.Second)
	if err != nil {
		return 0, 0, err
	}
	defer other.Close(context.WithoutCancel(ctx))
	type grant struct {
		at  time.Time
		err error
	}
	granted := make(chan grant, 1)
	gctx, cancel := context.WithTimeout(ctx, time.Duration((ttl+delay)*float64(time.Second))+30*time.Second)
	defer cancel()
	go func() {
		l, err := other.Lock(gctx, name)
		granted <- grant{time.Now(), err}
		if err == nil {
			l.Unlock(context.WithoutCancel(ctx))
		}
	}()
	if _, err := s.queueOf(gctx, name, 1); err != nil {
		return 0, 0, err
	}
	from := w.mark()
	revokedAt := time.Now()
	rv, err := s.direct.RevokeGrant(ctx, api.RevokeRequest{Name: name, Holder: r.Holder, Reason: revokeReason})
	if err != nil {
		return 0, 0, fmt.Errorf("revoke (a cluster with ACLs needs the suite's own cluster): %w", err)
	}
	if uint64(rv.Token) != r.Token {
		return 0, 0, fmt.Errorf("revoked token %d, want the worker's %d", rv.Token, r.Token)
	}
	g := <-granted
	if g.err != nil {
		return 0, 0, fmt.Errorf("the other client's lock: %w", g.err)
	}
	lctx, lcancel := context.WithTimeout(ctx, 100*time.Millisecond)
	lost, _, err := w.await(lctx, from, isLost(ref))
	lcancel()
	if err != nil {
		return 0, 0, fmt.Errorf("lost not reported by 100 ms after the other client's grant (%v after the revocation)",
			g.at.Sub(revokedAt).Round(time.Millisecond))
	}
	if !lost.at.Before(g.at) {
		return 0, 0, fmt.Errorf("lost reported %v after the other client's grant", lost.at.Sub(g.at).Round(time.Millisecond))
	}
	if lost.Kind != "admin" || lost.Reason != revokeReason {
		return 0, 0, fmt.Errorf("the lost event says kind %q, reason %q; want the revocation's %q, %q",
			lost.Kind, lost.Reason, "admin", revokeReason)
	}
	if w.seen(from, isState(ref, "expired")) || w.seen(from, isState(ref, "jeopardy")) {
		return 0, 0, errors.New("the session left safe: a revocation ends the grant, not the session")
	}
	if _, err := w.do(ctx, message{Op: "unlock", Lock: ref}); err != nil {
		return 0, 0, fmt.Errorf("unlock of the revoked lock: %w", err)
	}
	if _, err := w.do(ctx, message{Op: "close", Session: ref}); err != nil {
		return 0, 0, err
	}
	return lost.at.Sub(revokedAt), g.at.Sub(lost.at), nil
}

// caseReleaseRequested: the worker holds a lock, and the suite's own
// client asks for it (POST /v1/locks/request-release). The worker reports
// a release_requested event for that lock, and nothing else changes: the
// lock is not lost and stays the worker's until it unlocks it.
func caseReleaseRequested(ctx context.Context, s *suite, w *worker) (string, error) {
	if err := s.connect(ctx, w, 1); err != nil {
		return "", err
	}
	if _, err := w.open(ctx, message{Op: "open", Session: "s", TTL: 1, LockDelay: ptr(0.0), Grace: 30}); err != nil {
		return "", err
	}
	if err := s.lockOptionsReady(ctx); err != nil {
		return "", err
	}
	name := s.lockName("request-release")
	r, err := w.do(ctx, message{Op: "lock", Session: "s", Lock: "l", Name: name})
	if err != nil {
		return "", err
	}
	other, err := s.openDirect(ctx, 10*time.Second)
	if err != nil {
		return "", err
	}
	defer other.Close(context.WithoutCancel(ctx))
	from := w.mark()
	asked := time.Now()
	if err := other.RequestRelease(ctx, name); err != nil {
		return "", fmt.Errorf("request-release: %w", err)
	}
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ev, _, err := w.await(actx, from, func(e event) bool { return e.Event == "release_requested" && e.Lock == "l" })
	if err != nil {
		return "", fmt.Errorf("no release_requested event within 5 s (a keepalive every ttl/3): %w", err)
	}
	if ev.ByHolder == "" {
		return "", errors.New("the release_requested event names no asking holder (by_holder)")
	}
	if w.seen(from, isLost("l")) {
		return "", errors.New("the lock was lost: a release request changes nothing, the holder chooses")
	}
	st, err := s.direct.LockState(ctx, name)
	if err != nil {
		return "", err
	}
	if len(st.Holders) != 1 || st.Holders[0].Holder != r.Holder {
		return "", fmt.Errorf("the cluster's holders %+v, want the worker's grant", st.Holders)
	}
	if _, err := w.do(ctx, message{Op: "unlock", Lock: "l"}); err != nil {
		return "", err
	}
	return fmt.Sprintf("told %v after the request; the lock kept until the worker's unlock",
		ev.at.Sub(asked).Round(time.Millisecond)), nil
}
