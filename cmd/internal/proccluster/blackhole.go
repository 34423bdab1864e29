package proccluster

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Blackhole is a TCP proxy on 127.0.0.1 in front of one address, for
// partitioning a client that keeps running: while it is cut, bytes in both
// directions are read and dropped and new connections are accepted but go
// nowhere, the way a firewall's DROP (no RST) looks to both ends: calls hang
// until their own deadlines. Heal closes every connection that was open
// during the cut (their streams lost bytes) and forwards again.
type Blackhole struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	pairs map[*pipePair]struct{}
}

// pipePair is one proxied connection; dead pairs drop what they read.
type pipePair struct {
	client, server net.Conn
	mu             sync.Mutex
	dead           bool
}

func (p *pipePair) isDead() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dead
}

func (p *pipePair) kill() {
	p.mu.Lock()
	p.dead = true
	p.mu.Unlock()
}

func (p *pipePair) close() {
	p.mu.Lock()
	server := p.server
	p.mu.Unlock()
	p.client.Close()
	if server != nil {
		server.Close()
	}
}

// StartBlackhole starts a proxy to target; it stops when the test ends.
func StartBlackhole(t testing.TB, target string) *Blackhole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &Blackhole{ln: ln, target: target, pairs: map[*pipePair]struct{}{}}
	go b.accept()
	t.Cleanup(func() {
		ln.Close()
		b.mu.Lock()
		defer b.mu.Unlock()
		for p := range b.pairs {
			p.close()
		}
	})
	return b
}

// Blackholes is one Blackhole per address of a cluster.
type Blackholes []*Blackhole

// BlackholeAll starts a Blackhole in front of each of addrs.
func BlackholeAll(t testing.TB, addrs []string) Blackholes {
	t.Helper()
	var hs Blackholes
	for _, a := range addrs {
		hs = append(hs, StartBlackhole(t, a))
	}
	return hs
}

// Addrs returns the proxies' addresses, in the order of the targets.
func (hs Blackholes) Addrs() []string {
	var out []string
	for _, h := range hs {
		out = append(out, h.Addr())
	}
	return out
}

// Cut cuts every proxy.
func (hs Blackholes) Cut() {
	for _, h := range hs {
		h.Cut()
	}
}

// Heal heals every proxy.
func (hs Blackholes) Heal() {
	for _, h := range hs {
		h.Heal()
	}
}

// Addr returns the proxy's address, to give the client instead of target.
func (b *Blackhole) Addr() string { return b.ln.Addr().String() }

// Cut starts dropping everything, on open and new connections.
func (b *Blackhole) Cut() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cut = true
	for p := range b.pairs {
		p.kill()
	}
}

// Heal closes the connections open during the cut and forwards again.
func (b *Blackhole) Heal() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cut = false
	for p := range b.pairs {
		if p.isDead() {
			p.close()
			delete(b.pairs, p)
		}
	}
}

func (b *Blackhole) accept() {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		p := &pipePair{client: c}
		b.mu.Lock()
		p.dead = b.cut
		b.pairs[p] = struct{}{}
		b.mu.Unlock()
		go b.serve(p)
	}
}

// serve connects p to the target unless the cut came first, then copies
// both ways.
func (b *Blackhole) serve(p *pipePair) {
	if p.isDead() {
		_, _ = io.Copy(io.Discard, p.client)
		return
	}
	s, err := net.Dial("tcp", b.target)
	if err != nil {
		p.client.Close()
		return
	}
	p.mu.Lock()
	p.server = s
	p.mu.Unlock()
	go b.copy(p, s, p.client)
	b.copy(p, p.client, s)
}

// copy copies src to dst until either closes, dropping what it reads once
// p is dead.
func (b *Blackhole) copy(p *pipePair, dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.isDead() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				p.close()
				return
			}
		}
		if err != nil {
			if !p.isDead() {
				p.close()
			}
			return
		}
	}
}
