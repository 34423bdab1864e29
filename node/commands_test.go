package node

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/fsm"
)

// entryVersion returns the command version byte of the entry at index on
// node n's log.
func entryVersion(t *testing.T, n *Node, index uint64) byte {
	t.Helper()
	var l raft.Log
	if err := n.logs.GetLog(index, &l); err != nil {
		t.Fatalf("%s: entry %d: %v", n.cfg.ID, index, err)
	}
	if l.Type != raft.LogCommand || len(l.Data) == 0 {
		t.Fatalf("%s: entry %d is a %v", n.cfg.ID, index, l.Type)
	}
	return l.Data[0]
}

// awaitRecords waits until every node's member record says it reads
// version reads[i].
func (c *testCluster) awaitRecords(t *testing.T, reads ...byte) {
	t.Helper()
	eventually(t, 20*time.Second, "member records", func() error {
		ld, _ := c.leader()
		got := map[string]byte{}
		for _, m := range ld.fsm.Members() {
			got[m.ID] = m.Commands
		}
		for i, want := range reads {
			if v, ok := got[c.id(i)]; !ok || v != want {
				return fmt.Errorf("%s's record: reads %d (recorded %v), want %d", c.id(i), v, ok, want)
			}
		}
		return nil
	})
}

// grantIndex acquires lock in a new session on the leader and returns the
// log index of the grant (its token) and the leader.
func (c *testCluster) grantIndex(t *testing.T, lock string) (uint64, *Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ld, _ := c.leader()
	s, err := ld.OpenSession(ctx, api.OpenRequest{Name: "v", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	g, err := ld.Acquire(ctx, api.AcquireRequest{Name: lock, Session: s.ID, Holder: "h"})
	if err != nil {
		t.Fatal(err)
	}
	return uint64(g.Token), ld
}

// A leader writes the binary command format only once every member of
// the configuration has recorded that it reads it; while one member runs
// a build from before it (its record says nothing), the leader writes
// checksummed JSON, which every build reads, and switches once that
// member is upgraded: a rolling upgrade never sends a replica an entry
// it cannot decode.
func TestBinaryCommandsOnlyOnceEveryMemberReadsThem(t *testing.T) {
	var upgraded atomic.Bool // n3 runs an "old build" until then
	c := newTestCluster(t, 3, func(cfg *Config) {
		slowRaft(cfg)
		cfg.preBinary = cfg.ID == "n3" && !upgraded.Load()
	})
	c.awaitRecords(t, fsm.Version, fsm.Version, 0)
	idx, ld := c.grantIndex(t, "before")
	if v := entryVersion(t, ld, idx); v != fsm.VersionJSON {
		t.Fatalf("with n3 on an old build, the grant's entry is version %d, want %d (JSON)", v, fsm.VersionJSON)
	}

	upgraded.Store(true)
	c.stop(2)
	c.start(2)
	c.awaitRecords(t, fsm.Version, fsm.Version, fsm.Version)
	idx, ld = c.grantIndex(t, "after")
	if v := entryVersion(t, ld, idx); v != fsm.Version {
		t.Fatalf("with every member upgraded, the grant's entry is version %d, want %d (binary, this build's)", v, fsm.Version)
	}
	// Every replica applied both formats to the same state.
	eventually(t, 20*time.Second, "replicas agree", func() error {
		want := ld.fsm.Dump()
		for _, n := range c.snapshotNodes() {
			if got := n.fsm.Dump(); !bytes.Equal(got, want) {
				return fmt.Errorf("%s's state differs from the leader's", n.cfg.ID)
			}
		}
		return nil
	})
}

// An operator's members add, which cannot know the member's build, keeps
// the command version the member recorded for itself.
func TestMembersAddKeepsTheRecordedCommandVersion(t *testing.T) {
	c := newTestCluster(t, 3, slowRaft)
	c.awaitRecords(t, fsm.Version, fsm.Version, fsm.Version)
	ld, l := c.leader()
	f := c.snapshotNodes()[(l+1)%3]
	m := api.Member{ID: f.cfg.ID, RaftAddr: f.RaftAddr(), HTTPAddr: f.cfg.HTTPAddr, Voter: true}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := ld.setMemberRecord(ctx, m); err != nil {
		t.Fatal(err)
	}
	c.awaitRecords(t, fsm.Version, fsm.Version, fsm.Version)
	if v := ld.commandVersion(); v != fsm.Version {
		t.Fatalf("command version after members add: %d", v)
	}
}
