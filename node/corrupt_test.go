package node

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/fsm"
)

// An entry whose bytes do not match their checksum (here: proposed
// corrupt, as a disk or memory fault between encoding and apply would
// leave it) is applied by no replica: a node that reaches it halts before
// it, stops serving, and closes Fatal with an error naming the entry, the
// file and the repair; every replica holds the state before the entry.
func TestCorruptEntryStopsEveryReplicaBeforeItIsApplied(t *testing.T) {
	c := newTestCluster(t, 3, slowRaft)
	ld, _ := c.leader()
	ctx := ctxT(t)
	info, err := ld.OpenSession(ctx, api.OpenRequest{Name: "s", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	g, err := ld.Acquire(ctx, api.AcquireRequest{Name: "dmg/x3", Session: info.ID, Holder: "h3"})
	if err != nil {
		t.Fatal(err)
	}
	cmd := fsm.Command{Type: fsm.CmdRelease, Now: time.Now().UnixNano(),
		Release: &fsm.LockRef{Lock: "dmg/x3", Session: info.ID, Holder: "h3"}}
	data, err := cmd.Encode()
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x01
	f := ld.raft.Apply(data, 5*time.Second)
	if err := f.Error(); err != nil {
		t.Fatalf("propose: %v", err)
	}
	if r, _ := f.Response().(fsm.Result); r.Status != fsm.StatusCorrupt {
		t.Fatalf("the leader's apply = %+v, want %s", r, fsm.StatusCorrupt)
	}
	// The leader halts at its own apply; a follower halts when it learns
	// the entry is committed and applies it (one that never learns it, as
	// the leader stopped first, never applies it either).
	select {
	case <-ld.Fatal():
	case <-time.After(30 * time.Second):
		t.Fatalf("the leader %s did not stop on the corrupt entry", ld.ID())
	}
	halted := 0
	for _, n := range c.nodes {
		select {
		case <-n.Fatal():
			halted++
			msg := n.FatalErr().Error()
			for _, want := range []string{"is corrupt", "checksum mismatch", n.LogPath(), "members remove " + n.ID(), "--join"} {
				if !strings.Contains(msg, want) {
					t.Errorf("%s: %q does not say %q", n.ID(), msg, want)
				}
			}
			if _, err := n.LockState(context.Background(), "dmg/x3"); err == nil {
				t.Errorf("%s still answers reads", n.ID())
			}
		default:
		}
		if a := n.fsm.AppliedIndex(); a >= f.Index() {
			t.Errorf("%s applied up to %d, past the corrupt entry %d", n.ID(), a, f.Index())
		}
		if l, ok := n.fsm.Lock("dmg/x3"); ok && (len(l.Holders) != 1 || l.Holders[0].Token != uint64(g.Token)) {
			t.Errorf("%s applied the corrupt release: %+v", n.ID(), l)
		}
	}
	t.Logf("%d of 3 replicas halted; the others never applied the entry", halted)
}

// An entry of a command version a newer build wrote (its checksum holds;
// a rolled-back node meets one) stops a replica as a corrupt one does,
// before it is applied, but says what it is: the version found, the
// versions this build reads, "run a newer build", and never advises to
// wipe the data dir (DataNewerError).
func TestNewerBuildsEntryStopsAReplicaWithoutAdvisingAWipe(t *testing.T) {
	c := newTestCluster(t, 3, slowRaft)
	ld, _ := c.leader()
	cmd := fsm.Command{Type: fsm.CmdRelease, Now: time.Now().UnixNano(),
		Release: &fsm.LockRef{Lock: "x", Session: "s", Holder: "h"}}
	data, err := cmd.Encode()
	if err != nil {
		t.Fatal(err)
	}
	data[0] = fsm.Version + 1
	end := len(data) - 4
	binary.BigEndian.PutUint32(data[end:], crc32.Checksum(data[:end], crc32.MakeTable(crc32.Castagnoli)))
	f := ld.raft.Apply(data, 5*time.Second)
	if err := f.Error(); err != nil {
		t.Fatalf("propose: %v", err)
	}
	select {
	case <-ld.Fatal():
	case <-time.After(30 * time.Second):
		t.Fatalf("the leader %s did not stop on the newer build's entry", ld.ID())
	}
	err = ld.FatalErr()
	var newer *DataNewerError
	if !errors.As(err, &newer) || newer.Version != fsm.Version+1 {
		t.Fatalf("FatalErr = %v, want a DataNewerError of version %d", err, fsm.Version+1)
	}
	msg := err.Error()
	for _, want := range []string{fmt.Sprintf("command version %d", fsm.Version+1), fmt.Sprintf("reads versions 1 to %d", fsm.Version), "run a newer build", ld.LogPath()} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q does not say %q", msg, want)
		}
	}
	for _, never := range []string{"wipe the data dir", "--join", "is corrupt"} {
		if strings.Contains(msg, never) {
			t.Errorf("%q says %q to a sound node", msg, never)
		}
	}
	if a := ld.fsm.AppliedIndex(); a >= f.Index() {
		t.Errorf("applied up to %d, past the entry %d", a, f.Index())
	}
}
