package main

import (
	"fmt"
	"net"
	"strconv"
)

// nodeIP returns the loopback address of node i (0-based): 127.0.0.11 on.
func nodeIP(i int) string { return fmt.Sprintf("127.0.0.%d", 11+i) }

// clientIP returns the loopback address the connections of client i
// (0-based) come from: 127.0.0.101 on, apart from the nodes' addresses.
func clientIP(i int) string { return fmt.Sprintf("127.0.0.%d", 101+i) }

// freePort returns a TCP port of ip that was free a moment ago. Ports are
// chosen by the kernel, so concurrent runs do not collide.
func freePort(ip string) (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, fmt.Errorf("pick a port on %s: %w", ip, err)
	}
	defer ln.Close()
	_, p, err := net.SplitHostPort(ln.Addr().String())
	if err != nil {
		return 0, fmt.Errorf("pick a port on %s: %w", ip, err)
	}
	return strconv.Atoi(p)
}
