package node

import (
	"testing"

	"github.com/hashicorp/raft"

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
