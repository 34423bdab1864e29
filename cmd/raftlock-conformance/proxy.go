package main

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"time"
)

// proxy is a userspace TCP fault proxy on 127.0.0.1 in front of one node's
// HTTP address: the worker under test talks to the cluster only through
// proxies, so the suite can fail its network without touching the nodes.
// Faults:
//   - black hole: bytes in both directions are read and dropped and new
//     connections are accepted but go nowhere, the way a firewall's DROP
//     (no RST) looks to both ends; nothing is closed;
//   - reset: every open connection is closed with an RST (SO_LINGER 0);
//   - latency: each chunk is held for a while before it is forwarded;
//   - lost answer: the next request whose first line starts with a given
//     prefix is forwarded (so the cluster applies it) and its answer, and
//     everything after it on that connection, is dropped without a close;
//   - held answer: the next request whose first line starts with a given
//     prefix is forwarded at once and its answer held back for a while
//     (a stalled follower, for that one answer: the client's other
//     requests, on its other connections, pass on time).
//
// The proxy also records when each request line passed (requests), which is
// how the suite sees a client's keepalive cadence. It reads HTTP/1.1 request
// lines only roughly (at the start of a client chunk), which is enough for a
// client that does not pipeline.
type proxy struct {
	targets []string
	lns     []net.Listener

	mu       sync.Mutex
	cut      bool
	latency  time.Duration
	dropNext string // request-line prefix whose answer is dropped; "" none
	dropped  int    // answers dropped so far
	holdNext string // request-line prefix whose answer is held back; "" none
	holdFor  time.Duration
	held     int // held-back answers passed on so far
	conns    map[*proxyConn]struct{}
	requests []request
	closed   bool
}

// request is a request line the proxy saw and when.
type request struct {
	at   time.Time
	line string
}

// proxyConn is one client connection and its upstream.
type proxyConn struct {
	client, server net.Conn
	done           chan struct{} // closed by close
	closeOnce      sync.Once
	// mute: answers on this connection are dropped (lost answer).
	mu   sync.Mutex
	mute bool
	// holdUntil: the next answer chunk on this connection is passed on
	// no sooner (held answer); zero none.
	holdUntil time.Time
	// cutDuring: the connection was open during a black hole; heal
	// closes it, since its streams lost bytes.
	cutDuring bool
}

// startProxy listens on a free loopback port per target and forwards each
// to its target; the faults apply to all of them at once (the worker is
// cut from the whole cluster, or an answer is dropped by whichever node it
// came through).
func startProxy(targets []string) (*proxy, error) {
	p := &proxy{targets: targets, conns: make(map[*proxyConn]struct{})}
	for _, t := range targets {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			p.Close()
			return nil, err
		}
		p.lns = append(p.lns, ln)
		go p.accept(ln, t)
	}
	return p, nil
}

// Addrs are the proxy's addresses, given to the worker instead of the
// targets, in their order.
func (p *proxy) Addrs() []string {
	var out []string
	for _, ln := range p.lns {
		out = append(out, ln.Addr().String())
	}
	return out
}

// Close stops the proxy and closes its connections.
func (p *proxy) Close() {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = map[*proxyConn]struct{}{}
	p.mu.Unlock()
	for _, ln := range p.lns {
		ln.Close()
	}
	for c := range conns {
		c.close()
	}
}

// Cut starts a black hole: nothing is forwarded, nothing is closed.
func (p *proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.cutDuring = true
	}
}

// Heal ends a black hole: the connections open during it are closed (their
// streams lost bytes) and new ones are forwarded again.
func (p *proxy) Heal() {
	p.mu.Lock()
	p.cut = false
	var stale []*proxyConn
	for c := range p.conns {
		if c.cutDuring {
			stale = append(stale, c)
			delete(p.conns, c)
		}
	}
	p.mu.Unlock()
	for _, c := range stale {
		c.close()
	}
}

// Reset closes every open connection with an RST.
func (p *proxy) Reset() {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[*proxyConn]struct{}{}
	p.mu.Unlock()
	for c := range conns {
		if tc, ok := c.client.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		c.close()
	}
}

// SetLatency holds every chunk, both ways, for d before forwarding it.
func (p *proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency = d
}

// DropAnswerTo makes the proxy drop the answer to the next request whose
// request line starts with prefix (e.g. "POST /v1/acquire"), after
// forwarding the request itself.
func (p *proxy) DropAnswerTo(prefix string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropNext = prefix
}

// HoldAnswerTo makes the proxy hold back the answer to the next request
// whose request line starts with prefix (e.g. "POST /v1/acquire") for d
// after the request passed, forwarding the request itself at once.
func (p *proxy) HoldAnswerTo(prefix string, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holdNext, p.holdFor = prefix, d
}

// Held returns how many held-back answers the proxy has passed on.
func (p *proxy) Held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// Dropped returns how many answers the proxy has dropped.
func (p *proxy) Dropped() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropped
}

// Requests returns the request lines seen since since that start with
// prefix.
func (p *proxy) Requests(prefix string, since time.Time) []request {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []request
	for _, r := range p.requests {
		if !r.at.Before(since) && bytes.HasPrefix([]byte(r.line), []byte(prefix)) {
			out = append(out, r)
		}
	}
	return out
}

func (c *proxyConn) close() {
	c.closeOnce.Do(func() {
		close(c.done)
		c.client.Close()
		c.mu.Lock()
		sc := c.server
		c.mu.Unlock()
		if sc != nil {
			sc.Close()
		}
	})
}

func (p *proxy) accept(ln net.Listener, target string) {
	for {
		cc, err := ln.Accept()
		if err != nil {
			return
		}
		c := &proxyConn{client: cc, done: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			cc.Close()
			return
		}
		p.conns[c] = struct{}{}
		cut := p.cut
		c.cutDuring = cut
		p.mu.Unlock()
		go p.serve(c, target)
	}
}

// serve connects c upstream and pumps both ways.
func (p *proxy) serve(c *proxyConn, target string) {
	sc, err := net.Dial("tcp", target)
	if err != nil {
		// A dead node: the client sees its connection closed, as it would
		// see a refused one.
		p.forget(c)
		c.client.Close()
		return
	}
	c.mu.Lock()
	c.server = sc
	c.mu.Unlock()
	p.mu.Lock()
	_, open := p.conns[c]
	p.mu.Unlock()
	if !open {
		c.close()
		return
	}
	go p.pump(c, sc, c.client, false)
	p.pump(c, c.client, sc, true)
}

// pump copies from src to dst, chunk by chunk, applying the faults.
// upstream: src is the client (requests).
func (p *proxy) pump(c *proxyConn, src, dst net.Conn, upstream bool) {
	defer func() {
		p.forget(c)
		c.close()
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			p.mu.Lock()
			cut, lat := p.cut, p.latency
			if cut {
				c.cutDuring = true
			}
			if upstream && !cut {
				line := chunk
				if i := bytes.IndexByte(line, '\r'); i >= 0 {
					line = line[:i]
				}
				if looksLikeRequestLine(line) {
					p.requests = append(p.requests, request{at: time.Now(), line: redact(string(line))})
					if p.dropNext != "" && bytes.HasPrefix(line, []byte(p.dropNext)) {
						p.dropNext = ""
						p.dropped++
						c.mu.Lock()
						c.mute = true
						c.mu.Unlock()
					}
					if p.holdNext != "" && bytes.HasPrefix(line, []byte(p.holdNext)) {
						p.holdNext = ""
						c.mu.Lock()
						c.holdUntil = time.Now().Add(p.holdFor)
						c.mu.Unlock()
					}
				}
			}
			p.mu.Unlock()
			if lat > 0 {
				time.Sleep(lat) // the fault itself: this chunk is late
			}
			c.mu.Lock()
			mute := c.mute && !upstream
			var hold time.Time
			if !upstream {
				hold, c.holdUntil = c.holdUntil, time.Time{}
			}
			c.mu.Unlock()
			if !hold.IsZero() {
				time.Sleep(time.Until(hold)) // the fault itself: this answer is late
			}
			if !cut && !mute {
				if _, werr := dst.Write(chunk); werr != nil {
					return
				}
			}
			if !hold.IsZero() {
				p.mu.Lock()
				p.held++
				p.mu.Unlock()
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				p.mu.Lock()
				cut := c.cutDuring && p.cut
				p.mu.Unlock()
				if cut {
					// In a black hole a FIN is not passed on either.
					<-c.done // parked until Heal, Reset or Close closes c
				}
			}
			return
		}
	}
}

// looksLikeRequestLine reports whether line starts with an HTTP method.
func looksLikeRequestLine(line []byte) bool {
	for _, m := range []string{"GET ", "POST ", "PUT ", "DELETE ", "HEAD "} {
		if bytes.HasPrefix(line, []byte(m)) {
			return true
		}
	}
	return false
}

func (p *proxy) forget(c *proxyConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

// redact replaces the session id in a request line's path (a secret) with
// "*": "POST /v1/sessions/<id>/keepalive" → "POST /v1/sessions/*/keepalive".
func redact(line string) string {
	const sess = "/v1/sessions/"
	i := strings.Index(line, sess)
	if i < 0 {
		return line
	}
	rest := line[i+len(sess):]
	j := strings.IndexAny(rest, "/ ?")
	if j < 0 {
		j = len(rest)
	}
	return line[:i+len(sess)] + "*" + rest[j:]
}
