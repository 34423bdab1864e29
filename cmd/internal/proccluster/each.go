package proccluster

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/raftlock/raftlock/session/api/apitest"
)

// StartEach is Start (plaintext) with flags of each node's own: node i
// (from 0) runs with extra, then each(i).
func StartEach(t testing.TB, bin string, size int, each func(i int) []string, extra ...string) *Cluster {
	t.Helper()
	c := &Cluster{t: t, bin: bin}
	var raft, peers []string
	for i := 1; i <= size; i++ {
		raft = append(raft, FreeAddr(t))
		peers = append(peers, fmt.Sprintf("n%d=%s", i, raft[i-1]))
	}
	dir := t.TempDir()
	for i := 1; i <= size; i++ {
		n := &Node{ID: fmt.Sprintf("n%d", i), HTTPAddr: FreeAddr(t), log: &apitest.LogBuffer{}}
		n.args = []string{"--id", n.ID, "--data-dir", filepath.Join(dir, n.ID), "--raft-addr", raft[i-1],
			"--http-addr", n.HTTPAddr, "--peers", strings.Join(peers, ","), "--log-level", "warn"}
		n.args = append(append(n.args, extra...), each(i-1)...)
		c.Nodes = append(c.Nodes, n)
	}
	t.Cleanup(func() {
		for i := range c.Nodes {
			c.Kill(i)
		}
		if t.Failed() {
			for _, n := range c.Nodes {
				t.Logf("%s log:\n%s", n.ID, n.log.String())
			}
		}
	})
	for i := range c.Nodes {
		c.Restart(i)
	}
	return c
}

// Bin returns the raftlockd binary the cluster runs.
func (c *Cluster) Bin() string { return c.bin }
