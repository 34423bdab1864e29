package client

import (
	"context"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftlock/raftlock/api"
)

// This file is how a Client follows the cluster's membership: it learns
// its members' HTTP addresses from the cluster (GET /v1/cluster) and the
// leader's from answers, so that a client given only the original members
// keeps working after every one of them was replaced.

const (
	// DefaultMemberSync is how often a Client asks the cluster for its
	// members' HTTP addresses (WithMemberSync), as etcd's client syncs its
	// endpoints (AutoSyncInterval).
	DefaultMemberSync = 30 * time.Second
	// minSyncGap is the least time between two syncs a call starts
	// because every address it knows failed.
	minSyncGap = time.Second
	// maxAddrs bounds the client's address list: a member list or leader
	// addresses beyond it are ignored.
	maxAddrs = 64
	// syncUnset marks a Client whose member sync WithMemberSync did not
	// set: NewClient decides by the number of addresses given.
	syncUnset = time.Duration(-1 << 62)
)

// syncState is the state of a Client's member sync.
type syncState struct {
	mu sync.Mutex
	// last is when the last sync started (the client's creation at first,
	// so that a client used for a call or two never syncs on a period);
	// running is set while one runs.
	last    time.Time
	running bool
	// due is when the next periodic sync is due (Unix ns; 0 before the
	// first call), read without mu so that a call pays no lock for it.
	due atomic.Int64
	// hints are leader addresses that answers named and the client could
	// not take (a removed node's hint while the list is full): where the
	// next sync also asks.
	hints []string
	// active is set once the client has seen that the addresses it was
	// given are the members' own HTTP addresses (see WithMemberSync):
	// only then does it take addresses from the cluster.
	active atomic.Bool
}

// WithMemberSync sets how often the client asks the cluster for its
// members' HTTP addresses; d <= 0 turns the sync off, and the client then
// uses only the addresses given to NewClient. The default is
// DefaultMemberSync (30 s) for a client given two addresses or more, and
// off for a client given one: that one talks to that node alone (a probe
// of one node, a reader pinned to it, a load balancer's address). With it
// on:
//
//   - every d, and at once (at most once a second) when every address a
//     call knows has failed, the client asks GET /v1/cluster, from a
//     goroutine of its own bounded by the request timeout, at its current
//     addresses, then at those given to NewClient (the seeds, kept as the
//     fallback when all else fails), then at leader addresses answers
//     named; the members' HTTP addresses become its address list: new
//     members are added, removed ones dropped (never down to none: an
//     answer that names no address changes nothing);
//   - a leader address an answer names (X-Raftlock-Leader-Addr, under the
//     term rule; see Client) that the client does not know is added, so
//     that a client whose token may not read /v1/cluster (ACLs: admin
//     only) still follows the leader.
//
// The client takes addresses from the cluster only once it has seen that
// the addresses it was given are the members' own: an answer named one of
// them as the leader's address, or a member list held one. A client that
// reaches the cluster through proxies or a load balancer, at addresses
// the cluster does not know, thus keeps to those it was given.
//
// A learned address takes the scheme of the given ones: https if any of
// them was given as https://. The list holds at most 64 addresses.
// WithResolver turns the sync off.
func WithMemberSync(d time.Duration) ClientOption {
	return func(c *Client) { c.syncEvery = max(d, 0) }
}

// list returns the client's current address list (never modified in
// place: a change stores a new slice).
func (c *Client) list() []string {
	if p := c.addrs.Load(); p != nil {
		return *p
	}
	return nil
}

// Addrs returns the addresses the client sends its calls to now, as
// host:port: the ones given to NewClient, then what it learned from the
// cluster (WithMemberSync).
func (c *Client) Addrs() []string { return slices.Clone(c.list()) }

// syncOn reports whether the member sync is on.
func (c *Client) syncOn() bool { return c.resolve == nil && c.syncEvery > 0 }

// addLearned adds addr, a leader address an answer named, to the address
// list; it reports whether addr is in the list now. It refuses anything
// but host:port, and any address once the list is full (remembering it as
// a hint for the next sync).
func (c *Client) addLearned(addr string) bool {
	if !c.syncOn() || !c.sync.active.Load() || !validHostPort(addr) {
		return false
	}
	c.sync.mu.Lock()
	defer c.sync.mu.Unlock()
	cur := c.list()
	if slices.Contains(cur, addr) {
		return true
	}
	if len(cur) >= maxAddrs {
		if !slices.Contains(c.sync.hints, addr) && len(c.sync.hints) < maxAddrs {
			c.sync.hints = append(c.sync.hints, addr)
		}
		return false
	}
	next := append(slices.Clone(cur), addr)
	c.addrs.Store(&next)
	return true
}

// validHostPort reports whether a is host:port with both parts set and no
// scheme, path or space.
func validHostPort(a string) bool {
	if len(a) > 300 {
		return false
	}
	host, port, err := net.SplitHostPort(a)
	if err != nil || host == "" || port == "" {
		return false
	}
	for _, r := range a {
		if r <= ' ' || r == '/' || r == '@' || r == '?' || r == '#' || r > '~' {
			return false
		}
	}
	return true
}

// coversAll reports whether every address of addrs is in failed.
func coversAll(failed, addrs []string) bool {
	for _, a := range addrs {
		if !slices.Contains(failed, a) {
			return false
		}
	}
	return len(addrs) > 0
}

// maybeSync starts a member sync in the background when one is due: every
// syncEvery, or (urgent: every address a call knows failed, or the
// membership changed) when the last one started at least minSyncGap ago.
// At most one runs at a time. It reports whether it started one.
func (c *Client) maybeSync(urgent bool) bool {
	if !c.syncOn() {
		return false
	}
	now := time.Now()
	if due := c.sync.due.Load(); !urgent && due != 0 && now.UnixNano() < due {
		return false
	}
	c.sync.mu.Lock()
	if c.sync.last.IsZero() {
		// The client's first call: the period starts now.
		c.sync.last = now
		c.sync.due.Store(now.Add(c.syncEvery).UnixNano())
	}
	gap := c.syncEvery
	if urgent {
		gap = minSyncGap
	}
	if c.sync.running || now.Sub(c.sync.last) < gap {
		c.sync.mu.Unlock()
		return false
	}
	c.sync.running, c.sync.last = true, now
	c.sync.due.Store(now.Add(c.syncEvery).UnixNano())
	c.sync.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		defer cancel()
		c.syncMembers(ctx)
		c.sync.mu.Lock()
		c.sync.running = false
		c.sync.mu.Unlock()
	}()
	return true
}

// syncMembers asks GET /v1/cluster at each address in turn (the current
// list, the seeds, then the hints and any leader address an answer names
// meanwhile) until one answers, and makes the members' HTTP addresses the
// address list. It reports whether it got an answer.
func (c *Client) syncMembers(ctx context.Context) bool {
	c.sync.mu.Lock()
	ask := slices.Clone(c.list())
	for _, a := range append(slices.Clone(c.seeds), c.sync.hints...) {
		if !slices.Contains(ask, a) {
			ask = append(ask, a)
		}
	}
	c.sync.hints = nil
	c.sync.mu.Unlock()
	for i := 0; i < len(ask) && i < 2*maxAddrs; i++ {
		if ctx.Err() != nil {
			return false
		}
		var out api.ClusterInfo
		cl := &call{method: http.MethodGet, path: "/v1/cluster", out: &out, idempotent: true}
		hdr, ae, err := c.attempt(ctx, ask[i], cl)
		if err != nil {
			return false
		}
		if ae != nil {
			if la := hdr.Get(api.HeaderLeaderAddr); c.sync.active.Load() && la != "" && validHostPort(la) && !slices.Contains(ask, la) {
				ask = append(ask, la)
			}
			continue
		}
		c.applyMembers(out)
		return true
	}
	return false
}

// applyMembers makes the HTTP addresses of info's members the address
// list: those already in it keep their place, new ones are appended, the
// others are dropped; an answer that names none changes nothing. The
// leader it names is learned.
func (c *Client) applyMembers(info api.ClusterInfo) {
	var members []string
	leader := ""
	for _, m := range info.Members {
		a := m.HTTPAddr
		if !validHostPort(a) || slices.Contains(members, a) || len(members) >= maxAddrs {
			continue
		}
		members = append(members, a)
		if m.ID == info.Leader {
			leader = a
		}
	}
	if !c.sync.active.Load() && slices.ContainsFunc(members, func(a string) bool { return slices.Contains(c.seeds, a) }) {
		c.sync.active.Store(true)
	}
	if len(members) > 0 && c.sync.active.Load() {
		c.sync.mu.Lock()
		cur := c.list()
		next := make([]string, 0, len(members))
		for _, a := range cur {
			if slices.Contains(members, a) {
				next = append(next, a)
			}
		}
		for _, a := range members {
			if !slices.Contains(next, a) {
				next = append(next, a)
			}
		}
		if !slices.Equal(next, cur) {
			c.addrs.Store(&next)
		}
		c.sync.mu.Unlock()
	}
	if leader != "" {
		c.learn(leader, info.Term)
	}
}
