package node

import (
	"sync"

	"github.com/hashicorp/raft"
)

// drainingTransport is the node's Raft network transport with every
// AppendEntries pipeline drained (drainedPipeline). hashicorp/raft's
// pipeline replication deadlocks when a follower answers an append with
// Success=false (its log store failed to write: a full or failing disk):
// the leader's response decoder stops reading the pipeline's responses,
// the transport's reader then blocks handing over the next one, the
// in-flight queue fills, and the leader's send loop blocks on its next
// append before it notices the decoder ended. Heartbeats go on, so the
// follower never times out, and it is never sent another entry
// (hashicorp/raft#612): it stays behind, and its storage error stays up,
// for good. Here the responses are always read, so the send loop goes on,
// sees the decoder's end and falls back to plain appends, which retry.
//
// It also gates the heartbeat fast path: hashicorp/raft runs a
// heartbeat's handler on the transport's connection goroutine, which
// Raft's Shutdown does not wait for, so a heartbeat in flight could reach
// the stable store after the node closed it and panic ("failed to save
// current term: database not open", hashicorp/raft#717). Close waits for
// the handlers under way and drops every later heartbeat (the transport's
// shutdown ends its wait for an answer).
//
// Its Consumer hands Raft the RPCs through an rpcTap, which records the
// commit index the leader announces (health's lag bound, lag.go).
type drainingTransport struct {
	*raft.NetworkTransport
	gate *heartbeatGate
	rpcs *rpcTap
}

// heartbeatGate lets heartbeat handlers run until it is closed.
type heartbeatGate struct {
	mu     sync.RWMutex
	closed bool
}

// newDrainingTransport wraps t; lag records the commit index of every
// append t receives.
func newDrainingTransport(t *raft.NetworkTransport, lag *commitLag) drainingTransport {
	return drainingTransport{NetworkTransport: t, gate: &heartbeatGate{}, rpcs: newRPCTap(t.Consumer(), lag)}
}

// Consumer implements raft.Transport, through the tap.
func (t drainingTransport) Consumer() <-chan raft.RPC { return t.rpcs.consumer() }

// SetHeartbeatHandler implements raft.WithHeartbeat (hashicorp/raft's
// fast path), through the gate.
func (t drainingTransport) SetHeartbeatHandler(cb func(rpc raft.RPC)) {
	if cb == nil {
		t.NetworkTransport.SetHeartbeatHandler(nil)
		return
	}
	t.NetworkTransport.SetHeartbeatHandler(t.gate.wrap(cb))
}

// Close implements raft.WithClose: no heartbeat handler runs after it.
func (t drainingTransport) Close() error {
	t.gate.close()
	t.rpcs.close()
	return t.NetworkTransport.Close()
}

// wrap returns cb, run only while the gate is open.
func (g *heartbeatGate) wrap(cb func(rpc raft.RPC)) func(rpc raft.RPC) {
	return func(rpc raft.RPC) {
		g.mu.RLock()
		defer g.mu.RUnlock()
		if !g.closed {
			cb(rpc)
		}
	}
}

// close closes the gate once every handler under way has returned.
func (g *heartbeatGate) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// AppendEntriesPipeline implements raft.Transport.
func (t drainingTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := t.NetworkTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	return newDrainedPipeline(p), nil
}

// drainedPipeline forwards a pipeline's responses through a queue that
// never blocks the pipeline's reader; Consumer hands them out in order.
// The queue holds at most the responses of the requests in flight.
type drainedPipeline struct {
	raft.AppendPipeline
	out  chan raft.AppendFuture
	stop chan struct{}
	once sync.Once
	done chan struct{}
}

func newDrainedPipeline(p raft.AppendPipeline) *drainedPipeline {
	d := &drainedPipeline{AppendPipeline: p, out: make(chan raft.AppendFuture),
		stop: make(chan struct{}), done: make(chan struct{})}
	go d.forward()
	return d
}

// forward reads every response as soon as it is ready and queues it for
// the consumer.
func (d *drainedPipeline) forward() {
	defer close(d.done)
	in := d.AppendPipeline.Consumer()
	var queue []raft.AppendFuture
	for {
		var out chan raft.AppendFuture
		var next raft.AppendFuture
		if len(queue) > 0 {
			out, next = d.out, queue[0]
		}
		select {
		case f, ok := <-in:
			if !ok {
				return
			}
			queue = append(queue, f)
		case out <- next:
			queue[0] = nil
			queue = queue[1:]
		case <-d.stop:
			return
		}
	}
}

// Consumer implements raft.AppendPipeline.
func (d *drainedPipeline) Consumer() <-chan raft.AppendFuture { return d.out }

// Close implements raft.AppendPipeline.
func (d *drainedPipeline) Close() error {
	err := d.AppendPipeline.Close()
	d.once.Do(func() { close(d.stop) })
	<-d.done
	return err
}
