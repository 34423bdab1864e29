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
