package transport

import (
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
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
}

// NewRaftTCPTransport listens on cfg.BindAddr and returns a Raft transport
// whose outgoing connections originate from the bind address's IP, so that
// firewall rules (and the partitions of the fault tests) on a node's address
// act on exactly that node's traffic.
func NewRaftTCPTransport(cfg RaftTCPConfig) (*raft.NetworkTransport, error) {
	ln, err := net.Listen("tcp", cfg.BindAddr)
	if err != nil {
		return nil, fmt.Errorf("raft transport: listen %s: %w", cfg.BindAddr, err)
	}
	var adv net.Addr = ln.Addr()
	if cfg.Advertise != "" {
		a, err := net.ResolveTCPAddr("tcp", cfg.Advertise)
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("raft transport: advertise %s: %w", cfg.Advertise, err)
		}
		adv = a
	}
	if ta, ok := adv.(*net.TCPAddr); !ok || ta.IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("raft transport: advertise address %s is not dialable; set it explicitly", adv)
	}
	dialer := &net.Dialer{}
	if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsUnspecified() {
		dialer.LocalAddr = &net.TCPAddr{IP: ip}
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
	stream := &tcpStream{ln: ln, adv: adv, dialer: dialer}
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  stream,
		MaxPool: cfg.MaxPool,
		Timeout: cfg.Timeout,
		Logger:  logger.Named("raft-net"),
	}), nil
}

// tcpStream is a raft.StreamLayer over TCP with a bound local address.
type tcpStream struct {
	ln     net.Listener
	adv    net.Addr
	dialer *net.Dialer
}

func (s *tcpStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := *s.dialer
	d.Timeout = timeout
	return d.Dial("tcp", string(address))
}

func (s *tcpStream) Accept() (net.Conn, error) { return s.ln.Accept() }
func (s *tcpStream) Close() error              { return s.ln.Close() }
func (s *tcpStream) Addr() net.Addr            { return s.adv }
