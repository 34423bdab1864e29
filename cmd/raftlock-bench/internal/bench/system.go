package bench

import (
	"context"
	"time"
)

// System is a lock service under test, as the scenario drivers see it.
type System interface {
	// Name is the system's name in results ("raftlock", "etcd").
	Name() string
	// NewWorker opens client i with its own session, working on the lock
	// named lock.
	NewWorker(ctx context.Context, i int, lock string) (Worker, error)
	// Leader returns the current leader's member id (as in --pids) and its
	// Raft term.
	Leader(ctx context.Context) (id string, term uint64, err error)
	// WaitMember waits until member id answers and knows the leader.
	WaitMember(ctx context.Context, id string) error
	// NewSessionLoad returns the session keeper of scenario (c); the locks
	// it holds are named under lockPrefix.
	NewSessionLoad(o *Options, lockPrefix string) SessionLoad
}

// SessionLoad opens many sessions and keeps them alive until closed, the
// way the system's clients do it most cheaply.
type SessionLoad interface {
	// Open opens n sessions with the options' TTL and keeps each alive from
	// the moment it is open. It records each open's latency in lat and
	// returns the number of failed attempts (retried).
	Open(ctx context.Context, n int, lat *Latencies) (errs int64, err error)
	// Hold makes each of the first n sessions take one lock of its own.
	Hold(ctx context.Context, n int) error
	// Stats returns the keepalive figures so far.
	Stats() KeepAliveStats
	// Close stops the keepalives and closes every session. A session found
	// already expired is counted in Stats (spurious if the client still
	// believed it alive).
	Close(ctx context.Context) error
}

// KeepAliveStats are the figures of a SessionLoad.
type KeepAliveStats struct {
	// Acked counts acknowledged keepalives.
	Acked int64
	// Late counts keepalives sent more than LateAfter after they were due
	// (the client was too slow).
	Late int64
	// Spurious counts sessions the server expired although the client had
	// kept them alive: the last acknowledged keepalive, counted from when it
	// was sent, still covered the moment the server reported it gone.
	// "Reported" is when the answer arrived: the server's refusal was made
	// before then, so a refusal received while the lease ran is an expiry
	// before the client's lease ended, a broken promise.
	Spurious int64
	// RefusedAtLeaseEnd counts sessions reported gone by an answer to a
	// request sent while the client's lease ran but received after it
	// ended: the server may have expired the session after the lease end,
	// which is allowed (the request reached it too late). Many of them say
	// that the client sends keepalives late (see Late).
	RefusedAtLeaseEnd int64
	// Lapsed counts sessions whose lease ran out on the client's side
	// first (no acknowledged keepalive within the TTL).
	Lapsed int64
	// Latency holds keepalive round trips (nil when the client library
	// does not expose them).
	Latency *Latencies
}

// LateAfter is how late a keepalive may be sent before it counts as late.
const LateAfter = time.Second
