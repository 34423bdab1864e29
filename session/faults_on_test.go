//go:build raftlock_faults

package session

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestUnsafeTrustLateGrantsTrustsARevokedGrant pins what the fault
// checker's switch breaks: with UnsafeTrustLateGrants, a grant answered
// after its revocation dropped out of the keepalive answers, and after the
// lock went to another session, is reported held with Lost() open (the
// default client asks again and finds the lock busy:
// TestLateGrantAnswerAfterARevocationIsNotHeld).
func TestUnsafeTrustLateGrantsTrustsARevokedGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		h := &heldAnswer{Backend: r.fb, release: make(chan struct{})}
		s, err := Open(context.Background(), h, WithClock(r.fc), TTL(3*time.Second), LockDelay(2*time.Second), UnsafeTrustLateGrants())
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { _ = s.Close(context.Background()) })
		done := make(chan acquired, 1)
		go func() {
			l, err := s.TryLock(context.Background(), "a")
			done <- acquired{l, err}
		}()
		r.settle(s)
		hs := r.holders("a")
		if len(hs) != 1 || !r.fb.Revoke("a", hs[0].Holder, "stuck job") {
			t.Fatalf("holders %+v: want the held-back grant, revoked", hs)
		}
		r.runTo(s, at(6*time.Second)) // past the revocation's ttl + lock-delay
		other := r.open(TTL(3 * time.Second))
		if _, err := other.TryLock(context.Background(), "a"); err != nil {
			t.Fatalf("the other session's try: %v", err)
		}
		close(h.release)
		r.settle(s)
		got := <-done
		if got.err != nil {
			t.Fatalf("err = %v, want the late grant trusted", got.err)
		}
		select {
		case <-got.l.Lost():
			t.Fatal("Lost() closed: the late grant was not trusted")
		default:
		}
	})
}
