package session

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// TestRevokedGrantIsLostAtTheNextKeepalive: a grant the cluster revoked is
// lost when the next keepalive's answer names it (long before the lease
// would lose it), its Err says revoked and why, the session and its other
// locks stay, and Unlock does not ask the cluster again.
func TestRevokedGrantIsLostAtTheNextKeepalive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		s := r.open(TTL(30*time.Second), LockDelay(10*time.Second))
		a, err := s.TryLock(context.Background(), "a")
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.TryLock(context.Background(), "b")
		if err != nil {
			t.Fatal(err)
		}
		if !r.fb.Revoke("a", a.Holder(), "stuck job") {
			t.Fatal("the fake found no grant to revoke")
		}
		r.runTo(s, at(5*time.Second))
		if isClosed(a.Lost()) || a.Err() != nil {
			t.Fatal("lost before any keepalive named the revocation")
		}
		r.runTo(s, at(10*time.Second)) // the first keepalive: ttl/3
		if !isClosed(a.Lost()) {
			t.Fatal("the revoked lock's Lost() is open after a keepalive named it")
		}
		var re *RevokedError
		if !errors.As(a.Err(), &re) || re.Reason != "stuck job" || re.Name != "a" || re.Token != a.Token() {
			t.Fatalf("Err() = %v, want a RevokedError with the reason", a.Err())
		}
		if isClosed(b.Lost()) || b.Err() != nil || !s.Safe() {
			t.Fatal("the session's other lock or the session was lost")
		}
		releases := len(r.fb.Log("Release"))
		if err := a.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := len(r.fb.Log("Release")); n != releases {
			t.Errorf("Unlock of a revoked lock sent a release")
		}
	})
}

// TestMaxHoldLosesTheLockBeforeTheClusterRevokesIt: with a hold limit the
// client closes Lost() 1% before the limit, counted from its first
// acquire request (before the grant), with a max_hold RevokedError.
func TestMaxHoldLosesTheLockBeforeTheClusterRevokesIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		s := r.open(TTL(30 * time.Second))
		l, err := s.TryLock(context.Background(), "a", MaxHold(100*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		r.runTo(s, at(98*time.Second))
		if isClosed(l.Lost()) {
			t.Fatal("lost before its hold limit (less 1%)")
		}
		r.runTo(s, at(99*time.Second))
		if !isClosed(l.Lost()) {
			t.Fatal("Lost() still open 1% before the hold limit")
		}
		var re *RevokedError
		if !errors.As(l.Err(), &re) || re.Kind != "max_hold" {
			t.Fatalf("Err() = %v, want a max_hold RevokedError", l.Err())
		}
		if !s.Safe() {
			t.Fatal("the session was lost with the lock")
		}
	})
}
