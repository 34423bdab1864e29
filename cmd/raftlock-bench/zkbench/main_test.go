package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/raftlock/raftlock/cmd/raftlock-bench/internal/bench"
)

func TestParse(t *testing.T) {
	c, err := command.Parse([]string{"--addr", "127.0.0.51:2181,127.0.0.52:2181", "--scenario", "b", "--clients", "16", "--route", "all"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Addrs) != 2 || c.Scenario != bench.Contended || c.Clients != 16 || c.Leader {
		t.Fatalf("parsed %+v", c)
	}
	c, err = command.Parse(nil, &bytes.Buffer{})
	if err != nil || !c.Leader || c.Addrs[0] != "127.0.0.1:2181" {
		t.Fatalf("defaults %+v %v", c, err)
	}
	for _, bad := range [][]string{{"--route", "x"}, {"--scenario", "e"}, {"--scenario", "d"}} {
		if _, err := command.Parse(bad, &bytes.Buffer{}); err == nil {
			t.Errorf("parse %q: no error", bad)
		}
	}
}

// TestSrvrGivesModeAndEpoch: the srvr answer of ZooKeeper 3.8 yields the
// server's mode and the epoch (high 32 bits) of its zxid; a server that is
// not serving is an error, not a follower.
func TestSrvrGivesModeAndEpoch(t *testing.T) {
	out := "Zookeeper version: 3.8.0-debian--1, built on 2024-06-16 00:00 UTC\n" +
		"Latency min/avg/max: 0/1.2/30\nReceived: 10\nSent: 9\nConnections: 1\nOutstanding: 0\n" +
		"Zxid: 0x300000007\nMode: leader\nNode count: 5\nProposal sizes last/min/max: 48/48/90\n"
	st, err := parseSrvr(out)
	if err != nil || st.Mode != "leader" || st.Epoch() != 3 {
		t.Fatalf("parseSrvr = %+v (epoch %d), %v", st, st.Epoch(), err)
	}
	if _, err := parseSrvr("This ZooKeeper instance is not currently serving requests\n"); err == nil {
		t.Fatal("not serving: no error")
	}
	id, err := parseServerID("clientPort=2181\nserverId=2\ninitLimit=10\n")
	if err != nil || id != 2 {
		t.Fatalf("parseServerID = %d, %v", id, err)
	}
	if _, err := parseServerID("clientPort=2181\n"); err == nil {
		t.Fatal("conf without serverId: no error")
	}
}

// pings records what a pingConn reports.
type pings struct{ sent, acked int }

func (p *pings) pingSent(time.Time)           { p.sent++ }
func (p *pings) pingAcked(sent, at time.Time) { p.acked++ }

// frame is one ZooKeeper packet: length, xid, body.
func frame(xid int32, body int) []byte {
	b := make([]byte, 8+body)
	binary.BigEndian.PutUint32(b[:4], uint32(4+body))
	binary.BigEndian.PutUint32(b[4:8], uint32(xid))
	return b
}

// TestPingConnCountsPingResponsesWhereverReadsSplitPackets: the read side
// follows the packet framing, so a ping response is counted once whether
// it arrives whole, split in the middle of its length or xid, or together
// with other packets; other responses and a short connect response do not
// count, and only 12-byte writes with xid -2 are pings.
func TestPingConnCountsPingResponsesWhereverReadsSplitPackets(t *testing.T) {
	var stream []byte
	connectResp := make([]byte, 4+36) // body starts with protocol version 0
	binary.BigEndian.PutUint32(connectResp[:4], 36)
	stream = append(stream, connectResp...)
	stream = append(stream, frame(5, 100)...)     // a reply to request 5
	stream = append(stream, frame(pingXid, 8)...) // ping response: zxid, err
	stream = append(stream, frame(-1, 30)...)     // a watch event
	stream = append(stream, frame(pingXid, 8)...)
	short := []byte{0, 0, 0, 2, 0xff, 0xfe} // a 2-byte body: no xid
	stream = append(stream, short...)
	stream = append(stream, frame(pingXid, 8)...)
	for _, chunk := range []int{1, 3, 5, 7, 13, len(stream)} {
		p := &pings{}
		client, server := net.Pipe()
		go func() { _, _ = io.Copy(io.Discard, server) }()
		c := &pingConn{Conn: client, obs: p}
		ping := frame(pingXid, 4) // xid -2, opcode 11 (ping)
		binary.BigEndian.PutUint32(ping[8:], 11)
		for range 3 {
			if _, err := c.Write(ping); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Write(frame(5, 4)); err != nil { // a 12-byte request, not a ping
			t.Fatal(err)
		}
		client.Close()
		if p.sent != 3 {
			t.Errorf("%d pings sent, want 3", p.sent)
		}
		for i := 0; i < len(stream); i += chunk {
			c.scan(stream[i:min(i+chunk, len(stream))])
		}
		if p.acked != 3 {
			t.Errorf("reads of %d bytes: %d ping responses, want 3", chunk, p.acked)
		}
	}
}

// TestPredecessorIsTheNextLowerSequence: a waiter watches only the child
// just below its own; the lowest child holds the lock; a child not found
// means the session lost its node.
func TestPredecessorIsTheNextLowerSequence(t *testing.T) {
	children := []string{
		"_c_aa-lock-0000000007", "_c_bb-lock-0000000003", "_c_cc-lock-0000000005", "_c_dd-lock-0000000010",
	}
	for _, c := range []struct {
		own   string
		pred  string
		found bool
	}{
		{"_c_aa-lock-0000000007", "_c_cc-lock-0000000005", true},
		{"_c_bb-lock-0000000003", "", true},
		{"_c_dd-lock-0000000010", "_c_aa-lock-0000000007", true},
		{"_c_ee-lock-0000000004", "_c_bb-lock-0000000003", false},
	} {
		seq, err := parseSeq(c.own)
		if err != nil {
			t.Fatal(err)
		}
		pred, found, err := predecessor(children, c.own, seq)
		if err != nil || pred != c.pred || found != c.found {
			t.Errorf("predecessor of %s = %q, %v, %v; want %q, %v", c.own, pred, found, err, c.pred, c.found)
		}
	}
	if _, err := parseSeq("_c_aa-nolock"); err == nil {
		t.Error("parseSeq of a foreign name: no error")
	}
}

// TestSessionsMustFitTheOpenFileLimit: a session is a connection, so a
// sessions run larger than the open-file limit (less a reserve) is refused
// with the limit named, instead of retrying failed opens for ever.
func TestSessionsMustFitTheOpenFileLimit(t *testing.T) {
	if err := fitsFiles(19900, 20000); err != nil {
		t.Errorf("19900 sessions under a limit of 20000: %v", err)
	}
	err := fitsFiles(20000, 20000)
	if err == nil || !strings.Contains(err.Error(), "only 20000 files") {
		t.Errorf("20000 sessions under a limit of 20000: %v", err)
	}
}

// TestRetryRetriesUntilSuccessOrItsTimeIsUp: a failed acquire in Hold is
// retried (a connection loss passes), and given up with the last error
// once the retry time since the first failure has passed.
func TestRetryRetriesUntilSuccessOrItsTimeIsUp(t *testing.T) {
	ctx := context.Background()
	calls := 0
	err := retry(ctx, time.Minute, func() error {
		calls++
		if calls < 3 {
			return zk.ErrConnectionClosed
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("retry = %v after %d calls, want nil after 3", err, calls)
	}
	calls = 0
	err = retry(ctx, 250*time.Millisecond, func() error {
		calls++
		return fmt.Errorf("call %d: %w", calls, zk.ErrConnectionClosed)
	})
	if !errors.Is(err, zk.ErrConnectionClosed) || !strings.Contains(err.Error(), fmt.Sprintf("call %d:", calls)) || calls < 2 {
		t.Fatalf("retry = %v after %d calls, want the last call's error", err, calls)
	}
}
