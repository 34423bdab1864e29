//go:build raftlock_faults

package node

import (
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
)

// The SkipLockDelay fault (for testing the fault checker) ends every
// lock-delay as soon as it starts: a waiter behind a holder whose session
// expires with the longest lock-delay is granted well before that delay
// could have ended.
func TestSkipLockDelayFaultEndsDelaysAtOnce(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.Faults.SkipLockDelay = true })
	waiter := mustOpen(t, c, api.OpenRequest{TTL: 30 * time.Second})
	stopKA := c.keepAlive(waiter.ID, 300*time.Millisecond)
	defer stopKA()
	dying := mustOpen(t, c, api.OpenRequest{TTL: time.Second, LockDelay: api.MaxLockDelay})
	g := mustAcquire(t, c, api.AcquireRequest{Name: "skip", Session: dying.ID, Holder: "h"})
	// The wait is shorter than the lock-delay: only a skipped delay grants it.
	got := mustAcquire(t, c, api.AcquireRequest{Name: "skip", Session: waiter.ID, Holder: "w", Wait: api.MaxLockDelay / 3})
	if got.Token <= g.Token {
		t.Fatalf("token %d, want > %d", got.Token, g.Token)
	}
}

// The RevokeSlotEarly fault (for testing the fault checker) frees a
// revoked semaphore slot at once: a waiter is granted the slot well
// before the revoked holder's ttl + lock-delay could have passed, while
// a revoked plain lock still waits out its delay.
func TestRevokeSlotEarlyFaultFreesTheSlotAtOnce(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.Faults.RevokeSlotEarly = true }, withHTTP)
	ctx := ctxT(t)
	cl := c.client(t)
	holder := mustOpen(t, c, api.OpenRequest{Name: "holder", TTL: 30 * time.Second, LockDelay: api.MaxLockDelay})
	waiter := mustOpen(t, c, api.OpenRequest{Name: "waiter", TTL: 30 * time.Second})
	for _, id := range []string{holder.ID, waiter.ID} {
		stop := c.keepAlive(id, 300*time.Millisecond)
		defer stop()
	}
	mustAcquire(t, c, api.AcquireRequest{Name: "pool", Session: holder.ID, Holder: "h", Permits: 1})
	mustAcquire(t, c, api.AcquireRequest{Name: "plain", Session: holder.ID, Holder: "h"})
	for _, name := range []string{"pool", "plain"} {
		if _, err := cl.RevokeGrant(ctx, api.RevokeRequest{Name: name, Holder: "h", Reason: "test"}); err != nil {
			t.Fatalf("revoke %s: %v", name, err)
		}
	}
	// The wait is far shorter than ttl + lock-delay: only a freed slot
	// grants it.
	if _, err := cl.Acquire(ctx, api.AcquireRequest{Name: "pool", Session: waiter.ID, Holder: "w", Permits: 1, Wait: 10 * time.Second}); err != nil {
		t.Fatalf("acquire of the revoked slot: %v, want it granted at once", err)
	}
	if _, err := cl.Acquire(ctx, api.AcquireRequest{Name: "plain", Session: waiter.ID, Holder: "w"}); api.CodeOf(err) != api.CodeLockBusy {
		t.Fatalf("try of the revoked plain lock: %v, want lock_busy (its delay runs)", err)
	}
}
