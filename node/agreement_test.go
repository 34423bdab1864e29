package node

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/fsm"
)

// rogueApply changes n's state behind Raft's back, as a damaged replica's
// would be: it applies an acquire the log does not have, at the index of
// the next real entry.
func rogueApply(t *testing.T, n *Node, session string) {
	t.Helper()
	cmd := fsm.Command{Type: fsm.CmdAcquire, Now: time.Now().UnixNano(),
		Acquire: &fsm.Acquire{Lock: "rogue", Session: session, Holder: "x"}}
	data, err := cmd.Encode()
	if err != nil {
		t.Fatal(err)
	}
	n.fsm.Apply(&raft.Log{Index: n.fsm.AppliedIndex() + 1, Type: raft.LogCommand, Data: data})
}

// suffrage is id's suffrage in n's latest configuration.
func suffrage(n *Node, id string) (raft.ServerSuffrage, bool) {
	cf := n.raft.GetConfiguration()
	if cf.Error() != nil {
		return 0, false
	}
	for _, s := range cf.Configuration().Servers {
		if string(s.ID) == id {
			return s.Suffrage, true
		}
	}
	return 0, false
}

func agreementCluster(t *testing.T) (*testCluster, *Node, int, string) {
	t.Helper()
	c := newTestCluster(t, 3, func(cfg *Config) {
		slowRaft(cfg)
		cfg.DigestCheckInterval = 100 * time.Millisecond
	})
	ld, li := c.leader()
	info, err := ld.OpenSession(ctxT(t), api.OpenRequest{Name: "s", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "every replica applied the open", func() error {
		for _, n := range c.nodes {
			if n.fsm.AppliedIndex() < ld.fsm.AppliedIndex() {
				return fmt.Errorf("%s at %d", n.ID(), n.fsm.AppliedIndex())
			}
		}
		return nil
	})
	return c, ld, li, info.ID
}

// A follower whose state left the others' (here: it applied an entry the
// log does not have) is found by the leader's digest check: it is
// demoted to non-voter (so it can never lead, and only a leader serves),
// told, and reports its divergence; the majority is untouched.
func TestDivergedFollowerIsFoundDemotedAndTold(t *testing.T) {
	c, ld, li, sid := agreementCluster(t)
	f := c.nodes[(li+1)%3]
	rogueApply(t, f, sid)
	if _, err := ld.Acquire(ctxT(t), api.AcquireRequest{Name: "a", Session: sid, Holder: "h"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the diverged follower is demoted and told", func() error {
		if s, ok := suffrage(ld, f.ID()); !ok || s != raft.Nonvoter {
			return fmt.Errorf("%s is %v in the configuration", f.ID(), s)
		}
		if f.Divergence() == nil {
			return fmt.Errorf("%s was not told", f.ID())
		}
		return nil
	})
	if msg := f.Divergence().Error(); !strings.Contains(msg, "diverged") || !strings.Contains(msg, "--join") {
		t.Errorf("the divergence %q does not say what and how to repair", msg)
	}
	if h := f.Health(); h.Healthy || !strings.Contains(h.Reason, "diverged") {
		t.Errorf("the diverged follower's health %+v, want 503 saying it diverged", h)
	}
	for _, n := range c.nodes {
		if n != f && n.Divergence() != nil {
			t.Errorf("%s of the majority reports a divergence: %v", n.ID(), n.Divergence())
		}
	}
	if !ld.IsLeader() {
		t.Error("the leader of the majority lost its leadership")
	}
}

// A leader whose state left the majority's finds itself in the minority:
// it hands leadership to the majority, whose new leader demotes it.
func TestDivergedLeaderHandsOverAndIsDemoted(t *testing.T) {
	c, ld, _, sid := agreementCluster(t)
	rogueApply(t, ld, sid)
	if _, err := ld.Acquire(ctxT(t), api.AcquireRequest{Name: "a", Session: sid, Holder: "h"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the diverged leader hands over and is demoted", func() error {
		if ld.Divergence() == nil {
			return fmt.Errorf("%s does not know it diverged", ld.ID())
		}
		for _, n := range c.nodes {
			if n != ld && n.IsLeader() {
				if s, ok := suffrage(n, ld.ID()); !ok || s != raft.Nonvoter {
					return fmt.Errorf("%s is %v under the new leader %s", ld.ID(), s, n.ID())
				}
				return nil
			}
		}
		return fmt.Errorf("no new leader yet")
	})
	if ld.IsLeader() {
		t.Error("the diverged node still serves as leader")
	}
}
