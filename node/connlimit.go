package node

import (
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/raftlock/raftlock/api"
)

// checkConnLimits fills in and checks MaxConnsPerIP and IdleTimeout.
func (c *Config) checkConnLimits() error {
	if c.MaxConnsPerIP == 0 {
		c.MaxConnsPerIP = api.DefaultMaxConnsPerIP
	}
	if c.MaxConnsPerIP < api.MinMaxConnsPerIP || c.MaxConnsPerIP > api.MaxMaxConnsPerIP {
		return invalid("MaxConnsPerIP %d: want %d to %d", c.MaxConnsPerIP, api.MinMaxConnsPerIP, api.MaxMaxConnsPerIP)
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = api.DefaultIdleTimeout
	}
	return CheckIdleTimeout("IdleTimeout", c.IdleTimeout)
}

// CheckIdleTimeout checks an idle timeout (Config.IdleTimeout, raftlockd
// --http-idle-timeout): [api.MinIdleTimeout, api.MaxIdleTimeout].
func CheckIdleTimeout(what string, d time.Duration) error {
	if d < api.MinIdleTimeout || d > api.MaxIdleTimeout {
		return invalid("%s %v: want %v to %v", what, d, api.MinIdleTimeout, api.MaxIdleTimeout)
	}
	return nil
}

// memberIPRefresh is how old the member IP set may grow before a lookup
// refreshes it (in the background: a lookup never waits for Raft).
const memberIPRefresh = time.Second

// memberIPs is the set of the members' IPs, from the Raft configuration
// and the bootstrap peers: connections from them pass the peer port's
// per-IP cap. Addresses given as host names are resolved when the set is
// refreshed.
type memberIPs struct {
	n *Node
	// raft is the node's Raft, once started.
	raft    atomic.Pointer[raft.Raft]
	set     atomic.Pointer[memberIPSet]
	running atomic.Bool
}

type memberIPSet struct {
	at  time.Time
	ips map[netip.Addr]bool
}

// contains reports whether ip is a member's, as of the last refresh, and
// starts a refresh when that is older than memberIPRefresh.
func (m *memberIPs) contains(ip netip.Addr) bool {
	s := m.set.Load()
	if (s == nil || time.Since(s.at) > memberIPRefresh) && m.running.CompareAndSwap(false, true) {
		go func() {
			defer m.running.Store(false)
			m.refresh()
		}()
	}
	return s != nil && s.ips[ip]
}

func (m *memberIPs) refresh() {
	n := m.n
	ips := map[netip.Addr]bool{}
	add := func(addr string) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return
		}
		if ip, err := netip.ParseAddr(host); err == nil {
			ips[ip.Unmap()] = true
			return
		}
		if addrs, err := net.LookupHost(host); err == nil {
			for _, a := range addrs {
				if ip, err := netip.ParseAddr(a); err == nil {
					ips[ip.Unmap()] = true
				}
			}
		}
	}
	for _, p := range n.cfg.Peers {
		add(p.RaftAddr)
	}
	if r := m.raft.Load(); r != nil {
		f := r.GetConfiguration()
		if f.Error() == nil {
			for _, srv := range f.Configuration().Servers {
				add(string(srv.Address))
			}
		}
	}
	if n.trans != nil {
		add(string(n.trans.LocalAddr()))
	}
	m.set.Store(&memberIPSet{at: time.Now(), ips: ips})
}
