package stream

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/raftlock/raftlock/api"
)

// clientIdle is how long the Transport keeps a connection that carries no
// request: below the node's api.DefaultIdleTimeout, so that the client,
// not the node, closes an idle connection (a request sent as the node
// closes would have an unknown outcome).
const clientIdle = 90 * time.Second

// retryStreamAfter is how long the Transport keeps to HTTP for a node
// whose stream port did not take a connection, whatever its answers say:
// a port that a firewall drops would otherwise cost every request a dial
// timeout.
const retryStreamAfter = 30 * time.Second

// Transport is an http.RoundTripper that sends the API's requests over the
// stream protocol to the nodes that serve it, and over Fallback (HTTP) to
// the others. It learns a node's stream port from the api.HeaderStreamPort
// header of the node's HTTP answers: the first request to a node goes over
// HTTP, the next ones over one stream connection to the node's host (a
// further one only while one carries api.MaxStreamsInFlight requests).
// When the stream port does not take a connection, the Transport forgets
// it and goes back to HTTP for 30 s, then until an answer names it again. A snapshot
// download or upload always goes over HTTP (too large for a frame).
type Transport struct {
	// Fallback carries the requests to nodes without a stream port.
	Fallback http.RoundTripper
	// Dial opens connections (nil: a net.Dialer with a 5 s timeout).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// TLSConfig is used for the stream connections of https:// requests.
	TLSConfig *tls.Config

	mu    sync.Mutex
	ports map[string]string        // HTTP host:port -> stream port
	conns map[string][]*clientConn // HTTP host:port -> its stream connections
	// dialing holds a channel per HTTP host:port whose stream connection
	// is being dialed, closed when the dial ends: one dial at a time.
	dialing map[string]chan struct{}
	// failed holds when the stream port of an HTTP host:port last did not
	// take a connection (retryStreamAfter).
	failed map[string]time.Time
}

// StreamPort returns the stream port the Transport knows for the node at
// HTTP address hostport ("" if none).
func (t *Transport) StreamPort(hostport string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ports[hostport]
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	key := req.URL.Host
	port := t.StreamPort(key)
	if port == "" || !eligible(req) {
		resp, err := t.Fallback.RoundTrip(req)
		if err == nil {
			if p := resp.Header.Get(api.HeaderStreamPort); p != "" && p != port {
				t.mu.Lock()
				if t.ports == nil {
					t.ports = map[string]string{}
				}
				if time.Since(t.failed[key]) > retryStreamAfter {
					t.ports[key] = p
				}
				t.mu.Unlock()
			}
		}
		return resp, err
	}
	var body []byte
	for {
		cc, err := t.conn(req.Context(), key, port, req.URL.Scheme == "https")
		if err != nil {
			if req.Context().Err() != nil {
				return nil, err
			}
			// The stream port does not answer: over HTTP until a node's
			// answer names a stream port again.
			t.mu.Lock()
			if t.ports[key] == port {
				delete(t.ports, key)
			}
			if t.failed == nil {
				t.failed = map[string]time.Time{}
			}
			t.failed[key] = time.Now()
			t.mu.Unlock()
			return t.Fallback.RoundTrip(req)
		}
		if body == nil && req.Body != nil && req.Body != http.NoBody {
			body, err = io.ReadAll(io.LimitReader(req.Body, api.MaxBodyBytes+1))
			req.Body.Close()
			if err != nil {
				cc.release()
				return nil, fmt.Errorf("stream: read the request body: %w", err)
			}
		}
		resp, err := cc.roundTrip(req, body)
		if errors.Is(err, errNotSent) {
			continue // the connection ended before the request went: another
		}
		return resp, err
	}
}

// errNotSent is a request not sent because its connection had ended.
var errNotSent = errors.New("stream: connection ended before the request was sent")

// eligible reports whether req may go over the stream protocol: a body of
// known length within the limit, not a snapshot transfer.
func eligible(req *http.Request) bool {
	if strings.HasPrefix(req.URL.Path, "/v1/snapshot") {
		return false
	}
	if req.Body != nil && req.Body != http.NoBody && (req.ContentLength < 0 || req.ContentLength > api.MaxBodyBytes) {
		return false
	}
	return true
}

// CloseIdleConnections closes the stream connections that carry no
// request, and the Fallback's idle connections.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	for key, cs := range t.conns {
		kept := cs[:0]
		for _, cc := range cs {
			if cc.idleSince() != (time.Time{}) {
				cc.fail(errors.New("closed idle"))
				continue
			}
			kept = append(kept, cc)
		}
		t.conns[key] = kept
	}
	t.mu.Unlock()
	if ci, ok := t.Fallback.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// conn returns a live stream connection to the node at key with room for
// one more request, dialing one if there is none.
func (t *Transport) conn(ctx context.Context, key, port string, secure bool) (*clientConn, error) {
	for {
		cc, wait, err := t.pickOrDial(ctx, key, port, secure)
		if wait == nil {
			return cc, err
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// pickOrDial returns a connection with room, or dials one; if another
// goroutine is dialing, it returns that dial's channel to wait on.
func (t *Transport) pickOrDial(ctx context.Context, key, port string, secure bool) (*clientConn, chan struct{}, error) {
	t.mu.Lock()
	cs := t.conns[key]
	kept := cs[:0]
	var pick *clientConn
	now := time.Now()
	for _, cc := range cs {
		if !cc.alive() {
			continue
		}
		if since := cc.idleSince(); since != (time.Time{}) && now.Sub(since) > clientIdle {
			cc.fail(errors.New("closed idle"))
			continue
		}
		kept = append(kept, cc)
		if pick == nil && cc.reserve() {
			pick = cc
		}
	}
	if t.conns == nil {
		t.conns = map[string][]*clientConn{}
		t.dialing = map[string]chan struct{}{}
	}
	t.conns[key] = kept
	if pick != nil {
		t.mu.Unlock()
		return pick, nil, nil
	}
	if wait, ok := t.dialing[key]; ok {
		t.mu.Unlock()
		return nil, wait, nil
	}
	done := make(chan struct{})
	t.dialing[key] = done
	t.mu.Unlock()
	cc, err := t.dial(ctx, key, port, secure)
	t.mu.Lock()
	delete(t.dialing, key)
	close(done)
	if err == nil {
		cc.reserve()
		t.conns[key] = append(t.conns[key], cc)
	}
	t.mu.Unlock()
	return cc, nil, err
}

func (t *Transport) dial(ctx context.Context, key, port string, secure bool) (*clientConn, error) {
	host, _, err := net.SplitHostPort(key)
	if err != nil {
		return nil, err
	}
	dial := t.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	nc, err := dial(ctx, "tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, err
	}
	if secure {
		cfg := &tls.Config{}
		if t.TLSConfig != nil {
			cfg = t.TLSConfig.Clone()
		}
		cfg.NextProtos = nil
		if cfg.ServerName == "" {
			cfg.ServerName = host
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, err
		}
		nc = tc
	}
	if _, err := nc.Write([]byte{preface[0], preface[1], preface[2], preface[3], api.StreamVersion}); err != nil {
		nc.Close()
		return nil, err
	}
	cc := &clientConn{nc: nc, pending: map[uint32]chan result{}, next: 1, idle: time.Now()}
	cc.w = connWriter{nc: nc, timeout: writeTimeout}
	go cc.readLoop()
	return cc, nil
}

// result is what a stream's waiter gets.
type result struct {
	a   answer
	err error
}

// clientConn is one stream connection of a Transport.
type clientConn struct {
	nc net.Conn
	w  connWriter

	mu       sync.Mutex
	next     uint32
	pending  map[uint32]chan result
	reserved int       // requests about to be sent
	dead     error     // why the connection ended (nil: alive)
	idle     time.Time // since when it carries no request (zero: busy)
}

func (cc *clientConn) alive() bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.dead == nil
}

func (cc *clientConn) idleSince() time.Time {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if len(cc.pending) > 0 || cc.reserved > 0 {
		return time.Time{}
	}
	return cc.idle
}

// reserve takes a place for one request, if the connection has one.
func (cc *clientConn) reserve() bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.dead != nil || len(cc.pending)+cc.reserved >= api.MaxStreamsInFlight {
		return false
	}
	cc.reserved++
	return true
}

// fail ends the connection: every request in flight gets err.
func (cc *clientConn) fail(err error) {
	cc.mu.Lock()
	if cc.dead == nil {
		cc.dead = err
	}
	pending := cc.pending
	cc.pending = map[uint32]chan result{}
	cc.mu.Unlock()
	cc.nc.Close()
	for _, ch := range pending {
		ch <- result{err: err}
	}
}

// roundTrip sends req with body on a place reserved and waits for its
// answer.
func (cc *clientConn) roundTrip(req *http.Request, body []byte) (*http.Response, error) {
	target := req.URL.RequestURI()
	ch := make(chan result, 1)
	cc.mu.Lock()
	cc.reserved--
	if cc.dead != nil {
		cc.mu.Unlock()
		return nil, errNotSent
	}
	id := cc.next
	cc.next++
	if cc.next == 0 {
		cc.next = 1
	}
	cc.pending[id] = ch
	cc.mu.Unlock()
	if err := cc.w.send(func(b []byte) []byte { return appendRequest(b, id, req.Method, target, req.Header, body) }); err != nil {
		cc.fail(fmt.Errorf("stream connection to %s: %w", cc.nc.RemoteAddr(), err))
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, r.err
		}
		return &http.Response{
			Status: fmt.Sprintf("%d %s", r.a.status, http.StatusText(r.a.status)), StatusCode: r.a.status,
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: r.a.header,
			Body: io.NopCloser(bytes.NewReader(r.a.body)), ContentLength: int64(len(r.a.body)), Request: req,
		}, nil
	case <-req.Context().Done():
		cc.mu.Lock()
		_, open := cc.pending[id]
		delete(cc.pending, id)
		cc.markIdle()
		cc.mu.Unlock()
		if open {
			_ = cc.w.send(func(b []byte) []byte { return appendHeader(b, typeCancel, id, 0) })
		}
		return nil, req.Context().Err()
	}
}

// release gives back a place reserved and not used.
func (cc *clientConn) release() {
	cc.mu.Lock()
	cc.reserved--
	cc.markIdle()
	cc.mu.Unlock()
}

// markIdle notes when the connection became idle (cc.mu held).
func (cc *clientConn) markIdle() {
	if len(cc.pending) == 0 && cc.reserved == 0 {
		cc.idle = time.Now()
	}
}

// readLoop reads the answers and hands each to its stream's waiter.
func (cc *clientConn) readLoop() {
	br := bufio.NewReaderSize(cc.nc, 32<<10)
	var hdr [headerLen]byte
	for {
		fh, err := readHeader(br, hdr[:])
		if err != nil {
			cc.fail(fmt.Errorf("stream connection to %s lost: %w", cc.nc.RemoteAddr(), err))
			return
		}
		if fh.length > api.MaxStreamAnswerBytes {
			cc.fail(fmt.Errorf("stream connection to %s: answer frame of %d bytes; the limit is %d", cc.nc.RemoteAddr(), fh.length, api.MaxStreamAnswerBytes))
			return
		}
		payload := make([]byte, fh.length)
		if _, err := io.ReadFull(br, payload); err != nil {
			cc.fail(fmt.Errorf("stream connection to %s lost: %w", cc.nc.RemoteAddr(), err))
			return
		}
		switch fh.typ {
		case typeAnswer:
			a, err := decodeAnswer(payload)
			if err != nil {
				cc.fail(fmt.Errorf("stream connection to %s: %w", cc.nc.RemoteAddr(), err))
				return
			}
			cc.mu.Lock()
			ch, ok := cc.pending[fh.stream]
			delete(cc.pending, fh.stream)
			cc.markIdle()
			cc.mu.Unlock()
			if ok {
				ch <- result{a: a}
			}
		case typeGoaway:
			var er api.ErrorReply
			_ = json.Unmarshal(payload, &er)
			cc.fail(fmt.Errorf("stream connection to %s closed by the node: %s: %s", cc.nc.RemoteAddr(), er.Error.Code, er.Error.Message))
			return
		default:
			cc.fail(fmt.Errorf("stream connection to %s: unknown frame type %d", cc.nc.RemoteAddr(), fh.typ))
			return
		}
	}
}
