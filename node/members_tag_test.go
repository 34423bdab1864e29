package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/fsm"
)

// The membership digest every answer carries (X-Raftlock-Members) is the
// same for the same view and changes with any server, address, suffrage
// or member HTTP address, so that a client sees every change.
func TestMembersTagChangesWithTheMembership(t *testing.T) {
	servers := []raft.Server{{ID: "n1", Address: "10.0.0.1:7101", Suffrage: raft.Voter}, {ID: "n2", Address: "10.0.0.2:7101", Suffrage: raft.Voter}}
	members := []fsm.Member{{ID: "n1", HTTPAddr: "10.0.0.1:7001"}, {ID: "n2", HTTPAddr: "10.0.0.2:7001"}}
	base := membersTag(servers, members)
	if base == "" || base != membersTag(append([]raft.Server(nil), servers...), members) {
		t.Fatalf("tag %q not stable", base)
	}
	if membersTag(nil, members) != "" {
		t.Fatal("no configuration must give no tag")
	}
	changed := map[string]string{}
	add := func(what string, s []raft.Server, m []fsm.Member) { changed[what] = membersTag(s, m) }
	add("server added", append(append([]raft.Server(nil), servers...), raft.Server{ID: "n3", Address: "10.0.0.3:7101"}), members)
	add("server removed", servers[:1], members)
	s2 := append([]raft.Server(nil), servers...)
	s2[1].Address = "10.0.0.9:7101"
	add("raft address", s2, members)
	s3 := append([]raft.Server(nil), servers...)
	s3[1].Suffrage = raft.Nonvoter
	add("suffrage", s3, members)
	m2 := append([]fsm.Member(nil), members...)
	m2[1].HTTPAddr = "10.0.0.9:7001"
	add("http address", servers, m2)
	add("http address registered", servers, members[:1])
	for what, tag := range changed {
		if tag == base {
			t.Errorf("%s: the tag did not change", what)
		}
	}
}

// Leader's digest is cached (membersView): it must still change on every
// node as soon as a member's HTTP address changes or the Raft
// configuration does, and always equal a digest computed afresh.
func TestMembersTagCachedChangesAfterAMembersAddressChange(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	ld, l := c.leader()
	fresh := func(n *Node) string {
		return membersTag(n.raft.GetConfiguration().Configuration().Servers, n.fsm.Members())
	}
	// Every node's cached digest agrees with a fresh one, and all agree.
	agree := func(what string) string {
		var tag string
		eventually(t, 10*time.Second, what, func() error {
			tag = ld.Leader().Members
			for i, n := range c.snapshotNodes() {
				got, want := n.Leader().Members, fresh(n)
				if got != want || got != tag {
					return fmt.Errorf("node %d: cached %q, fresh %q, leader %q", i, got, want, tag)
				}
			}
			return nil
		})
		return tag
	}
	base := agree("the digests agree at start")
	if base == "" {
		t.Fatal("no digest")
	}

	f := c.snapshotNodes()[(l+1)%3]
	m := api.Member{ID: f.cfg.ID, RaftAddr: f.RaftAddr(), HTTPAddr: "127.0.0.1:1", Voter: true}
	if err := ld.RegisterMember(ctxT(t), m); err != nil {
		t.Fatal(err)
	}
	// The leader applied the record before RegisterMember returned: its
	// very next answer carries the new digest.
	if got := ld.Leader().Members; got == base || got != fresh(ld) {
		t.Fatalf("after the address change the leader's digest is %q (was %q, fresh %q)", got, base, fresh(ld))
	}
	moved := agree("the digests agree after the address change")
	if moved == base {
		t.Fatal("the digest did not change with the member's address")
	}

	// A Raft configuration change (a non-voter added, then removed) moves
	// it too, and back.
	if err := ld.raft.AddNonvoter("n9", "127.0.0.1:2", 0, 10*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	if got := ld.Leader().Members; got == moved || got != fresh(ld) {
		t.Fatalf("after a configuration change the leader's digest is %q (was %q, fresh %q)", got, moved, fresh(ld))
	}
	agree("the digests agree after the configuration change")
	if err := ld.raft.RemoveServer("n9", 0, 10*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	if got := agree("the digests agree after the server's removal"); got != moved {
		t.Fatalf("the digest after the removal %q, want the one before the addition %q", got, moved)
	}
}

// BenchmarkLeaderInfo is what every API answer pays for its leader
// headers (Node.Leader: leadership, term, the membership digest), by
// the number of members in the Raft configuration and the member table.
func BenchmarkLeaderInfo(b *testing.B) {
	for _, size := range []int{3, 5, 9} {
		b.Run(fmt.Sprintf("members=%d", size), func(b *testing.B) {
			c := newTestCluster(b, 1, nil)
			ld, _ := c.leader()
			ctx := context.Background()
			for i := 2; i <= size; i++ {
				id := fmt.Sprintf("n%d", i)
				addr := fmt.Sprintf("127.0.0.1:%d", i)
				if err := ld.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(addr), 0, 10*time.Second).Error(); err != nil {
					b.Fatal(err)
				}
				if err := ld.RegisterMember(ctx, api.Member{ID: id, RaftAddr: addr, HTTPAddr: fmt.Sprintf("127.0.0.2:%d", i)}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			var li api.LeaderInfo
			for i := 0; i < b.N; i++ {
				li = ld.Leader()
			}
			b.StopTimer()
			if li.Members == "" || !li.Self {
				b.Fatalf("leader info %+v", li)
			}
		})
	}
}
