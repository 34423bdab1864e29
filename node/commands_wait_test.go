package node

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/transport/client"
)

// versionGated lists a request of each kind that only command version 5
// carries, each run by a client on a cluster: held is a plain lock that
// session s holds as holder "h" when it runs.
var versionGated = []struct {
	name string
	run  func(ctx context.Context, cl *client.Client, s api.Info, held string) error
}{
	{"semaphore acquire", func(ctx context.Context, cl *client.Client, s api.Info, _ string) error {
		_, err := cl.Acquire(ctx, api.AcquireRequest{Name: "pool", Session: s.ID, Holder: "p", Permits: 2})
		return err
	}},
	{"acquire with max_hold", func(ctx context.Context, cl *client.Client, s api.Info, _ string) error {
		_, err := cl.Acquire(ctx, api.AcquireRequest{Name: "held-briefly", Session: s.ID, Holder: "m", MaxHold: time.Hour})
		return err
	}},
	{"revoke", func(ctx context.Context, cl *client.Client, _ api.Info, held string) error {
		_, err := cl.RevokeGrant(ctx, api.RevokeRequest{Name: held, Holder: "h", Reason: "test"})
		return err
	}},
	{"request release", func(ctx context.Context, cl *client.Client, s api.Info, held string) error {
		return cl.RequestRelease(ctx, api.RequestReleaseRequest{Name: held, Session: s.ID, Holder: "asker"})
	}},
	{"close session by handle", func(ctx context.Context, cl *client.Client, s api.Info, _ string) error {
		_, err := cl.CloseSessionByHandle(ctx, api.CloseByHandleRequest{Handle: api.SessionHandle(s.ID), Reason: "test"})
		return err
	}},
}

// A new cluster serves what needs command version 5 from the moment it
// has a leader: a leader that does not know yet what its members read
// (they record it shortly after they start) waits for their records, or
// answers no_leader, which the client retries; never a refusal the
// caller must retry by hand.
func TestNewClusterServesVersionGatedRequestsFromItsFirstLeader(t *testing.T) {
	for _, tc := range versionGated {
		t.Run(tc.name, func(t *testing.T) {
			c := newHTTPCluster(t)
			c.leader()
			cl := c.client(t)
			defer cl.CloseIdleConnections()
			ctx := ctxT(t)
			s, err := cl.OpenSession(ctx, api.OpenRequest{Name: "first", TTL: 20 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cl.Acquire(ctx, api.AcquireRequest{Name: "held", Session: s.ID, Holder: "h"}); err != nil {
				t.Fatal(err)
			}
			if err := tc.run(ctx, cl, s, "held"); err != nil {
				t.Fatalf("%s on a new cluster: %v", tc.name, err)
			}
		})
	}
}

// In a cluster mid-upgrade, whose member n3's record says that its build
// reads command version 4, every request that needs version 5 is refused
// with invalid_argument (not retried: an operator must upgrade n3),
// naming the version and the member; nothing is proposed.
func TestMixedClusterRefusesVersionGatedRequestsNamingTheMember(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) {
		if cfg.ID == "n3" {
			cfg.readsUpTo = fsm.VersionTokenLimits
		}
	}, withHTTP)
	c.awaitRecords(t, fsm.Version, fsm.Version, fsm.VersionTokenLimits)
	cl := c.client(t)
	defer cl.CloseIdleConnections()
	ctx := ctxT(t)
	s, err := cl.OpenSession(ctx, api.OpenRequest{Name: "mixed", TTL: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Acquire(ctx, api.AcquireRequest{Name: "held", Session: s.ID, Holder: "h"}); err != nil {
		t.Fatal(err)
	}
	ld, _ := c.leader()
	before := ld.fsm.Dump()
	const want = "every member must run a build that reads command version 5, and member n3 reads 4: upgrade it first"
	for _, tc := range versionGated {
		err := tc.run(ctx, cl, s, "held")
		if api.CodeOf(err) != api.CodeInvalidArgument || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s in a mixed cluster: %v, want invalid_argument saying %q", tc.name, err, want)
		}
	}
	if after := ld.fsm.Dump(); string(after) != string(before) {
		t.Fatal("a refused request changed the state")
	}
}

// A member of the configuration that has recorded no command version (a
// non-voter an operator added, which has not started and registered
// itself) leaves the leader not knowing what it reads: a request that
// needs version 5 is answered no_leader, which clients retry, once the
// leader has waited commandsWait for the member's record.
func TestMemberWithoutRecordedVersionMakesGatedRequestsRetryable(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.awaitRecords(t, fsm.Version, fsm.Version, fsm.Version)
	s := mustOpen(t, c, api.OpenRequest{TTL: 20 * time.Second})
	ld, _ := c.leader()
	ctx := ctxT(t)
	// Nothing listens at the new member's addresses.
	gone := c.listen("127.0.0.1:0")
	addr := gone.Addr().String()
	gone.Close()
	if err := ld.AddMember(ctx, api.Member{ID: "n4", RaftAddr: addr, HTTPAddr: addr}); err != nil {
		t.Fatal(err)
	}
	_, err := ld.Acquire(ctx, api.AcquireRequest{Name: "pool", Session: s.ID, Holder: "p", Permits: 2})
	if api.CodeOf(err) != api.CodeNoLeader || !strings.Contains(err.Error(), "member n4 has not recorded which command versions it reads") {
		t.Fatalf("permits while n4 has recorded nothing: %v, want no_leader naming n4", err)
	}
	if _, ok := ld.fsm.Lock("pool"); ok {
		t.Fatal("the refused acquire was proposed")
	}
}
