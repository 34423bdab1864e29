package proccluster

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Join starts a new node of a plaintext cluster, n<k> for the next k,
// with an empty data dir next to the others' and --join at the HTTP
// addresses join (the current members'), with the flags node 0 was given
// beyond the cluster's own (Start's extra); it returns the node's index in
// Nodes. Like the others it is killed when the test ends. The caller
// waits for it to become a voter (it asks to be one until it is).
func (c *Cluster) Join(join []string) int {
	c.t.Helper()
	if c.tls != nil {
		c.t.Fatal("proccluster.Join: plaintext clusters only")
	}
	base := c.Args(0)
	// Start's own flags come first: --id, --data-dir, --raft-addr,
	// --http-addr, --peers, --log-level, each with its value.
	const own = 12
	if len(base) < own || base[0] != "--id" || base[10] != "--log-level" {
		c.t.Fatalf("proccluster.Join: unexpected command line of node 0: %v", base)
	}
	c.mu.Lock()
	id := fmt.Sprintf("n%d", len(c.Nodes)+1)
	c.mu.Unlock()
	n := &Node{ID: id, HTTPAddr: FreeAddr(c.t)}
	n.args = []string{"--id", id, "--data-dir", filepath.Join(filepath.Dir(c.Flag(0, "--data-dir")), id),
		"--raft-addr", FreeAddr(c.t), "--http-addr", n.HTTPAddr, "--join", strings.Join(join, ","), base[10], base[11]}
	n.args = append(n.args, base[own:]...)
	c.mu.Lock()
	c.Nodes = append(c.Nodes, n)
	i := len(c.Nodes) - 1
	c.mu.Unlock()
	c.Restart(i)
	return i
}
