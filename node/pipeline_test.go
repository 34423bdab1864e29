package node

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/raft"
)

// TestNoHeartbeatReachesTheStoresAfterTheTransportCloses: a heartbeat
// handler under way when the transport closes finishes before Close
// returns (the node closes its stores next), and none runs afterwards
// (hashicorp/raft#717: a late heartbeat saved the term into a closed
// store and panicked).
func TestNoHeartbeatReachesTheStoresAfterTheTransportCloses(t *testing.T) {
	g := &heartbeatGate{}
	entered, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var order []string
	note := func(what string) { mu.Lock(); order = append(order, what); mu.Unlock() }
	var calls atomic.Int32
	h := g.wrap(func(raft.RPC) {
		calls.Add(1)
		close(entered)
		<-release
		note("handler returned")
	})
	go h(raft.RPC{})
	<-entered
	closed := make(chan struct{})
	go func() {
		g.close()
		note("gate closed")
		close(closed)
	}()
	runtime.Gosched() // let the close try first: it must wait all the same
	close(release)
	<-closed
	h(raft.RPC{})
	if n := calls.Load(); n != 1 {
		t.Fatalf("the handler ran %d times, want once (none after the close)", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 2 || order[0] != "handler returned" {
		t.Fatalf("order %v: the gate closed while a heartbeat handler still ran", order)
	}
}
