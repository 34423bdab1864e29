package stream

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/transport/internal/acceptwait"
)

// Server timeouts, as the HTTP API's (transport/httpapi.ConfigureServer).
const (
	// DefaultReadTimeout bounds reading one frame once its header came,
	// and the TLS handshake and preface from the connection's start.
	DefaultReadTimeout = 30 * time.Second
	// handshakeTimeout bounds the TLS handshake and the preface.
	handshakeTimeout = 10 * time.Second
	// writeTimeout bounds one write of answers to a client that does not
	// read them.
	writeTimeout = 30 * time.Second
	// workerIdle is how long a request goroutine waits for the next
	// request before it exits (Server.worker).
	workerIdle = 10 * time.Second
)

// Server serves the stream protocol: each request frame runs through
// Handler, the API's http.Handler, as the HTTP server would run it.
type Server struct {
	// Handler serves the requests (transport/httpapi.NewServer's).
	Handler http.Handler
	// TLSConfig, if set, makes connections TLS (the API's configuration;
	// ALPN is not used).
	TLSConfig *tls.Config
	// IdleTimeout closes a connection that carries no request for that
	// long (zero: api.DefaultIdleTimeout).
	IdleTimeout time.Duration
	// ReadTimeout bounds reading a frame once its first byte came (zero:
	// DefaultReadTimeout).
	ReadTimeout time.Duration
	// ErrorLog, if set, gets a line for a connection refused for a
	// malformed frame and for a handler that panicked.
	ErrorLog *log.Logger

	mu     sync.Mutex
	ln     net.Listener
	conns  map[*serverConn]struct{}
	closed bool
	wg     sync.WaitGroup

	initOnce sync.Once
	quitOnce sync.Once
	jobs     chan job      // to an idle worker (unbuffered)
	quit     chan struct{} // closed by Close: idle workers exit
}

// job is one request for a worker.
type job struct {
	c   *serverConn
	ctx context.Context
	id  uint32
	rq  request
}

func (s *Server) init() {
	s.initOnce.Do(func() {
		s.jobs = make(chan job)
		s.quit = make(chan struct{})
	})
}

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("stream: server closed")

// Serve accepts connections on ln until Close; it returns ErrServerClosed
// then, or the listener's error once it is closed (net.ErrClosed). Any
// other accept error (out of file descriptors, an aborted connection) is
// retried after a short wait, never the end of Serve.
func (s *Server) Serve(ln net.Listener) error {
	s.init()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.ln = ln
	if s.conns == nil {
		s.conns = map[*serverConn]struct{}{}
	}
	s.mu.Unlock()
	var backoff acceptwait.Backoff
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return ErrServerClosed
			}
			// Out of file descriptors and the like: wait and accept
			// again; only a closed listener ends Serve.
			if d, again := backoff.Retry(err); again {
				if d == acceptwait.First {
					s.logf("stream: accept failed, retrying until it works: %v", err)
				}
				continue
			}
			return fmt.Errorf("stream accept: %w", err)
		}
		backoff.Reset()
		c := s.newConn(nc)
		if c == nil {
			nc.Close()
			return ErrServerClosed
		}
		go c.serve()
	}
}

// Close closes the listener and every connection at once; the handlers
// running see their contexts cancelled.
func (s *Server) Close() error {
	s.init()
	s.quitOnce.Do(func() { close(s.quit) })
	s.mu.Lock()
	s.closed = true
	var err error
	if s.ln != nil {
		err = s.ln.Close()
	}
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	return err
}

// Shutdown closes the listener, lets the requests in flight finish until
// ctx ends, then closes every connection.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	if s.ln != nil {
		s.ln.Close()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
	return s.Close()
}

func (s *Server) newConn(nc net.Conn) *serverConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &serverConn{s: s, nc: nc, ctx: ctx, cancel: cancel, streams: map[uint32]context.CancelFunc{}}
	c.w.nc, c.w.timeout = nc, writeTimeout // nc becomes the TLS conn after the handshake
	c.idle = s.IdleTimeout
	if c.idle <= 0 {
		c.idle = api.DefaultIdleTimeout
	}
	c.read = s.ReadTimeout
	if c.read <= 0 {
		c.read = DefaultReadTimeout
	}
	s.conns[c] = struct{}{}
	return c
}

func (s *Server) logf(format string, args ...any) {
	if s.ErrorLog != nil {
		s.ErrorLog.Printf(format, args...)
	}
}

// serverConn is one client connection.
type serverConn struct {
	s          *Server
	nc         net.Conn
	w          connWriter
	ctx        context.Context
	cancel     context.CancelFunc
	idle, read time.Duration
	host       string
	remote     string
	tls        *tls.ConnectionState

	mu      sync.Mutex
	streams map[uint32]context.CancelFunc // the requests in flight
}

// refuse sends a goaway frame; the caller closes the connection.
func (c *serverConn) refuse(code api.Code, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	c.s.logf("stream: closing the connection of %s: %s: %s", c.remote, code, msg)
	_ = c.w.send(func(b []byte) []byte { return appendGoaway(b, code, msg) })
}

func (c *serverConn) serve() {
	defer func() {
		c.cancel()
		c.nc.Close()
		c.s.mu.Lock()
		delete(c.s.conns, c)
		c.s.mu.Unlock()
	}()
	c.remote = c.nc.RemoteAddr().String()
	c.host = c.nc.LocalAddr().String()
	_ = c.nc.SetDeadline(time.Now().Add(min(handshakeTimeout, c.read)))
	if c.s.TLSConfig != nil {
		cfg := c.s.TLSConfig.Clone()
		cfg.NextProtos = nil
		tc := tls.Server(c.nc, cfg)
		if err := tc.HandshakeContext(c.ctx); err != nil {
			return
		}
		st := tc.ConnectionState()
		c.tls = &st
		c.nc = tc
	}
	c.w.nc = c.nc
	br := bufio.NewReaderSize(c.nc, 32<<10)
	var hdr [headerLen]byte
	if _, err := io.ReadFull(br, hdr[:len(preface)+1]); err != nil {
		return
	}
	if string(hdr[:len(preface)]) != preface {
		c.refuse(api.CodeInvalidArgument, "not a raftlock stream connection (it must open with %q and a version byte)", preface)
		return
	}
	if v := hdr[len(preface)]; v != api.StreamVersion {
		c.refuse(api.CodeInvalidArgument, "stream protocol version %d; this node speaks version %d", v, api.StreamVersion)
		return
	}
	_ = c.nc.SetWriteDeadline(time.Time{})
	c.setReadDeadline()
	for {
		// A client that does not read its answers is not read either
		// once api.MaxStreamQueuedBytes of them wait (connWriter.waitRoom).
		if c.w.waitRoom(api.MaxStreamQueuedBytes) != nil {
			return
		}
		fh, err := readHeader(br, hdr[:])
		if err != nil {
			return // closed, idle, or cut
		}
		_ = c.nc.SetReadDeadline(time.Now().Add(c.read))
		switch fh.typ {
		case typeRequest:
			if fh.length > api.MaxStreamFrameBytes {
				c.refuse(api.CodeTooLarge, "request frame of %d bytes; the limit is %d", fh.length, api.MaxStreamFrameBytes)
				return
			}
			payload := make([]byte, fh.length)
			if _, err := io.ReadFull(br, payload); err != nil {
				return
			}
			rq, err := decodeRequest(payload)
			if err != nil {
				code := api.CodeInvalidArgument
				if errors.Is(err, errHeadersTooLarge) {
					code = api.CodeTooLarge
				}
				c.refuse(code, "stream %d: %v", fh.stream, err)
				return
			}
			if !c.start(fh.stream, rq) {
				return
			}
		case typeCancel:
			if fh.length != 0 {
				c.refuse(api.CodeInvalidArgument, "cancel frame with a payload of %d bytes", fh.length)
				return
			}
			c.mu.Lock()
			if cancel, ok := c.streams[fh.stream]; ok {
				delete(c.streams, fh.stream)
				cancel()
			}
			c.mu.Unlock()
		case typeGoaway:
			return
		default:
			c.refuse(api.CodeInvalidArgument, "unknown frame type %d", fh.typ)
			return
		}
		c.setReadDeadline()
	}
}

// setReadDeadline sets the read deadline of a connection between frames:
// IdleTimeout when it carries no request, none while it carries some (a
// waiting acquire may wait long without a frame).
func (c *serverConn) setReadDeadline() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.streams) == 0 {
		_ = c.nc.SetReadDeadline(time.Now().Add(c.idle))
	} else {
		_ = c.nc.SetReadDeadline(time.Time{})
	}
}

// start registers a request's stream and runs it; false: the connection
// must close (a protocol error, sent as a goaway).
func (c *serverConn) start(id uint32, rq request) bool {
	c.mu.Lock()
	if id == 0 {
		c.mu.Unlock()
		c.refuse(api.CodeInvalidArgument, "request on stream 0")
		return false
	}
	if _, dup := c.streams[id]; dup {
		c.mu.Unlock()
		c.refuse(api.CodeInvalidArgument, "request on stream %d, which is in flight", id)
		return false
	}
	if len(c.streams) >= api.MaxStreamsInFlight {
		c.mu.Unlock()
		body := errorBody(api.CodeResourceExhausted, fmt.Sprintf("%d requests in flight on this connection; the limit is %d", api.MaxStreamsInFlight, api.MaxStreamsInFlight))
		return c.w.send(func(b []byte) []byte {
			return appendAnswer(b, id, api.StatusOf(api.CodeResourceExhausted), hdrJSON, body)
		}) == nil
	}
	ctx, cancel := context.WithCancel(c.ctx)
	c.streams[id] = cancel
	c.mu.Unlock()
	c.s.wg.Add(1)
	j := job{c: c, ctx: ctx, id: id, rq: rq}
	select {
	case c.s.jobs <- j: // an idle worker takes it
	default:
		go c.s.worker(j)
	}
	return true
}

// worker serves j, then the requests idle workers are handed, until none
// comes for workerIdle or the server closes. Requests run on goroutines
// that served one before because a new goroutine's stack starts small
// and a handler grows it again (runtime.copystack, ~8 % of a leader's CPU
// at 64 clients with a goroutine per request); net/http keeps a
// goroutine per connection for the same reason, gRPC-Go has stream
// workers. The number of workers follows the requests in flight, as the
// goroutines per request did.
func (s *Server) worker(j job) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		j.c.run(j.ctx, j.id, j.rq)
		j = job{} // holds no request while idle
		idle.Reset(workerIdle)
		select {
		case j = <-s.jobs:
		case <-idle.C:
			return
		case <-s.quit:
			return
		}
	}
}

// hdrJSON is the header of an answer the server writes itself.
var hdrJSON = http.Header{"Content-Type": {"application/json"}}

// run serves one request and writes its answer, unless the client
// cancelled the stream meanwhile.
func (c *serverConn) run(ctx context.Context, id uint32, rq request) {
	defer c.s.wg.Done()
	w := &responseWriter{header: make(http.Header, 8)}
	defer func() {
		if p := recover(); p != nil {
			if p != http.ErrAbortHandler {
				c.s.logf("stream: panic serving %s %s: %v", rq.method, rq.target, p)
			}
			w = &responseWriter{header: hdrJSON.Clone(), status: http.StatusInternalServerError,
				body: errorBody(api.CodeInternal, "the request failed on the node")}
		}
		c.finish(id, w)
	}()
	u, err := url.ParseRequestURI(rq.target)
	if err != nil {
		w.header = hdrJSON.Clone()
		w.status = http.StatusBadRequest
		w.body = errorBody(api.CodeInvalidArgument, "bad request target")
		return
	}
	var body io.ReadCloser = http.NoBody
	if len(rq.body) > 0 {
		body = io.NopCloser(bytes.NewReader(rq.body))
	}
	req := (&http.Request{
		Method: rq.method, URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: rq.header, Body: body, ContentLength: int64(len(rq.body)),
		Host: c.host, RemoteAddr: c.remote, RequestURI: rq.target, TLS: c.tls,
	}).WithContext(ctx)
	c.s.Handler.ServeHTTP(w, req)
}

// finish writes a stream's answer if the stream is still open.
func (c *serverConn) finish(id uint32, w *responseWriter) {
	c.mu.Lock()
	cancel, open := c.streams[id]
	delete(c.streams, id)
	if len(c.streams) == 0 {
		_ = c.nc.SetReadDeadline(time.Now().Add(c.idle))
	}
	c.mu.Unlock()
	if !open {
		return // cancelled by the client: no answer
	}
	cancel()
	w.done()
	if err := c.w.send(func(b []byte) []byte { return appendAnswer(b, id, w.status, w.header, w.body) }); err != nil {
		c.nc.Close()
	}
}

// responseWriter collects a handler's answer.
type responseWriter struct {
	header http.Header
	status int
	body   []byte
}

// Header implements http.ResponseWriter.
func (w *responseWriter) Header() http.Header { return w.header }

// WriteHeader implements http.ResponseWriter.
func (w *responseWriter) WriteHeader(status int) {
	if w.status == 0 && status >= 200 {
		w.status = status
	}
}

// Write implements http.ResponseWriter; an answer past
// api.MaxStreamAnswerBytes fails.
func (w *responseWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if len(w.body)+len(p) > api.MaxStreamAnswerBytes {
		return 0, fmt.Errorf("stream: answer over %d bytes", api.MaxStreamAnswerBytes)
	}
	w.body = append(w.body, p...)
	return len(p), nil
}

// Flush implements http.Flusher: the answer goes whole when the handler
// returns.
func (w *responseWriter) Flush() {}

// done completes the answer as net/http would: a status, a Content-Type.
func (w *responseWriter) done() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if len(w.body) > 0 && w.header.Get("Content-Type") == "" {
		w.header.Set("Content-Type", http.DetectContentType(w.body))
	}
}
