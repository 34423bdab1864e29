package proccluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"

	"github.com/raftlock/raftlock/cmd/internal/iptables"
)

// firewallChainPrefix names the iptables chains of these tests (the pid
// of the owning test process follows), apart from cmd/raftlock-check's
// RLCHK- chains.
const firewallChainPrefix = "RLPC-"

// Firewall drops TCP traffic on this host with iptables rules in a chain
// of its own (package iptables): every packet on loopback passes OUTPUT
// once, so one rule matching a port catches both directions of a
// connection when it names the port as --dport and as --sport. A dropped
// packet is gone without a reset, the way a black hole in the network
// looks to both ends: calls hang until their own deadlines. The chain is
// removed when the test ends.
type Firewall struct {
	t     testing.TB
	chain *iptables.Chain
}

// NewFirewall sets up the test's chain. It reports why iptables is not
// usable here (not root, not installed).
func NewFirewall(t testing.TB) (*Firewall, error) {
	t.Helper()
	c, err := iptables.Open(context.Background(), firewallChainPrefix)
	if err != nil {
		return nil, err
	}
	t.Cleanup(c.Close)
	return &Firewall{t: t, chain: c}, nil
}

// RequireFirewall returns a Firewall, or ends the test when iptables is
// unusable here: under CI (CI set in the environment), where the firewall
// must be there, it fails the test; elsewhere it skips it, saying why.
func RequireFirewall(t testing.TB) *Firewall {
	t.Helper()
	f, err := NewFirewall(t)
	if err == nil {
		return f
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("CI must run this test, but %v", err)
	}
	t.Skipf("SKIPPED: needs a usable firewall: %v", err)
	return nil
}

// DropPort drops every TCP packet to or from port on this host, both ways
// (DROP, no RST), until Heal: connections to a server on that port, open
// or new, carry nothing in either direction. The server keeps running,
// and its connections from its own ephemeral ports (e.g. Raft) still
// flow.
func (f *Firewall) DropPort(port int) {
	f.t.Helper()
	p := strconv.Itoa(port)
	for _, dir := range []string{"--dport", "--sport"} {
		if err := f.chain.Drop(context.Background(), dir, p); err != nil {
			f.t.Fatalf("drop port %d: %v", port, err)
		}
	}
}

// DropPortFor drops every TCP packet between the address peer and port on
// this host, both ways (DROP, no RST), until Heal: a client connecting from
// peer (e.g. 127.0.0.2) is cut off from the server on port, while every
// other address still reaches it.
func (f *Firewall) DropPortFor(port int, peer string) {
	f.t.Helper()
	p := strconv.Itoa(port)
	for _, rule := range [][]string{{"-s", peer, "--dport", p}, {"-d", peer, "--sport", p}} {
		if err := f.chain.Drop(context.Background(), rule...); err != nil {
			f.t.Fatalf("drop port %d for %s: %v", port, peer, err)
		}
	}
}

// Heal removes every rule of the test's chain.
func (f *Firewall) Heal() {
	f.t.Helper()
	if err := f.chain.Flush(context.Background()); err != nil {
		f.t.Fatalf("heal: %v", err)
	}
}

// HTTPPort returns the port of the node's HTTP API.
func (n *Node) HTTPPort() int {
	_, p, err := net.SplitHostPort(n.HTTPAddr)
	if err != nil {
		panic(fmt.Sprintf("node %s: HTTP address %q: %v", n.ID, n.HTTPAddr, err))
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		panic(fmt.Sprintf("node %s: HTTP address %q: %v", n.ID, n.HTTPAddr, err))
	}
	return port
}
