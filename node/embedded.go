package node

import (
	"context"
	"time"

	"github.com/raftlock/raftlock/api"
)

// Backend returns the api.Backend through which an application that
// embeds this node takes sessions and locks: while this node leads, calls
// run in-process; otherwise they go to the leader's peer port (its Raft
// address), which every node serves by itself: an embedding application
// needs no HTTP server of its own. (A node built on Config.RaftTransport has
// no peer port; it reaches the others at their HTTP addresses from the
// member table, which they must then serve.)
//
// The Node's own methods answer only on the leader (no_leader elsewhere);
// the Backend is what makes "any replica" work, with the same semantics a
// standalone cluster gives through client.Client, retries included: a
// call that loses its leader midway goes on at the new leader (with the
// same holder id) until ctx is done.
func (n *Node) Backend() api.Backend {
	n.backendOnce.Do(func() {
		// The resolver always answers, so the fixed address list is unused.
		c, err := n.cfg.Wire.Remote(n.forwardAddrs, n.DialPeer, "")
		if err != nil {
			panic("node: embedded client: " + err.Error()) // cannot happen: the resolver is set
		}
		n.backend = &embedded{n: n, remote: c}
	})
	return n.backend
}

// forwardAddrs names where a call this node cannot answer should go: the
// leader's peer port first, then the other members' (which forward); on a
// node without a peer port, their HTTP addresses.
func (n *Node) forwardAddrs() []string {
	li := n.Leader()
	var out []string
	if n.peer != nil {
		if !li.Self && li.PeerAddr != "" {
			out = append(out, li.PeerAddr)
		}
		cf := n.raft.GetConfiguration()
		if cf.Error() != nil {
			return out
		}
		for _, s := range cf.Configuration().Servers {
			if id := string(s.ID); id != n.cfg.ID && id != li.ID {
				out = append(out, string(s.Address))
			}
		}
		return out
	}
	if !li.Self && li.HTTPAddr != "" {
		out = append(out, li.HTTPAddr)
	}
	for _, m := range n.fsm.Members() {
		if m.ID != n.cfg.ID && m.ID != li.ID && m.HTTPAddr != "" {
			out = append(out, m.HTTPAddr)
		}
	}
	return out
}

// embedded routes each call to the local node while it leads, to the
// leader through remote otherwise. remote's retry policy is the only one on
// either path: a local call that finds this node no longer leading
// (no_leader), or loses leadership before its outcome is known
// (unknown_outcome; every call is safe to repeat, see api.Backend), goes
// on through remote, which retries until ctx is done.
type embedded struct {
	n      *Node
	remote api.Backend
	// secret is the ACL token's secret of BackendWithToken ("": none).
	secret string
}

// BackendWithToken is Backend for a cluster with ACLs on (Config.ACL):
// every call is made with the token whose secret is secret, in-process
// (authenticated against this node's state) as through the leader's peer
// port (Authorization: Bearer). Backend's calls carry no token, so with
// ACLs on they are refused (unauthenticated).
func (n *Node) BackendWithToken(secret string) api.Backend {
	c, err := n.cfg.Wire.Remote(n.forwardAddrs, n.DialPeer, secret)
	if err != nil {
		panic("node: embedded client: " + err.Error()) // cannot happen: the resolver is set
	}
	return &embedded{n: n, remote: c, secret: secret}
}

// with returns ctx carrying the token of e's secret, for a local call
// (ctx unchanged without one or when it does not authenticate: the local
// call then answers unauthenticated, as the leader would).
func (e *embedded) with(ctx context.Context) context.Context {
	if e.secret == "" || !e.n.cfg.ACL {
		return ctx
	}
	if p, err := e.n.Authenticate(ctx, e.secret); err == nil {
		return api.WithPrincipal(ctx, p)
	}
	return ctx
}

var _ api.Backend = (*embedded)(nil)

// route runs call on local (nil unless this node leads), and on remote
// when local is nil or hands the call over: it answered no_leader or
// unknown_outcome.
func route[T any](local, remote api.Backend, call func(api.Backend) (T, error)) (T, error) {
	if local != nil {
		v, err := call(local)
		if c := api.CodeOf(err); err == nil || (c != api.CodeNoLeader && c != api.CodeUnknownOutcome) {
			return v, err
		}
	}
	return call(remote)
}

// routeErr is route for calls that answer only an error.
func routeErr(local, remote api.Backend, call func(api.Backend) error) error {
	_, err := route(local, remote, func(b api.Backend) (struct{}, error) { return struct{}{}, call(b) })
	return err
}

// local returns the node while it leads, else nil.
func (e *embedded) local() api.Backend {
	if e.n.IsLeader() {
		return e.n
	}
	return nil
}

func (e *embedded) OpenSession(ctx context.Context, req api.OpenRequest) (api.Info, error) {
	ctx = e.with(ctx)
	return route(e.local(), e.remote, func(b api.Backend) (api.Info, error) { return b.OpenSession(ctx, req) })
}

func (e *embedded) KeepAlive(ctx context.Context, id string) (api.KeepAliveAnswer, error) {
	ctx = e.with(ctx)
	return route(e.local(), e.remote, func(b api.Backend) (api.KeepAliveAnswer, error) { return b.KeepAlive(ctx, id) })
}

func (e *embedded) CloseSession(ctx context.Context, id string) error {
	ctx = e.with(ctx)
	return routeErr(e.local(), e.remote, func(b api.Backend) error { return b.CloseSession(ctx, id) })
}

func (e *embedded) SessionInfo(ctx context.Context, id string) (api.Info, error) {
	ctx = e.with(ctx)
	return route(e.local(), e.remote, func(b api.Backend) (api.Info, error) { return b.SessionInfo(ctx, id) })
}

func (e *embedded) Acquire(ctx context.Context, req api.AcquireRequest) (api.Grant, error) {
	ctx = e.with(ctx)
	return route(e.local(), e.remote, func(b api.Backend) (api.Grant, error) { return b.Acquire(ctx, req) })
}

func (e *embedded) Release(ctx context.Context, req api.ReleaseRequest) error {
	ctx = e.with(ctx)
	return routeErr(e.local(), e.remote, func(b api.Backend) error { return b.Release(ctx, req) })
}

func (e *embedded) LockState(ctx context.Context, name string) (api.LockState, error) {
	ctx = e.with(ctx)
	return route(e.local(), e.remote, func(b api.Backend) (api.LockState, error) { return b.LockState(ctx, name) })
}

func (e *embedded) Locks(ctx context.Context, prefix string) ([]api.LockState, error) {
	ctx = e.with(ctx)
	return route(e.local(), e.remote, func(b api.Backend) ([]api.LockState, error) { return b.Locks(ctx, prefix) })
}

func (e *embedded) CheckSequencer(ctx context.Context, seq string) (api.SequencerCheck, error) {
	ctx = e.with(ctx)
	return route(e.local(), e.remote, func(b api.Backend) (api.SequencerCheck, error) { return b.CheckSequencer(ctx, seq) })
}

func (e *embedded) WatchLock(ctx context.Context, name string, index uint64, wait time.Duration) (api.LockState, error) {
	ctx = e.with(ctx)
	return route(e.local(), e.remote, func(b api.Backend) (api.LockState, error) { return b.WatchLock(ctx, name, index, wait) })
}

// RequestRelease asks the holders of a lock to release it (see
// Node.RequestRelease), through the leader.
func (e *embedded) RequestRelease(ctx context.Context, req api.RequestReleaseRequest) error {
	ctx = e.with(ctx)
	return routeErr(e.local(), e.remote, func(b api.Backend) error {
		rb, ok := b.(interface {
			RequestRelease(context.Context, api.RequestReleaseRequest) error
		})
		if !ok {
			return api.Errorf(api.CodeInvalidArgument, "this backend does not pass release requests")
		}
		return rb.RequestRelease(ctx, req)
	})
}
