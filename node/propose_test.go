package node

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
)

// TestProposalHonoursItsContext pins the context contract down to the Raft
// future: a write whose ctx ends while Raft cannot commit (the followers
// are gone, and the leader's lease keeps it leading for a while) returns
// unknown_outcome for the ended request at once, instead of waiting for
// the commit or the loss of leadership; so does a read's leadership check.
func TestProposalHonoursItsContext(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) {
		// A lease long enough (against the 100 ms the requests wait) that
		// the leader does not step down before their ctx ends.
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 3*time.Second, 3*time.Second, 3*time.Second
	})
	leader, li := c.leader()
	ctx := context.Background()
	s, err := leader.OpenSession(ctx, api.OpenRequest{Name: "ctx", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if i != li {
			c.stop(i)
		}
	}

	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = leader.Acquire(wctx, api.AcquireRequest{Name: "ctx/lock", Session: s.ID, Holder: "h"})
	if api.CodeOf(err) != api.CodeUnknownOutcome || !strings.Contains(err.Error(), "request ended") {
		t.Fatalf("acquire whose ctx ended before the commit: %v; want unknown_outcome for the ended request", err)
	}

	rctx, rcancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer rcancel()
	if _, err := leader.LockState(rctx, "ctx/lock"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("read whose ctx ended before leadership was confirmed: %v; want the ctx's error", err)
	}
}
