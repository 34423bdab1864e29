package main

import (
	"context"

	"github.com/go-zookeeper/zk"
)

// worker is one benchmark client: its own connection, hence its own
// ZooKeeper session (kept alive by the library's pings), and the lock
// recipe on its lock node. The load driver calls Pair from one goroutine
// at a time.
type worker struct {
	c *zk.Conn
	l *lock
}

// Pair implements bench.Worker: acquire and release, returning the epoch
// of the grant.
func (w *worker) Pair(ctx context.Context) (uint64, error) {
	epoch, err := w.l.acquire(ctx)
	if err != nil {
		return 0, err
	}
	if err := w.l.release(); err != nil {
		return epoch, err
	}
	return epoch, nil
}

// Close implements bench.Worker: closes the session, which deletes its
// ephemeral nodes, any left by a failed pair included.
func (w *worker) Close(context.Context) error {
	w.c.Close()
	return nil
}
