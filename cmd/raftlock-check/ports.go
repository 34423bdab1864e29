package main

import (
	"fmt"

	"github.com/raftlock/raftlock/internal/freeport"
)

// nodeIP returns the loopback address of node i (0-based): 127.0.0.11 on.
func nodeIP(i int) string { return fmt.Sprintf("127.0.0.%d", 11+i) }

// clientIP returns the loopback address the connections of client i
// (0-based) come from: 127.0.0.101 on, apart from the nodes' addresses.
func clientIP(i int) string { return fmt.Sprintf("127.0.0.%d", 101+i) }

// freePort returns a TCP port of ip that is free and stays reserved while
// the cluster lives (freeport: concurrent runs and tests, and outgoing
// connections, never get it), for a node the checker starts later. The
// cluster keeps the reservation (a dropped one would be closed by the
// garbage collector); it ends with the process.
func (c *cluster) freePort(ip string) (int, error) {
	r, err := freeport.Reserve(ip)
	if err != nil {
		return 0, fmt.Errorf("pick a port on %s: %w", ip, err)
	}
	c.ports = append(c.ports, r)
	return r.Port, nil
}
