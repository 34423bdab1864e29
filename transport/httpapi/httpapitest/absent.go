// Package httpapitest is the test kit of transport/httpapi: Fake, an
// in-memory service built on the contract's fake (api/apitest), and
// Absent, the roles of httpapi.Service a fake does not serve, each
// answering as a replica without it would.
package httpapitest

import (
	"context"
	"io"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/raftlock/raftlock/api"
)

// Absent implements every role of httpapi.Service but the lock calls and
// httpapi.Replica, as a replica without that role: ACLs off, no membership
// management, no snapshots, no overview, always healthy, no metrics, no
// digests, a plain dialer. A fake embeds it and overrides what it serves.
type Absent struct{}

var errACLOff = api.Errorf(api.CodeInvalidArgument, "ACLs are off on this cluster (raftlockd --acl)")

// ACLEnabled reports false: ACLs are off.
func (Absent) ACLEnabled() bool { return false }

// Authenticate answers that ACLs are off.
func (Absent) Authenticate(context.Context, string) (api.Principal, error) {
	return api.Principal{}, errACLOff
}

// ACLBootstrap answers that ACLs are off.
func (Absent) ACLBootstrap(context.Context, api.BootstrapRequest) (api.TokenSecret, error) {
	return api.TokenSecret{}, errACLOff
}

// CreateToken answers that ACLs are off.
func (Absent) CreateToken(context.Context, api.TokenRequest) (api.TokenSecret, error) {
	return api.TokenSecret{}, errACLOff
}

// Tokens answers that ACLs are off.
func (Absent) Tokens(context.Context) ([]api.TokenInfo, error) { return nil, errACLOff }

// DeleteToken answers that ACLs are off.
func (Absent) DeleteToken(context.Context, string) error { return errACLOff }

var errNoAdmin = api.Errorf(api.CodeInvalidArgument, "this server does not revoke grants nor list sessions")

// RevokeGrant answers that this server does not revoke grants.
func (Absent) RevokeGrant(context.Context, api.RevokeRequest) (api.Revocation, error) {
	return api.Revocation{}, errNoAdmin
}

// Sessions answers that this server does not list sessions.
func (Absent) Sessions(context.Context, api.SessionsQuery) (api.SessionsReply, error) {
	return api.SessionsReply{}, errNoAdmin
}

// CloseSessionByHandle answers that this server does not close sessions
// by handle.
func (Absent) CloseSessionByHandle(context.Context, api.CloseByHandleRequest) (api.ClosedSession, error) {
	return api.ClosedSession{}, errNoAdmin
}

// RequestRelease answers that this server does not pass release requests.
func (Absent) RequestRelease(context.Context, api.RequestReleaseRequest) error { return errNoAdmin }

var errNoMembership = api.Errorf(api.CodeInvalidArgument, "this server does not manage membership")

// Members answers that this server does not manage membership.
func (Absent) Members(context.Context) ([]api.Member, error) { return nil, errNoMembership }

// AddMember answers that this server does not manage membership.
func (Absent) AddMember(context.Context, api.Member) error { return errNoMembership }

// RemoveMember answers that this server does not manage membership.
func (Absent) RemoveMember(context.Context, string, bool) error { return errNoMembership }

// TransferLeadership answers that this server does not manage membership.
func (Absent) TransferLeadership(context.Context, string) (api.TransferReply, error) {
	return api.TransferReply{}, errNoMembership
}

// BootstrapState answers an empty state.
func (Absent) BootstrapState() api.BootstrapState { return api.BootstrapState{} }

// Removed reports that the node was not removed.
func (Absent) Removed() (bool, []string) { return false, nil }

var errNoSnapshots = api.Errorf(api.CodeNotFound, "this server does not serve snapshots")

// Snapshot answers that this server does not serve snapshots.
func (Absent) Snapshot(context.Context, io.Writer) (api.SnapshotInfo, error) {
	return api.SnapshotInfo{}, errNoSnapshots
}

// Restore answers that this server does not serve snapshots.
func (Absent) Restore(context.Context, []byte, uint64) (api.RestoreInfo, error) {
	return api.RestoreInfo{}, errNoSnapshots
}

// PeerRestore answers that this server does not serve snapshots.
func (Absent) PeerRestore(context.Context, []byte, uint64) (api.RestoreInfo, error) {
	return api.RestoreInfo{}, errNoSnapshots
}

// AuthorizeRestore lets every caller restore.
func (Absent) AuthorizeRestore(context.Context) error { return nil }

// SpoolDir is "": uploads go to os.TempDir().
func (Absent) SpoolDir() string { return "" }

// Overview answers that this server has no overview.
func (Absent) Overview(context.Context, uint64, time.Duration) (api.Overview, error) {
	return api.Overview{}, api.Errorf(api.CodeNotFound, "this server has no overview")
}

// Health reports healthy: the server answers 200 whenever it answers.
func (Absent) Health() api.HealthStatus { return api.HealthStatus{Healthy: true} }

// MetricsRegisterer is nil: no metrics.
func (Absent) MetricsRegisterer() prometheus.Registerer { return nil }

// MetricsOpen reports false.
func (Absent) MetricsOpen() bool { return false }

// Metrics answers that this server exports no metrics.
func (Absent) Metrics(context.Context, string) (prometheus.Gatherer, error) {
	return nil, api.Errorf(api.CodeNotFound, "this server exports no metrics")
}

// MetricsGatherer is nil: no metrics.
func (Absent) MetricsGatherer() prometheus.Gatherer { return nil }

// DigestReport answers an empty report.
func (Absent) DigestReport() api.DigestReport { return api.DigestReport{} }

// Diverged does nothing.
func (Absent) Diverged(api.DivergedNotice) {}

// DialPeer dials addr directly (5 s timeout, 30 s keep-alive).
func (Absent) DialPeer(ctx context.Context, network, addr string) (net.Conn, error) {
	return (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext(ctx, network, addr)
}

// LocksPage lists one page of b's locks from its full listing
// (api.PageLocks): httpapi.Replica's LocksPage for a fake whose backend
// lists all its locks at once.
func LocksPage(ctx context.Context, b api.Backend, q api.LocksQuery) (api.LocksPage, error) {
	if err := q.Resolve(); err != nil {
		return api.LocksPage{}, err
	}
	ls, err := b.Locks(ctx, q.Prefix)
	if err != nil {
		return api.LocksPage{}, err
	}
	return api.PageLocks(ls, q), nil
}

// ResetPage is httpapi.Replica's ResetPage for a fake whose WatchLocks
// answers a reset whole (so no watcher asks for its pages): the rest of
// b's listing after after, at most api.MaxLocksPage locks, at index.
func ResetPage(ctx context.Context, b api.Backend, prefix string, index uint64, after string) (api.LocksChange, error) {
	page, err := LocksPage(ctx, b, api.LocksQuery{Prefix: prefix, After: after, Limit: api.MaxLocksPage})
	if err != nil {
		return api.LocksChange{}, err
	}
	return api.LocksChange{Locks: page.Locks, Reset: true, Next: page.Next, Index: index}, nil
}

// WatchLocks answers a prefix watch from b's full listing: httpapi.Replica's
// WatchLocks for a fake whose backend has no change notification. It
// answers every lock under prefix whose index is above index (a reset
// listing for index 0), looking again every 10 ms until one is or wait
// (zero: api.DefaultWatchWait) has passed: a fake's stand-in for the
// node's change notification.
func WatchLocks(ctx context.Context, b api.Backend, prefix string, index uint64, wait time.Duration) (api.LocksChange, error) {
	if err := api.CheckPrefix(prefix); err != nil {
		return api.LocksChange{}, err
	}
	if wait == 0 {
		wait = api.DefaultWatchWait
	}
	if err := api.CheckWatchWait("wait", wait); err != nil {
		return api.LocksChange{}, err
	}
	deadline := time.Now().Add(wait)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		ls, err := b.Locks(ctx, prefix)
		if err != nil {
			return api.LocksChange{}, err
		}
		c := api.LocksChange{Locks: []api.LockState{}, Reset: index == 0, Index: index}
		for _, l := range ls {
			c.Index = max(c.Index, l.Index)
			if c.Reset || l.Index > index {
				c.Locks = append(c.Locks, l)
			}
		}
		if c.Reset || len(c.Locks) > 0 || !time.Now().Before(deadline) {
			return c, nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return api.LocksChange{}, ctx.Err()
		}
	}
}

// AdmitForwardedQuery admits every forwarded query (no caps).
func (Absent) AdmitForwardedQuery(string) (func(), error) { return func() {}, nil }
