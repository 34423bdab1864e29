package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/sequencer"
)

// slotGrant checks that r, the reply to a lock of name with permits, is a
// semaphore's grant: its slot, its permits and its sequencer, which names
// both (rl1:p<slot>/<permits>:<token>:<name>). It returns the slot.
func slotGrant(r message, name string, permits uint64) (uint64, error) {
	if r.Slot == nil {
		return 0, fmt.Errorf("the lock reply of a semaphore of %d names no slot (a client that cannot take a semaphore: the lock request's permits)", permits)
	}
	if r.Permits != permits {
		return 0, fmt.Errorf("the lock reply gives permits %d, want %d", r.Permits, permits)
	}
	seq, err := sequencer.Parse(r.Sequencer)
	if err != nil {
		return 0, fmt.Errorf("the lock reply's sequencer: %w", err)
	}
	if !seq.Semaphore || seq.Slot != *r.Slot || seq.Permits != permits || uint64(seq.Token) != r.Token || seq.Name != name {
		return 0, fmt.Errorf("the sequencer %q does not name the grant (slot %d of %d, token %d, %s)", r.Sequencer, *r.Slot, permits, r.Token, name)
	}
	return *r.Slot, nil
}

// caseSemaphoreSlotRevoked: the worker holds both slots of a semaphore of
// 2 (sessions a and b, ttl 1 s, lock-delay 1 s), and its session c waits
// for a slot; the suite revokes a's grant. Only a's slot goes into a
// lock-delay, ending no sooner than ttl + lock-delay after the
// revocation. The worker reports a's lost event, with the revocation's
// kind and reason, before that delay ends, so before the slot can be
// granted to anyone; c is granted that slot, not before the delay ends,
// with a later token; b keeps its slot and grant, never lost; a's session
// stays safe and its unlock of the revoked lock succeeds.
func caseSemaphoreSlotRevoked(ctx context.Context, s *suite, w *worker) (string, error) {
	if err := s.connect(ctx, w, 2); err != nil {
		return "", err
	}
	if err := s.lockOptionsReady(ctx); err != nil {
		return "", err
	}
	const ttl, delay = 1.0, 1.0
	const permits = 2
	for _, ref := range []string{"a", "b", "c"} {
		if _, err := w.open(ctx, message{Op: "open", Session: ref, TTL: ttl, LockDelay: ptr(delay), Grace: 30}); err != nil {
			return "", err
		}
	}
	name := s.lockName("revoke", "semaphore")
	ra, err := w.do(ctx, message{Op: "lock", Session: "a", Lock: "a", Name: name, Permits: permits})
	if err != nil {
		return "", err
	}
	slotA, err := slotGrant(ra, name, permits)
	if err != nil {
		return "", err
	}
	rb, err := w.do(ctx, message{Op: "lock", Session: "b", Lock: "b", Name: name, Permits: permits})
	if err != nil {
		return "", err
	}
	slotB, err := slotGrant(rb, name, permits)
	if err != nil {
		return "", err
	}
	if slotB == slotA {
		return "", fmt.Errorf("both holders were given slot %d", slotA)
	}
	from := w.mark()
	waitC := w.callAsync(ctx, message{Op: "lock", Session: "c", Lock: "c", Name: name, Permits: permits, Wait: 30})
	if _, err := s.queueOf(ctx, name, 1); err != nil {
		return "", err
	}
	revokedAt := time.Now()
	rv, err := s.direct.RevokeGrant(ctx, api.RevokeRequest{Name: name, Holder: ra.Holder, Reason: revokeReason})
	if err != nil {
		return "", fmt.Errorf("revoke (a cluster with ACLs needs the suite's own cluster): %w", err)
	}
	if uint64(rv.Token) != ra.Token {
		return "", fmt.Errorf("revoked token %d, want the worker's %d", rv.Token, ra.Token)
	}
	st, err := s.direct.LockState(ctx, name)
	if err != nil {
		return "", err
	}
	var until time.Time
	for _, d := range st.SlotDelays {
		if d.Slot != slotA {
			return "", fmt.Errorf("slot %d is in a lock-delay too: a revocation delays the revoked slot only", d.Slot)
		}
		until = d.Until
	}
	if until.IsZero() {
		// Already over (a very slow machine) or never started: either way
		// the case cannot tell when the slot became grantable.
		return "", fmt.Errorf("the revoked slot %d shows no lock-delay right after the revocation (slot delays %+v)", slotA, st.SlotDelays)
	}
	if d := until.Sub(revokedAt); d < seconds(ttl+delay) {
		return "", fmt.Errorf("the revoked slot's lock-delay ends %v after the revocation, want ttl + lock-delay (%v)", d.Round(time.Millisecond), seconds(ttl+delay))
	}
	lctx, lcancel := context.WithTimeout(ctx, time.Until(until)+5*time.Second)
	lost, _, err := w.await(lctx, from, isLost("a"))
	lcancel()
	if err != nil {
		return "", fmt.Errorf("the revoked slot's lost event not reported by 5 s after the slot's lock-delay ended: %w", err)
	}
	if !lost.at.Before(until) {
		return "", fmt.Errorf("lost reported %v after the revoked slot's lock-delay ended (when the slot can be granted again)", lost.at.Sub(until).Round(time.Millisecond))
	}
	if lost.Kind != "admin" || lost.Reason != revokeReason {
		return "", fmt.Errorf("the lost event says kind %q, reason %q; want the revocation's %q, %q", lost.Kind, lost.Reason, "admin", revokeReason)
	}
	// The waiter's grant: no state read before the delay's end shows it.
	var sawAt time.Time
	gctx, gcancel := context.WithTimeout(ctx, time.Until(until)+15*time.Second)
	err = untilOrEarly(gctx, "the waiter granted the revoked slot", func() error {
		st, err := s.direct.LockState(gctx, name)
		if err != nil {
			return err
		}
		read := time.Now()
		for _, h := range st.Holders {
			if h.Slot == slotA && h.Holder != ra.Holder {
				if read.Before(until) {
					return errEarly{fmt.Errorf("slot %d granted again (holder %s) %v before its lock-delay ended",
						slotA, h.Holder, until.Sub(read).Round(time.Millisecond))}
				}
				sawAt = read
				return nil
			}
		}
		return errors.New("slot not granted yet")
	})
	gcancel()
	if err != nil {
		return "", err
	}
	rc, err := waitC()
	if err != nil {
		return "", fmt.Errorf("the waiting lock: %w", err)
	}
	if rc.OK == nil || !*rc.OK {
		return "", fmt.Errorf("the waiting lock: %s: %s", rc.Code, rc.Message)
	}
	slotC, err := slotGrant(rc, name, permits)
	if err != nil {
		return "", fmt.Errorf("the waiting lock: %w", err)
	}
	if slotC != slotA || rc.Token <= ra.Token {
		return "", fmt.Errorf("the waiter was granted slot %d token %d, want the revoked slot %d with a token above %d", slotC, rc.Token, slotA, ra.Token)
	}
	st, err = s.direct.LockState(ctx, name)
	if err != nil {
		return "", err
	}
	held := map[uint64]api.Holder{}
	for _, h := range st.Holders {
		held[h.Slot] = h
	}
	if h := held[slotA]; h.Holder != rc.Holder || uint64(h.Token) != rc.Token {
		return "", fmt.Errorf("the cluster's slot %d holder %+v, want the waiter's grant (holder %s, token %d)", slotA, h, rc.Holder, rc.Token)
	}
	if h := held[slotB]; h.Holder != rb.Holder || uint64(h.Token) != rb.Token {
		return "", fmt.Errorf("the other slot's holder changed: %+v, want %s with token %d", h, rb.Holder, rb.Token)
	}
	if w.seen(from, isLost("b")) || w.seen(from, isLost("c")) {
		return "", errors.New("a grant of another slot was reported lost: a revocation ends one slot's grant")
	}
	if w.seen(from, isState("a", "expired")) || w.seen(from, isState("a", "jeopardy")) {
		return "", errors.New("session a left safe: a revocation ends the grant, not the session")
	}
	for _, ref := range []string{"a", "b", "c"} {
		if _, err := w.do(ctx, message{Op: "unlock", Lock: ref}); err != nil {
			return "", fmt.Errorf("unlock %s: %w", ref, err)
		}
	}
	return fmt.Sprintf("semaphore of 2 (ttl %gs, lock-delay %gs): slot %d revoked, its delay ends %v after; told %v after the revocation, %v before the delay's end; the waiter got slot %d (token %d) by %v after the revocation; slot %d kept",
		ttl, delay, slotA, until.Sub(revokedAt).Round(time.Millisecond), lost.at.Sub(revokedAt).Round(time.Millisecond),
		until.Sub(lost.at).Round(time.Millisecond), slotC, rc.Token, sawAt.Sub(revokedAt).Round(time.Millisecond), slotB), nil
}

// errEarly is a condition's failure that ends the polling at once.
type errEarly struct{ error }

// untilOrEarly is until, except that a condition failing with errEarly ends it
// at once with that error.
func untilOrEarly(ctx context.Context, what string, cond func() error) error {
	var early error
	err := until(ctx, what, func() error {
		err := cond()
		var e errEarly
		if errors.As(err, &e) {
			early = e.error
			return nil
		}
		return err
	})
	if early != nil {
		return early
	}
	return err
}

// caseFenceTenureChange: through the client's own fence (fence_check),
// sequencers of real grants of one name across a change of its kind or
// permits. The worker takes each grant, and releases it before the next
// tenure begins; then a new fence is offered an old grant, a grant of the
// next tenure, and the old one again: the old one must be refused
// (stale), since a later tenure's token was admitted. Four orders: a
// semaphore of 3 (its slot 2) then of 1; of 3, of 1, of 3 again; a
// semaphore then shared; shared then a semaphore.
func caseFenceTenureChange(ctx context.Context, s *suite, w *worker) (string, error) {
	if err := s.connect(ctx, w, 2); err != nil {
		return "", err
	}
	if err := s.lockOptionsReady(ctx); err != nil {
		return "", err
	}
	for _, ref := range []string{"t0", "t1", "t2"} {
		if _, err := w.open(ctx, message{Op: "open", Session: ref, TTL: 5, LockDelay: ptr(0.0), Grace: 30}); err != nil {
			return "", err
		}
	}
	n := 0
	// take holds name in session ref (mode, permits) as lock reference
	// g<n>, and returns its reply; ref() is the last one's reference.
	take := func(ref, name, mode string, permits uint64) (message, error) {
		n++
		r, err := w.do(ctx, message{Op: "lock", Session: ref, Lock: fmt.Sprintf("g%d", n), Name: name, Mode: mode, Permits: permits})
		if err != nil {
			return r, err
		}
		if permits > 0 {
			if _, err := slotGrant(r, name, permits); err != nil {
				return r, err
			}
		}
		return r, nil
	}
	// release unlocks the grants of lock references refs.
	release := func(refs ...string) error {
		for _, ref := range refs {
			if _, err := w.do(ctx, message{Op: "unlock", Lock: ref}); err != nil {
				return err
			}
		}
		return nil
	}
	ref := func() string { return fmt.Sprintf("g%d", n) }

	// A semaphore of 3: slot 2's sequencer; then of 1; then of 3 again.
	nameN := s.lockName("tenure", "n3-n1")
	var old3 message
	var refs []string
	for _, t := range []string{"t0", "t1", "t2"} {
		r, err := take(t, nameN, "", 3)
		if err != nil {
			return "", err
		}
		refs = append(refs, ref())
		if *r.Slot == 2 {
			old3 = r
		}
	}
	if old3.Slot == nil {
		return "", errors.New("no holder of the semaphore of 3 was given slot 2")
	}
	if err := release(refs...); err != nil {
		return "", err
	}
	one, err := take("t0", nameN, "", 1)
	if err != nil {
		return "", err
	}
	if err := release(ref()); err != nil {
		return "", err
	}
	again, err := take("t0", nameN, "", 3)
	if err != nil {
		return "", err
	}
	if err := release(ref()); err != nil {
		return "", err
	}
	// A semaphore of 2, then shared.
	nameS := s.lockName("tenure", "semaphore-shared")
	sem, err := take("t0", nameS, "", 2)
	if err != nil {
		return "", err
	}
	if err := release(ref()); err != nil {
		return "", err
	}
	shared, err := take("t0", nameS, "shared", 0)
	if err != nil {
		return "", err
	}
	if err := release(ref()); err != nil {
		return "", err
	}
	// Shared, then a semaphore of 2.
	nameP := s.lockName("tenure", "shared-semaphore")
	oldShared, err := take("t0", nameP, "shared", 0)
	if err != nil {
		return "", err
	}
	if err := release(ref()); err != nil {
		return "", err
	}
	newSem, err := take("t0", nameP, "", 2)
	if err != nil {
		return "", err
	}
	if err := release(ref()); err != nil {
		return "", err
	}

	type step struct {
		seq, want string
	}
	orders := []struct {
		what  string
		steps []step
	}{
		{"a semaphore of 3, then of 1", []step{{old3.Sequencer, "admit"}, {one.Sequencer, "admit"}, {old3.Sequencer, "stale"}}},
		{"a semaphore of 3, of 1, of 3 again", []step{{old3.Sequencer, "admit"}, {one.Sequencer, "admit"}, {again.Sequencer, "admit"}, {old3.Sequencer, "stale"}}},
		{"a semaphore of 2, then shared", []step{{sem.Sequencer, "admit"}, {shared.Sequencer, "admit"}, {sem.Sequencer, "stale"}}},
		{"shared, then a semaphore of 2", []step{{oldShared.Sequencer, "admit"}, {newSem.Sequencer, "admit"}, {oldShared.Sequencer, "stale"}}},
	}
	var bad []string
	for i, o := range orders {
		for j, st := range o.steps {
			r, err := w.do(ctx, message{Op: "fence_check", Fence: fmt.Sprintf("tenure%d", i), Sequencer: st.seq})
			if err != nil {
				return "", err
			}
			if r.Verdict != st.want {
				bad = append(bad, fmt.Sprintf("%s, step %d (%s): %s, want %s", o.what, j+1, st.seq, r.Verdict, st.want))
			}
		}
	}
	if len(bad) > 0 {
		return "", fmt.Errorf("the fence admitted an earlier tenure's grant: %s", strings.Join(bad, "; "))
	}
	return fmt.Sprintf("%d orders of real grants (%s .. %s): each old grant refused after a later tenure's", len(orders), old3.Sequencer[:strings.LastIndexByte(old3.Sequencer, ':')], newSem.Sequencer[:strings.LastIndexByte(newSem.Sequencer, ':')]), nil
}
