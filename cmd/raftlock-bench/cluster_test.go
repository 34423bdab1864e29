package main

import (
	"context"
	"testing"
	"time"

	"github.com/raftlock/raftlock/cmd/internal/proccluster"
)

// startCluster starts three raftlockd processes (package proccluster) and
// waits until they have a leader.
func startCluster(t *testing.T) *proccluster.Cluster {
	t.Helper()
	c := proccluster.Start(t, proccluster.BuildDaemon(t), 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}
