package main

import (
	"context"
	"strconv"

	"github.com/raftlock/raftlock/cmd/internal/iptables"
)

// chainPrefix names the iptables chains of the checker (the pid of the
// owning checker follows), so that concurrent runs keep their own rules
// and a run removes the chains of dead ones.
const chainPrefix = "RLCHK-"

// firewall cuts Raft traffic between nodes, or a client process off from
// the cluster, with iptables rules in a chain of the run's own (package
// iptables). A rule between nodes matches a pair of node addresses and the
// Raft port of one of them, so runs on other ports are not affected; a
// client's rules match the client's own source address and the nodes'
// HTTP ports.
type firewall struct {
	chain *iptables.Chain
}

// newFirewall sets up the run's chain.
func newFirewall(ctx context.Context) (*firewall, error) {
	c, err := iptables.Open(ctx, chainPrefix)
	if err != nil {
		return nil, err
	}
	return &firewall{chain: c}, nil
}

// partition cuts the Raft traffic between every node of a and every node
// of b, both ways.
func (f *firewall) partition(ctx context.Context, a, b []*nodeProc) error {
	for _, x := range a {
		for _, y := range b {
			for _, r := range [][2]*nodeProc{{x, y}, {y, x}} {
				src, dst := r[0], r[1]
				// src -> dst's Raft server, and src's Raft server -> dst.
				if err := f.chain.Drop(ctx, "-s", src.ip, "-d", dst.ip, "--dport", strconv.Itoa(dst.raftPort)); err != nil {
					return err
				}
				if err := f.chain.Drop(ctx, "-s", src.ip, "-d", dst.ip, "--sport", strconv.Itoa(src.raftPort)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// cutClient drops every packet between the client address ip and the
// HTTP servers of nodes, both ways: its requests and the answers to them
// vanish, as on a broken network, with no reset to tell it. The rules
// name the nodes' ports, so a concurrent run whose client has the same
// address is not affected.
func (f *firewall) cutClient(ctx context.Context, ip string, nodes []*nodeProc) error {
	for _, n := range nodes {
		// The HTTP port and the stream port (--client-proto stream).
		for _, p := range []int{n.httpPort, n.streamPort} {
			port := strconv.Itoa(p)
			if err := f.chain.Drop(ctx, "-s", ip, "-d", n.ip, "--dport", port); err != nil {
				return err
			}
			if err := f.chain.Drop(ctx, "-s", n.ip, "-d", ip, "--sport", port); err != nil {
				return err
			}
		}
	}
	return nil
}

// heal removes every rule of the run.
func (f *firewall) heal(ctx context.Context) error { return f.chain.Flush(ctx) }

// close removes the run's chain and the jump to it.
func (f *firewall) close() { f.chain.Close() }
