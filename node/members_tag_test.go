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
//
// The record changed belongs to n9, a non-voter no process runs: a live
// node would put its own address back (registerLoop, or registerSelf when
// it wins an election), which made this test flaky under load. Each change
// goes to whichever node leads (c.do), and every node's own record is
// there from the start, so an election mid-test does not fail it either.
func TestMembersTagCachedChangesAfterAMembersAddressChange(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	fresh := func(n *Node) string {
		return membersTag(n.raft.GetConfiguration().Configuration().Servers, n.fsm.Members())
	}
	// Every node's cached digest agrees with a fresh one, and all agree.
	agree := func(what string) string {
		var tag string
		eventually(t, 10*time.Second, what, func() error {
			nodes := c.snapshotNodes()
			tag = nodes[0].Leader().Members
			for i, n := range nodes {
				got, want := n.Leader().Members, fresh(n)
				if got != want || got != tag {
					return fmt.Errorf("node %d: cached %q, fresh %q, node 0 %q", i, got, want, tag)
				}
			}
			return nil
		})
		return tag
	}
	// change runs op on the leader; the node that ran it answers with a
	// new digest at once (it applied the change before op returned), and
	// then every node agrees on it.
	change := func(what, before string, op func(n *Node) error) string {
		t.Helper()
		var by *Node
		if err := c.do(func(n *Node) error { by = n; return op(n) }); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := by.Leader().Members; got == before || got != fresh(by) {
			t.Fatalf("%s: the digest of the node that ran it is %q (was %q, fresh %q)", what, got, before, fresh(by))
		}
		after := agree("the digests agree after " + what)
		if after == before {
			t.Fatalf("%s: the digest did not change", what)
		}
		return after
	}
	// Every node's own record first: a node records itself when it wins
	// an election, which would move the digest mid-test.
	for _, m := range c.snapshotNodes() {
		if err := c.do(func(n *Node) error { return n.RegisterMember(ctxT(t), m.self()) }); err != nil {
			t.Fatal(err)
		}
	}
	base := agree("the digests agree at start")
	if base == "" {
		t.Fatal("no digest")
	}

	added := change("adding non-voter n9", base, func(n *Node) error {
		return mapRaftError(n.raft.AddNonvoter("n9", "127.0.0.1:2", 0, 10*time.Second).Error())
	})
	register := func(httpAddr string) func(n *Node) error {
		return func(n *Node) error {
			return n.RegisterMember(ctxT(t), api.Member{ID: "n9", RaftAddr: "127.0.0.1:2", HTTPAddr: httpAddr})
		}
	}
	moved := change("registering n9's HTTP address", added, register("127.0.0.1:1"))
	change("moving n9's HTTP address", moved, register("127.0.0.1:3"))

	// Removing n9 takes its record out of the digest: back to the start.
	if err := c.do(func(n *Node) error { return mapRaftError(n.raft.RemoveServer("n9", 0, 10*time.Second).Error()) }); err != nil {
		t.Fatal(err)
	}
	if got := agree("the digests agree after n9's removal"); got != base {
		t.Fatalf("the digest after the removal %q, want the one before the addition %q", got, base)
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
