package raftnet

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/transport/internal/acceptwait"
	"github.com/raftlock/raftlock/transport/internal/warnlimit"
)

// ipLimiter counts the open connections of each source IP and refuses one
// past the cap; exempt IPs (a node's peers, on its peer port) are never
// refused.
type ipLimiter struct {
	perIP  int
	exempt atomic.Pointer[func(netip.Addr) bool]
	log    hclog.Logger
	warns  warnlimit.Limiter

	mu    sync.Mutex
	count map[netip.Addr]int
}

func newIPLimiter(perIP int, log hclog.Logger) *ipLimiter {
	if perIP <= 0 {
		perIP = api.DefaultMaxConnsPerIP
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &ipLimiter{perIP: perIP, log: log, count: map[netip.Addr]int{}}
}

// admit returns c wrapped to release its slot on Close, or nil (c closed)
// when its IP holds perIP connections already.
func (l *ipLimiter) admit(c net.Conn) net.Conn {
	ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err != nil {
		return c
	}
	ip := ap.Addr().Unmap()
	if f := l.exempt.Load(); f != nil && (*f)(ip) {
		return c
	}
	l.mu.Lock()
	if l.count[ip] >= l.perIP {
		l.mu.Unlock()
		c.Close()
		if ok, n := l.warns.Allow("conns_per_ip"); ok {
			l.log.Warn("connection refused: too many from one address", "remote", ip.String(), "limit", l.perIP, "suppressed", n)
		}
		return nil
	}
	l.count[ip]++
	l.mu.Unlock()
	return &limitedConn{Conn: c, release: func() {
		l.mu.Lock()
		if l.count[ip]--; l.count[ip] <= 0 {
			delete(l.count, ip)
		}
		l.mu.Unlock()
	}}
}

// limitedConn gives its slot back once, on its first Close.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// limitListener applies an ipLimiter to the connections it accepts.
type limitListener struct {
	net.Listener
	lim *ipLimiter
}

// LimitConnsPerIP returns ln, refusing (closing at once) a connection
// whose source IP already holds perIP open connections accepted from it
// (perIP <= 0: DefaultMaxConnsPerIP). A refused client sees its
// connection closed; the listener goes on accepting. Refusals are logged
// at WARN, at most one line every 10 s.
func LimitConnsPerIP(ln net.Listener, perIP int, log hclog.Logger) net.Listener {
	return &limitListener{Listener: ln, lim: newIPLimiter(perIP, log)}
}

// Accept returns the next connection whose IP is under its cap. An accept
// that fails but for a closed listener (out of file descriptors, an
// aborted connection) is retried after a short wait (acceptwait), so
// that the server above never sees it and never stops: a client that
// fills the node's descriptor table delays new connections, no more.
func (l *limitListener) Accept() (net.Conn, error) {
	var backoff acceptwait.Backoff
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			d, again := backoff.Retry(err)
			if !again {
				return nil, err
			}
			if d == acceptwait.First {
				l.lim.log.Warn("accept failed; retrying until it works", "error", err)
			}
			continue
		}
		backoff.Reset()
		if c = l.lim.admit(c); c != nil {
			return c, nil
		}
	}
}
