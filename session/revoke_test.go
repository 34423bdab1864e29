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
