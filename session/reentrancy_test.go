package session

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/api"
)

// Locks are not re-entrant: a second Lock, TryLock, RLock or TryRLock of
// a name the same Session holds fails at once with already_held, naming
// the lock and the holder id, without a request to the cluster, instead
// of waiting on its own grant; so does one while another acquire of the
// name by the session is under way. Another session queues as ever, and
// once the Lock is unlocked the session may take the name again.
func TestLockOfANameTheSessionHoldsFailsAtOnceWithAlreadyHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		s := r.open(TTL(60 * time.Second))
		ctx := context.Background()
		a, err := s.Lock(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		sent := r.fb.Calls("Acquire")
		for name, again := range map[string]func(context.Context, string, ...LockOption) (*Lock, error){
			"Lock": s.Lock, "TryLock": s.TryLock, "RLock": s.RLock, "TryRLock": s.TryRLock,
		} {
			_, err := again(ctx, "a")
			if !errors.Is(err, api.ErrAlreadyHeld) || api.CodeOf(err) != api.CodeAlreadyHeld ||
				!strings.Contains(err.Error(), "lock a") || !strings.Contains(err.Error(), a.Holder()) {
				t.Fatalf("%s of a held name: %v; want already_held naming the lock and holder %s", name, err, a.Holder())
			}
			if strings.Contains(err.Error(), s.ID()) {
				t.Fatalf("%s: the error carries the session id: %v", name, err)
			}
		}
		if got := r.fb.Calls("Acquire"); got != sent {
			t.Fatalf("%d acquire requests for the refused calls, want none", got-sent)
		}

		other := r.open(TTL(60 * time.Second))
		waiting := make(chan error, 1)
		go func() { _, err := other.Lock(ctx, "a"); waiting <- err }()
		eventually(t, "the other session to queue", func() bool { return r.fb.Waiting("Acquire") == 1 })
		if err := a.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-waiting; err != nil {
			t.Fatalf("the other session's Lock: %v", err)
		}

		// An acquire under way counts too: a second one fails at once.
		first := make(chan error, 1)
		go func() { _, err := s.Lock(ctx, "a"); first <- err }()
		eventually(t, "the session's Lock to queue", func() bool { return r.fb.Waiting("Acquire") == 1 })
		if _, err := s.TryLock(ctx, "a"); !errors.Is(err, api.ErrAlreadyHeld) || !strings.Contains(err.Error(), "acquiring") {
			t.Fatalf("TryLock while a Lock of the name waits: %v; want already_held", err)
		}
		b, err := s.Lock(ctx, "b")
		if err != nil {
			t.Fatalf("another name: %v", err)
		}
		if err := b.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := other.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-first; err != nil {
			t.Fatalf("the session's Lock once the other closed: %v", err)
		}
	})
}
