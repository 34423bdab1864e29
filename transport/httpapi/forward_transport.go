package httpapi

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// How a follower forwards to the leader's peer port (issue 40): over
// HTTP/2 without TLS (prior knowledge; inside the peer port's TLS when it
// has one), on one connection carrying up to PeerStreamsPerConn requests
// at once. Past that, requests wait for a stream (HTTP/2's strict
// concurrency): they queue, connections do not multiply. Over HTTP/1.1 a
// follower opened one connection per request in flight: 4,500 watches
// sent to a follower held 3,164 connections on the leader's peer port
// (members pass its per-IP cap), and a legitimate acquire through it went
// from 1.4 ms to 27 ms.
const (
	// PeerStreamsPerConn bounds the requests one HTTP/2 connection to the
	// peer port carries at once (announced in its SETTINGS). It is far
	// above the API port's api.MaxStreamsPerConn: the peer port's clients
	// are members, and a follower's one connection carries every request
	// it forwards. The follower's blocking queries take at most its cap
	// (api.DefaultMaxBlockingQueries, 2,048, counted before forwarding),
	// so that watches never take every stream from forwarded acquires.
	PeerStreamsPerConn = 4096
	// ForwardConnsPerLeader bounds the connections a follower's HTTP/2
	// forwarding holds to one leader: one in use, and one more while a
	// connection that is closing (GOAWAY, a failed ping) drains.
	ForwardConnsPerLeader = 2
	// forwardPingAfter and forwardPingTimeout find a dead connection
	// (a leader gone without a reset): a ping after this long without a
	// frame, and the connection closed if it is not answered in time.
	forwardPingAfter   = 5 * time.Second
	forwardPingTimeout = 5 * time.Second
	// peerProtoTTL is how long a leader's protocol, once probed, is
	// trusted (a member upgraded in place is probed again after it).
	peerProtoTTL = time.Minute
	// probeTimeout bounds a probe's answer.
	probeTimeout = 5 * time.Second
)

// h2Preface is what an HTTP/2 client sends first (RFC 9113, 3.4), then an
// empty SETTINGS frame.
var h2Preface = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")

// forwardTransport is the default forwarding RoundTripper: HTTP/2, on
// one connection per leader (StrictMaxConcurrentRequests: a request waits
// for a free stream instead of opening a connection), to a
// peer port that speaks it (every build since issue 40), HTTP/1.1 to one
// that does not (a member of an older build, during a rolling upgrade;
// it learns which by a probe, once per peerProtoTTL per address).
type forwardTransport struct {
	dial   func(ctx context.Context, network, addr string) (net.Conn, error)
	h2, h1 *http.Transport

	mu     sync.Mutex
	protos map[string]*peerProto
}

// peerProto is what a probe of one address found; done is closed once
// h2, err and at are set.
type peerProto struct {
	done chan struct{}
	h2   bool
	err  error
	at   time.Time
}

// expired reports whether p is a settled probe older than peerProtoTTL
// (t.mu held).
func (p *peerProto) expired() bool {
	select {
	case <-p.done:
		return time.Since(p.at) >= peerProtoTTL
	default:
		return false
	}
}

func newForwardTransport(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *forwardTransport {
	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	return &forwardTransport{
		dial: dial,
		h2: &http.Transport{
			DialContext:     dial,
			Protocols:       &h2c,
			MaxConnsPerHost: ForwardConnsPerLeader,
			IdleConnTimeout: 90 * time.Second,
			HTTP2: &http.HTTP2Config{
				StrictMaxConcurrentRequests: true,
				SendPingTimeout:             forwardPingAfter,
				PingTimeout:                 forwardPingTimeout,
			},
		},
		h1: &http.Transport{
			DialContext:           dial,
			MaxIdleConnsPerHost:   64,
			IdleConnTimeout:       90 * time.Second,
			ExpectContinueTimeout: time.Second,
		},
		protos: map[string]*peerProto{},
	}
}

// RoundTrip forwards req over the protocol its host's peer port speaks.
func (t *forwardTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	h2, err := t.speaksH2(req.Context(), req.URL.Host)
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	if h2 {
		return t.h2.RoundTrip(req)
	}
	return t.h1.RoundTrip(req)
}

// CloseIdleConnections closes both transports' idle connections.
func (t *forwardTransport) CloseIdleConnections() {
	t.h2.CloseIdleConnections()
	t.h1.CloseIdleConnections()
}

// speaksH2 reports whether addr's peer port serves HTTP/2 without TLS,
// from the last probe younger than peerProtoTTL or a new one, which the
// requests arriving meanwhile share. A probe that fails fails as a dial
// does (nothing was sent), and is not kept.
func (t *forwardTransport) speaksH2(ctx context.Context, addr string) (bool, error) {
	t.mu.Lock()
	p := t.protos[addr]
	if p == nil || p.expired() {
		p = &peerProto{done: make(chan struct{})}
		t.protos[addr] = p
		go t.settle(addr, p)
	}
	t.mu.Unlock()
	select {
	case <-p.done:
		return p.h2, p.err
	case <-ctx.Done():
		return false, &net.OpError{Op: "dial", Net: "tcp", Err: ctx.Err()}
	}
}

// settle probes addr for p, and forgets p at once if the probe failed.
func (t *forwardTransport) settle(addr string, p *peerProto) {
	p.h2, p.err = t.probe(context.Background(), addr)
	p.at = time.Now()
	close(p.done)
	if p.err != nil {
		t.mu.Lock()
		if t.protos[addr] == p {
			delete(t.protos, addr)
		}
		t.mu.Unlock()
	}
}

// probe opens a connection to addr and sends HTTP/2's preface: a peer
// port that speaks HTTP/2 answers with a SETTINGS frame, one of an older
// build (HTTP/1.1 only) with an HTTP/1.1 answer to the "PRI" request it
// reads (no handler acts on it).
func (t *forwardTransport) probe(ctx context.Context, addr string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	c, err := t.dial(ctx, "tcp", addr)
	if err != nil {
		return false, err
	}
	defer c.Close()
	if d, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(d)
	}
	if _, err := c.Write(h2Preface); err != nil {
		return false, &net.OpError{Op: "dial", Net: "tcp", Err: err}
	}
	var head [9]byte
	if _, err := io.ReadFull(c, head[:]); err != nil {
		return false, &net.OpError{Op: "dial", Net: "tcp", Err: err}
	}
	return !bytes.HasPrefix(head[:], []byte("HTTP/")) && head[3] == 0x4, nil
}
