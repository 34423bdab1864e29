package raftnet

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/raftlock/raftlock/transport/internal/acceptwait"
	"github.com/raftlock/raftlock/transport/internal/warnlimit"
	"github.com/raftlock/raftlock/transport/tlsconf"
)

// RaftTCPConfig configures the Raft network layer of one node.
type RaftTCPConfig struct {
	// BindAddr is the host:port to listen on ("127.0.0.1:0" picks a port).
	BindAddr string
	// Advertise is the address peers dial; empty means the listener's.
	Advertise string
	// MaxPool is the number of idle connections kept per peer (default 3).
	MaxPool int
	// Timeout bounds one RPC's I/O (default 10s).
	Timeout time.Duration
	Logger  hclog.Logger
	// TLS, if set, makes the port mutual TLS: every connection, Raft's and
	// the API's, in and out, is TLS with the node's certificate, and the
	// other end must present a node certificate signed by the CA.
	TLS *tlsconf.TLS
}

// RaftNet is a node's peer port: one TCP listener that carries Raft's RPCs
// and the API requests of peers (a follower forwarding to the leader, an
// embedding application's calls to the leader). Putting both on one port
// means a request reaches the leader whenever Raft does: a leader whose
// client port is cut off from its peers keeps serving what they forward.
type RaftNet struct {
	// Transport is the Raft transport of the port.
	Transport *raft.NetworkTransport
	// Peers is the listener of the port's API connections; serve the HTTP
	// API on it (ServePeers).
	Peers net.Listener

	dialer *peerDialer
	stream *tcpStream
	mux    *portMux
}

// LimitConnsPerIP caps the connections one source IP holds open on the
// port at perIP (<= 0: DefaultMaxConnsPerIP), counted from accept, before
// the TLS handshake and the sorting: past the cap a connection is closed
// at once. Connections from an IP for which member reports true (the
// cluster's members) are never refused, so that clients that flood the
// port cannot starve the peers' Raft and forwarding. Set it once, before
// the port carries traffic; until then the port has no cap.
func (rn *RaftNet) LimitConnsPerIP(perIP int, member func(netip.Addr) bool) {
	lim := newIPLimiter(perIP, rn.mux.log)
	if member != nil {
		lim.exempt.Store(&member)
	}
	rn.mux.limit.Store(lim)
}

// OnInboundLost sets f to be called whenever a Raft connection a peer
// opened to this port ends with an error that is not this node's own
// close: the peer closed it, reset it, or its process died (the kernel
// closes a killed process's sockets at once). On a follower those
// connections come from the leader, so it is the earliest sign of a dead
// leader (node/failover.go). f must not block.
func (rn *RaftNet) OnInboundLost(f func()) { rn.stream.onLost.Store(&f) }

// DialContext dials a peer's port from this node's own IP, as Raft does,
// giving up after peerDialTimeout. On a TLS port the connection it returns
// has completed its handshake: the peer's certificate was verified.
func (rn *RaftNet) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return rn.dialer.dial(ctx, network, addr, peerDialTimeout)
}

// peerDialer opens the node's connections to its peers' ports: from the
// node's own IP, and with TLS (the node's certificate; the peer's verified
// against the CA, at the address dialled) when tls is set.
type peerDialer struct {
	net net.Dialer
	tls *tls.Config
}

func (d *peerDialer) dial(ctx context.Context, network, addr string, timeout time.Duration) (net.Conn, error) {
	nd := d.net
	nd.Timeout = timeout
	if d.tls == nil {
		return nd.DialContext(ctx, network, addr)
	}
	// tls.Dialer takes the host of addr for the server name to verify,
	// and bounds the handshake with the dial's timeout.
	return (&tls.Dialer{NetDialer: &nd, Config: d.tls}).DialContext(ctx, network, addr)
}

// peerDialTimeout bounds a connection attempt to a peer's port.
const peerDialTimeout = 5 * time.Second

// peekTimeout bounds how long an accepted connection may take to send its
// first byte, which tells Raft's RPCs from API requests.
const peekTimeout = 10 * time.Second

// NewRaftTCPTransport listens on cfg.BindAddr and returns the node's peer
// port. Outgoing connections originate from the bind address's IP, so that
// firewall rules (and the partitions of the fault tests) on a node's
// address act on exactly that node's traffic.
//
// A connection's first byte says what it carries: Raft's RPC types are
// small numbers (0-4), an HTTP request starts with a method's capital
// letter. Connections are sorted in their own goroutines, so a peer that
// connects and sends nothing holds up no one. With cfg.TLS the sorting
// comes after the TLS handshake: a connection whose peer presents no node
// certificate signed by the CA is closed before anything is read from it.
func NewRaftTCPTransport(cfg RaftTCPConfig) (*RaftNet, error) {
	ln, err := net.Listen("tcp", cfg.BindAddr)
	if err != nil {
		return nil, fmt.Errorf("raft transport: listen %s: %w", cfg.BindAddr, err)
	}
	var adv net.Addr = ln.Addr()
	if cfg.Advertise != "" {
		a, err := advertiseAddr(cfg.Advertise)
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("raft transport: advertise %s: %w", cfg.Advertise, err)
		}
		adv = a
	}
	if ta, ok := adv.(*net.TCPAddr); ok && ta.IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("raft transport: advertise address %s is not dialable; set it explicitly", adv)
	}
	dialer := &peerDialer{net: net.Dialer{KeepAlive: 30 * time.Second}}
	if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsUnspecified() {
		dialer.net.LocalAddr = &net.TCPAddr{IP: ip}
	}
	var serverTLS *tls.Config
	if cfg.TLS != nil {
		serverTLS, dialer.tls = cfg.TLS.PeerServerConfig(), cfg.TLS.PeerClientConfig()
	}
	if cfg.MaxPool == 0 {
		cfg.MaxPool = 3
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	logger := cfg.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	mux := newPortMux(ln, serverTLS, logger.Named("peer-port"))
	stream := &tcpStream{mux: mux, adv: adv, dialer: dialer, closed: make(chan struct{})}
	return &RaftNet{
		Transport: raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
			Stream:  stream,
			MaxPool: cfg.MaxPool,
			Timeout: cfg.Timeout,
			Logger:  logger.Named("raft-net"),
		}),
		Peers:  mux.api,
		dialer: dialer,
		stream: stream,
		mux:    mux,
	}, nil
}

// hostAddr is an advertised address by DNS name (host:port), kept as
// given: peers dial the name, so that a node whose IP changes (a
// Kubernetes pod rescheduled) keeps its address in the configuration.
type hostAddr string

func (a hostAddr) Network() string { return "tcp" }
func (a hostAddr) String() string  { return string(a) }

// advertiseAddr parses an advertised address: an IP and port as a
// *net.TCPAddr, a DNS name and port as a hostAddr, not resolved here (the
// name may not resolve before this node's peers can reach it, as with a
// Kubernetes headless Service's records).
func advertiseAddr(s string) (net.Addr, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return nil, err
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return nil, err
	}
	if host == "" {
		return nil, fmt.Errorf("no host: give an IP address or a DNS name")
	}
	if net.ParseIP(host) != nil {
		return net.ResolveTCPAddr("tcp", s)
	}
	return hostAddr(s), nil
}

// tcpStream is a raft.StreamLayer over TCP (or TLS) with a bound local
// address.
type tcpStream struct {
	mux    *portMux
	adv    net.Addr
	dialer *peerDialer
	// onLost is called when an accepted connection is lost (OnInboundLost).
	onLost atomic.Pointer[func()]
	// closed is closed by Close (the Raft transport's Close).
	closed    chan struct{}
	closeOnce sync.Once
}

func (s *tcpStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return s.dialer.dial(context.Background(), "tcp", string(address), timeout)
}

func (s *tcpStream) Accept() (net.Conn, error) {
	c, err := s.mux.raft.Accept()
	if err != nil {
		// The port closed (the node's peer API server closes it first
		// when it stops): wait for the Raft transport's own Close, which
		// marks it shut down before it closes this stream, so that its
		// accept loop ends quietly instead of logging "failed to accept
		// connection" at ERROR on every clean shutdown.
		<-s.closed
		return nil, err
	}
	return &inboundConn{Conn: c, stream: s}, nil
}

// inboundConn is a Raft connection a peer opened: a read that fails
// other than by this side's Close reports the loss (OnInboundLost), once.
type inboundConn struct {
	net.Conn
	stream *tcpStream
	once   sync.Once
}

func (c *inboundConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil && !errors.Is(err, net.ErrClosed) && !isTimeout(err) {
		if f := c.stream.onLost.Load(); f != nil {
			c.once.Do(*f)
		}
	}
	return n, err
}

// isTimeout reports whether err is a deadline that passed (the transport
// sets read deadlines; that is not a lost connection).
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
func (s *tcpStream) Close() error {
	s.closeOnce.Do(func() { close(s.closed) })
	return s.mux.close()
}
func (s *tcpStream) Addr() net.Addr { return s.adv }

// portMux sorts the connections of one listener between Raft and the API,
// after a TLS handshake if tls is set.
type portMux struct {
	ln        net.Listener
	tls       *tls.Config
	log       hclog.Logger
	warns     warnlimit.Limiter
	raft, api *chanListener
	done      chan struct{}
	once      sync.Once
	// limit caps connections per source IP (nil: none).
	limit atomic.Pointer[ipLimiter]
}

func newPortMux(ln net.Listener, tlsConf *tls.Config, log hclog.Logger) *portMux {
	m := &portMux{ln: ln, tls: tlsConf, log: log, done: make(chan struct{})}
	m.raft = &chanListener{conns: make(chan net.Conn), done: m.done, addr: ln.Addr(), close: m.close}
	m.api = &chanListener{conns: make(chan net.Conn), done: m.done, addr: ln.Addr(), close: m.close}
	go m.run()
	return m
}

func (m *portMux) run() {
	var backoff acceptwait.Backoff
	for {
		c, err := m.ln.Accept()
		if err != nil {
			// Out of file descriptors and the like: wait and go on, as
			// net/http's server does; only a closed port ends the loop.
			d, again := backoff.Retry(err)
			if !again {
				m.close()
				return
			}
			if d == acceptwait.First {
				m.log.Warn("accept failed; retrying until it works", "error", err)
			}
			select {
			case <-m.done:
				return
			default:
			}
			continue
		}
		backoff.Reset()
		if lim := m.limit.Load(); lim != nil {
			if c = lim.admit(c); c == nil {
				continue
			}
		}
		go m.sort(c)
	}
}

// sort reads c's first byte and hands c, byte included, to its listener.
// On a TLS port it first completes the handshake (within the same
// peekTimeout): a peer without a node certificate signed by the CA is
// refused there, and the byte read is the first of the plaintext.
func (m *portMux) sort(c net.Conn) {
	var b [1]byte
	_ = c.SetDeadline(time.Now().Add(peekTimeout))
	if m.tls != nil {
		tc := tls.Server(c, m.tls)
		if err := tc.Handshake(); err != nil {
			// At most one line every warnlimit.Every: anyone who reaches the
			// port can fail a handshake.
			if ok, n := m.warns.Allow("peer_tls_refused"); ok {
				m.log.Warn("peer refused: TLS handshake failed", "remote", c.RemoteAddr().String(), "error", err, "suppressed", n)
			}
			c.Close()
			return
		}
		c = tc
	}
	if _, err := io.ReadFull(c, b[:]); err != nil {
		c.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
	to := m.raft
	if b[0] >= 'A' && b[0] <= 'Z' {
		to = m.api
	}
	pc := &peekedConn{Conn: c, first: b[0], has: true}
	select {
	case to.conns <- pc:
	case <-m.done:
		c.Close()
	}
}

func (m *portMux) close() error {
	var err error
	m.once.Do(func() {
		close(m.done)
		err = m.ln.Close()
	})
	return err
}

// chanListener is a net.Listener fed by a portMux. Closing either of a
// mux's listeners closes the port.
type chanListener struct {
	conns chan net.Conn
	done  chan struct{}
	addr  net.Addr
	close func() error
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error   { return l.close() }
func (l *chanListener) Addr() net.Addr { return l.addr }

// peekedConn gives back the byte the mux read before the rest.
type peekedConn struct {
	net.Conn
	first byte
	has   bool
}

func (c *peekedConn) Read(p []byte) (int, error) {
	if c.has && len(p) > 0 {
		p[0], c.has = c.first, false
		return 1, nil
	}
	return c.Conn.Read(p)
}

// NetConn returns the connection the mux read from (a *tls.Conn on a TLS
// peer port), as tls.Conn.NetConn does: the HTTP server on the peer port
// finds the certificate a peer presented through it.
func (c *peekedConn) NetConn() net.Conn { return c.Conn }
