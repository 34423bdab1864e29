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

// caseLateGrantAfterRevocation: the worker's waiting lock is granted at
// once, but the proxy holds that one answer back for lateGrantHold, more
// than ttl + lock-delay (1 s + 1 s) and less than a waiting attempt's
// timeout (10 s). Meanwhile the suite revokes the grant; the revocation
// leaves the keepalive answers when its lock-delay ends, and the suite's
// own client takes the lock then. The held answer then reaches the worker:
// taken as held, the worker would hold the other client's lock with a
// live session. The worker must not report the lock held while the other
// client holds it (a wait may go on, or end in an error); a lost event
// before the other's grant would also do. After the other client's unlock,
// a lock still waiting must come back with a later grant, which the
// cluster shows as the worker's.
func caseLateGrantAfterRevocation(ctx context.Context, s *suite, w *worker) (string, error) {
	if err := s.connect(ctx, w, 2); err != nil {
		return "", err
	}
	if err := s.lockOptionsReady(ctx); err != nil {
		return "", err
	}
	const ttl, delay = 1.0, 1.0
	if _, err := w.open(ctx, message{Op: "open", Session: "s", TTL: ttl, LockDelay: ptr(delay), Grace: 30}); err != nil {
		return "", err
	}
	other, err := s.openDirect(ctx, 10*time.Second)
	if err != nil {
		return "", err
	}
	defer other.Close(context.WithoutCancel(ctx))
	name := s.lockName("revoke", "late-grant")
	type reply struct {
		m   message
		err error
		at  time.Time
	}
	replied := make(chan reply, 1)
	from := w.mark()
	held := s.px.Held()
	s.px.HoldAnswerTo("POST /v1/acquire", lateGrantHold)
	defer s.px.HoldAnswerTo("", 0)
	go func() {
		r, err := w.call(ctx, message{Op: "lock", Session: "s", Lock: "l", Name: name, Wait: 60})
		replied <- reply{r, err, time.Now()}
	}()
	var first api.Holder
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = until(wctx, "the worker's grant", func() error {
		st, err := s.direct.LockState(wctx, name)
		if err != nil {
			return err
		}
		if len(st.Holders) != 1 {
			return fmt.Errorf("%d holders", len(st.Holders))
		}
		first = st.Holders[0]
		return nil
	})
	cancel()
	if err != nil {
		return "", err
	}
	revokedAt := time.Now()
	if _, err := s.direct.RevokeGrant(ctx, api.RevokeRequest{Name: name, Holder: first.Holder, Reason: revokeReason}); err != nil {
		return "", fmt.Errorf("revoke (a cluster with ACLs needs the suite's own cluster): %w", err)
	}
	gctx, gcancel := context.WithTimeout(ctx, 30*time.Second)
	ol, err := other.Lock(gctx, name)
	gcancel()
	if err != nil {
		return "", fmt.Errorf("the other client's lock: %w", err)
	}
	otherAt := time.Now()
	// The held answer reaches the worker; the other client keeps the lock
	// for lateGrantKeep after that, long enough for a worker that takes it
	// as held to say so.
	hctx, hcancel := context.WithTimeout(ctx, lateGrantHold+5*time.Second)
	err = until(hctx, "the held-back answer passed on", func() error {
		if s.px.Held() == held {
			return errors.New("still held")
		}
		return nil
	})
	hcancel()
	if err != nil {
		return "", err
	}
	passedAt := time.Now()
	if err := pause(ctx, lateGrantKeep); err != nil {
		return "", err
	}
	var got *reply
	select {
	case r := <-replied:
		got = &r
	default:
	}
	if got != nil && got.err != nil {
		return "", got.err
	}
	if got != nil && got.m.OK != nil && *got.m.OK {
		// A lost event that counts came before the other's grant: long ago.
		lctx, lcancel := context.WithTimeout(ctx, 100*time.Millisecond)
		lost, _, lerr := w.await(lctx, from, isLost("l"))
		lcancel()
		if lerr != nil || !lost.at.Before(otherAt) {
			return "", fmt.Errorf("the worker reported the lock held (token %d, the revoked grant's %d) %v after the revocation, while the other client holds token %d (granted %v after it), with no lost event before that grant",
				got.m.Token, first.Token, got.at.Sub(revokedAt).Round(time.Millisecond), ol.Token(), otherAt.Sub(revokedAt).Round(time.Millisecond))
		}
	}
	if err := ol.Unlock(ctx); err != nil {
		return "", fmt.Errorf("the other client's unlock: %w", err)
	}
	if got != nil {
		// The worker's lock ended in an error (or a lock already lost):
		// what the client says when its grant is gone.
		return fmt.Sprintf("answer held %v; revoked, the other client granted %v later; the worker's lock ended: %s",
			lateGrantHold, otherAt.Sub(revokedAt).Round(time.Millisecond), got.m.Code), nil
	}
	rctx, rcancel := context.WithTimeout(ctx, 15*time.Second)
	defer rcancel()
	var r reply
	select {
	case r = <-replied:
	case <-rctx.Done():
		return "", errors.New("the worker's lock did not come back within 15 s of the other client's unlock")
	}
	if r.err != nil {
		return "", r.err
	}
	if r.m.OK == nil || !*r.m.OK {
		return fmt.Sprintf("answer held %v; the worker's lock ended after the other's unlock: %s", lateGrantHold, r.m.Code), nil
	}
	if r.m.Token <= uint64(ol.Token()) {
		return "", fmt.Errorf("the worker's lock came back with token %d, not later than the other client's %d", r.m.Token, ol.Token())
	}
	st, err := s.direct.LockState(ctx, name)
	if err != nil {
		return "", err
	}
	if len(st.Holders) != 1 || st.Holders[0].Holder != r.m.Holder || uint64(st.Holders[0].Token) != r.m.Token {
		return "", fmt.Errorf("the cluster's holders %+v, want the worker's grant (holder %s, token %d)", st.Holders, r.m.Holder, r.m.Token)
	}
	if _, err := w.do(ctx, message{Op: "unlock", Lock: "l"}); err != nil {
		return "", err
	}
	return fmt.Sprintf("answer held %v; revoked, the other client granted %v later; the worker waited on and got token %d (revoked %d, other %d) %v after the other's unlock",
		lateGrantHold, otherAt.Sub(revokedAt).Round(time.Millisecond), r.m.Token, first.Token, ol.Token(),
		r.at.Sub(passedAt.Add(lateGrantKeep)).Round(time.Millisecond)), nil
}

// lateGrantHold is how long the late-grant case holds the grant's answer
// back: above ttl + lock-delay (2 s) plus the client's margin, below the
// timeout of a waiting attempt (10 s). lateGrantKeep is how long the other
// client keeps the lock after the answer passed.
const (
	lateGrantHold = 4 * time.Second
	lateGrantKeep = 2 * time.Second
)
