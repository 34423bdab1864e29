package proccluster

import (
	"testing"
)

// StartEach is Start (plaintext) with flags of each node's own: node i
// (from 0) runs with extra, then each(i).
func StartEach(t testing.TB, bin string, size int, each func(i int) []string, extra ...string) *Cluster {
	t.Helper()
	return start(t, bin, size, "", extra, each)
}

// Bin returns the raftlockd binary the cluster runs.
func (c *Cluster) Bin() string { return c.bin }
