package stream

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
)

// startServer serves h on a loopback port until the test ends; it returns
// the address.
func startServer(t testing.TB, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// rawConn is a client connection that writes frames by hand.
type rawConn struct {
	t  testing.TB
	nc net.Conn
	br *bufio.Reader
}

func dialRaw(t testing.TB, addr string, preface []byte) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	if preface != nil {
		if _, err := nc.Write(preface); err != nil {
			t.Fatal(err)
		}
	}
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

var goodPreface = []byte{'R', 'L', 'S', 'P', api.StreamVersion}

func (c *rawConn) write(b []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

// frame reads one frame.
func (c *rawConn) frame() (frameHeader, []byte, error) {
	fh, err := readHeader(c.br, make([]byte, headerLen))
	if err != nil {
		return fh, nil, err
	}
	p := make([]byte, fh.length)
	_, err = io.ReadFull(c.br, p)
	return fh, p, err
}

// goaway reads a goaway frame and then the connection's end; it returns
// the goaway's error code.
func (c *rawConn) goaway() string {
	c.t.Helper()
	fh, p, err := c.frame()
	if err != nil {
		c.t.Fatalf("want a goaway frame, got %v", err)
	}
	if fh.typ != typeGoaway {
		c.t.Fatalf("want a goaway frame, got type %d", fh.typ)
	}
	var er api.ErrorReply
	if err := json.Unmarshal(p, &er); err != nil {
		c.t.Fatal(err)
	}
	if _, _, err := c.frame(); err == nil {
		c.t.Fatal("the connection stays open after a goaway")
	}
	return er.Error.Code
}

func okHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	})
}

// Each way a connection breaks the protocol ends it with a goaway frame
// carrying a stable code: a wrong preface or version, a frame over the
// size limit, headers (or one header value) over their limit, a malformed request, an unknown
// frame type, a request on stream 0.
func TestProtocolErrorsCloseTheConnectionWithACode(t *testing.T) {
	addr := startServer(t, &Server{Handler: okHandler()})
	oversized := appendHeader(nil, typeRequest, 1, api.MaxStreamFrameBytes+1)
	bigHeaders := appendRequest(nil, 1, "GET", "/", http.Header{"A": {strings.Repeat("x", api.MaxStreamHeaderBytes)}}, nil)
	bigValue := appendRequest(nil, 1, "GET", "/", http.Header{"A": {strings.Repeat("x", api.MaxStreamHeaderBytes+1)}}, nil)
	for _, tc := range []struct {
		name    string
		preface []byte
		frame   []byte
		code    api.Code
	}{
		{"not the preface", []byte("GET / HTTP/1.1\r\n\r\n"), nil, api.CodeInvalidArgument},
		{"another version", []byte{'R', 'L', 'S', 'P', 9}, nil, api.CodeInvalidArgument},
		{"oversized frame", goodPreface, oversized, api.CodeTooLarge},
		{"headers over the limit", goodPreface, bigHeaders, api.CodeTooLarge},
		{"one header value over the limit", goodPreface, bigValue, api.CodeTooLarge},
		{"malformed request", goodPreface, appendRequest(nil, 1, "G T", "/", nil, nil), api.CodeInvalidArgument},
		{"unknown type", goodPreface, appendHeader(nil, 9, 1, 0), api.CodeInvalidArgument},
		{"stream 0", goodPreface, appendRequest(nil, 0, "GET", "/", nil, nil), api.CodeInvalidArgument},
		{"cancel with a payload", goodPreface, append(appendHeader(nil, typeCancel, 1, 1), 0), api.CodeInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, addr, tc.preface)
			if tc.frame != nil {
				c.write(tc.frame)
			}
			if got := c.goaway(); got != string(tc.code) {
				t.Fatalf("goaway code %q, want %q", got, tc.code)
			}
		})
	}
}

// A request frame is answered through the handler, with the handler's
// status, headers and body, and many requests written at once are all
// answered on the one connection.
func TestRequestsAreServedByTheHandler(t *testing.T) {
	addr := startServer(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Echo", r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("Authorization"))
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(body)
	})})
	c := dialRaw(t, addr, goodPreface)
	var out []byte
	for i := uint32(1); i <= 50; i++ {
		out = appendRequest(out, i, "POST", "/v1/x?i=1", http.Header{"Authorization": {"Bearer s"}}, []byte("body"))
	}
	c.write(out)
	seen := map[uint32]bool{}
	for range 50 {
		fh, p, err := c.frame()
		if err != nil {
			t.Fatal(err)
		}
		a, err := decodeAnswer(p)
		if err != nil {
			t.Fatal(err)
		}
		if fh.typ != typeAnswer || a.status != http.StatusCreated || a.header.Get("X-Echo") != "POST /v1/x?i=1 Bearer s" || string(a.body) != "body" {
			t.Fatalf("answer %+v %+v", fh, a)
		}
		seen[fh.stream] = true
	}
	if len(seen) != 50 {
		t.Fatalf("%d streams answered, want 50", len(seen))
	}
}

// One request more than api.MaxStreamsInFlight on a connection is
// answered 429 resource_exhausted, and the connection keeps serving.
func TestRequestsInFlightAreBounded(t *testing.T) {
	release := make(chan struct{})
	var started atomic.Int64
	addr := startServer(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			started.Add(1)
			<-release
		}
	})})
	c := dialRaw(t, addr, goodPreface)
	var out []byte
	for i := uint32(1); i <= api.MaxStreamsInFlight+1; i++ {
		out = appendRequest(out, i, "GET", "/block", nil, nil)
	}
	c.write(out)
	fh, p, err := c.frame()
	if err != nil {
		t.Fatal(err)
	}
	a, _ := decodeAnswer(p)
	var er api.ErrorReply
	_ = json.Unmarshal(a.body, &er)
	if fh.stream != api.MaxStreamsInFlight+1 || a.status != http.StatusTooManyRequests || er.Error.Code != string(api.CodeResourceExhausted) {
		t.Fatalf("stream %d answered %d %s, want stream %d 429 resource_exhausted", fh.stream, a.status, a.body, api.MaxStreamsInFlight+1)
	}
	close(release)
	for range api.MaxStreamsInFlight {
		if _, _, err := c.frame(); err != nil {
			t.Fatal(err)
		}
	}
	c.write(appendRequest(nil, 1000, "GET", "/other", nil, nil))
	if fh, _, err := c.frame(); err != nil || fh.stream != 1000 {
		t.Fatalf("after the limit: %v %+v", err, fh)
	}
}

// A cancel frame cancels the handler's context, and no answer follows;
// so does the connection's end.
func TestCancelEndsTheHandlersContext(t *testing.T) {
	cancelled := make(chan string, 2)
	addr := startServer(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		cancelled <- r.URL.Path
	})})
	c := dialRaw(t, addr, goodPreface)
	c.write(appendRequest(nil, 5, "GET", "/wait", nil, nil))
	c.write(appendHeader(nil, typeCancel, 5, 0))
	if got := <-cancelled; got != "/wait" {
		t.Fatal(got)
	}
	c.write(appendRequest(nil, 6, "GET", "/dies", nil, nil))
	c.nc.Close()
	if got := <-cancelled; got != "/dies" {
		t.Fatal(got)
	}
}

// A connection that carries no request is closed after IdleTimeout; one
// that carries a request waiting longer is not.
func TestIdleConnectionsAreClosed(t *testing.T) {
	addr := startServer(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(300 * time.Millisecond) // a waiting request, longer than the idle timeout
		}
	}), IdleTimeout: 100 * time.Millisecond})
	c := dialRaw(t, addr, goodPreface)
	c.write(appendRequest(nil, 1, "GET", "/slow", nil, nil))
	if fh, _, err := c.frame(); err != nil || fh.stream != 1 {
		t.Fatalf("a request waiting past the idle timeout: %v", err)
	}
	if _, _, err := c.frame(); !errors.Is(err, io.EOF) {
		t.Fatalf("idle connection: %v, want EOF", err)
	}
}

// A handler that panics is answered 500 internal; the connection stays.
func TestPanickingHandlerIsAnsweredInternal(t *testing.T) {
	addr := startServer(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			panic("boom")
		}
	})})
	c := dialRaw(t, addr, goodPreface)
	c.write(appendRequest(nil, 1, "GET", "/panic", nil, nil))
	_, p, err := c.frame()
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := decodeAnswer(p); a.status != 500 || !strings.Contains(string(a.body), `"internal"`) {
		t.Fatalf("answer %d %s", a.status, a.body)
	}
	c.write(appendRequest(nil, 2, "GET", "/", nil, nil))
	if fh, _, err := c.frame(); err != nil || fh.stream != 2 {
		t.Fatalf("after a panic: %v", err)
	}
}

// The Transport cancels a stream whose request context ends: the server's
// handler sees its context cancelled, and the call returns the context's
// error.
func TestTransportCancelsTheStream(t *testing.T) {
	started, cancelled := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/wait" {
			close(started)
			<-r.Context().Done()
			close(cancelled)
		}
	})
	saddr := startServer(t, &Server{Handler: h})
	_, port, _ := net.SplitHostPort(saddr)
	hln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: Advertise(h, port)}
	go func() { _ = hs.Serve(hln) }()
	t.Cleanup(func() { hs.Close() })
	tr := &Transport{Fallback: &http.Transport{}}
	t.Cleanup(tr.CloseIdleConnections)
	base := "http://" + hln.Addr().String()
	resp, err := tr.RoundTrip(mustRequest(t, context.Background(), base+"/first"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if tr.StreamPort(hln.Addr().String()) != port {
		t.Fatalf("stream port not learned from the HTTP answer")
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := tr.RoundTrip(mustRequest(t, ctx, base+"/wait"))
		errc <- err
	}()
	<-started
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("RoundTrip: %v, want context.Canceled", err)
	}
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler's context was not cancelled")
	}
}

func mustRequest(t testing.TB, ctx context.Context, url string) *http.Request {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// A request whose connection ended between its place being reserved and
// its frame being sent is reported as not sent (the Transport then sends
// it on another connection), not as a lost answer of unknown outcome.
func TestRequestOnAnEndedConnectionIsNotSent(t *testing.T) {
	saddr := startServer(t, &Server{Handler: okHandler()})
	_, port, _ := net.SplitHostPort(saddr)
	tr := &Transport{Fallback: &http.Transport{}}
	t.Cleanup(tr.CloseIdleConnections)
	key := "127.0.0.1:1" // the HTTP address the stream port belongs to
	cc, err := tr.conn(context.Background(), key, port, false)
	if err != nil {
		t.Fatal(err)
	}
	cc.fail(errors.New("cut"))
	if _, err := cc.roundTrip(mustRequest(t, context.Background(), "http://"+key+"/"), nil); !errors.Is(err, errNotSent) {
		t.Fatalf("roundTrip on an ended connection: %v, want errNotSent", err)
	}
	tr.mu.Lock()
	tr.ports = map[string]string{key: port}
	tr.mu.Unlock()
	resp, err := tr.RoundTrip(mustRequest(t, context.Background(), "http://"+key+"/"))
	if err != nil {
		t.Fatalf("the next request, on a new connection: %v", err)
	}
	resp.Body.Close()
}

// goroutineID is the running goroutine's number, from its stack header.
func goroutineID() string {
	var b [64]byte
	s := string(b[:runtime.Stack(b[:], false)])
	s = strings.TrimPrefix(s, "goroutine ")
	return s[:strings.IndexByte(s, ' ')]
}

// workers counts the goroutines in Server.worker.
func workers() int {
	buf := make([]byte, 1<<20)
	return strings.Count(string(buf[:runtime.Stack(buf, true)]), "stream.(*Server).worker(")
}

// Requests run on goroutines that served earlier ones (their grown stacks
// kept; a handler that panicked does not end its goroutine's service),
// and the waiting ones end when the server closes.
func TestRequestGoroutinesAreReusedAndEndWithTheServer(t *testing.T) {
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			panic("boom")
		}
		_, _ = io.WriteString(w, goroutineID())
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	c := dialRaw(t, ln.Addr().String(), goodPreface)
	ids := map[string]bool{}
	const n = 50
	for i := uint32(1); i <= n; i++ {
		path := "/"
		if i%10 == 0 {
			path = "/panic"
		}
		c.write(appendRequest(nil, i, "GET", path, nil, nil))
		_, p, err := c.frame()
		if err != nil {
			t.Fatal(err)
		}
		a, err := decodeAnswer(p)
		if err != nil {
			t.Fatal(err)
		}
		if path == "/" {
			ids[string(a.body)] = true
		}
	}
	// One request at a time: a worker is back waiting for the next well
	// before it comes, bar a scheduling hiccup, which adds a worker.
	if len(ids) > n/4 {
		t.Fatalf("%d requests one at a time ran on %d goroutines", n, len(ids))
	}
	if workers() == 0 {
		t.Fatal("no worker waits for the next request")
	}
	s.Close()
	if err := <-done; !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve: %v", err)
	}
	deadline := time.Now().Add(workerIdle / 2) // sooner than they would end idle
	for workers() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d workers still wait after Close", workers())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// failingListener fails its first n accepts with err, then accepts from
// the real listener.
type failingListener struct {
	net.Listener
	mu  sync.Mutex
	n   int
	err error
}

func (l *failingListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if l.n > 0 {
		l.n--
		l.mu.Unlock()
		return nil, l.err
	}
	l.mu.Unlock()
	return l.Listener.Accept()
}

// TestServeOutlivesAcceptsThatFail pins issue 40 item 1: an accept that
// fails because the process is out of file descriptors (EMFILE, ENFILE)
// or the connection was aborted does not end Serve (raftlockd stops when
// a listener's Serve returns): the server waits, accepts again and
// serves the next connection.
func TestServeOutlivesAcceptsThatFail(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ECONNABORTED} {
		t.Run(errno.Error(), func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			fl := &failingListener{Listener: ln, n: 3,
				err: &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", errno)}}
			s := &Server{Handler: okHandler()}
			done := make(chan error, 1)
			go func() { done <- s.Serve(fl) }()
			c := dialRaw(t, ln.Addr().String(), goodPreface)
			c.write(appendRequest(nil, 1, "GET", "/v1/health", nil, nil))
			fh, p, err := c.frame()
			if err != nil || fh.typ != typeAnswer {
				t.Fatalf("after failed accepts: frame type %d, %v; want an answer", fh.typ, err)
			}
			if a, err := decodeAnswer(p); err != nil || a.status != http.StatusOK {
				t.Fatalf("answer %+v, %v after failed accepts, want 200", a, err)
			}
			select {
			case err := <-done:
				t.Fatalf("Serve returned %v after a failed accept", err)
			default:
			}
			s.Close()
			if err := <-done; !errors.Is(err, ErrServerClosed) {
				t.Errorf("Serve after Close: %v", err)
			}
		})
	}
}

// TestAClientThatNeverReadsHoldsABoundedQueue pins issue 40 item 5: a
// client that sends requests and never reads their answers used to grow
// the connection's queue of answers without bound in the node's memory
// (167 MB per 3,000 requests). Once api.MaxStreamQueuedBytes wait, the
// node reads no more of its requests, so what it holds for the client
// stays within that plus the answers of the requests in flight, however
// many requests the client sends. The client sends 90 requests at a time
// (below the in-flight cap, so none is refused) once the node has
// answered the ones before, up to 40 MB of answers; the queue is then
// watched for two seconds.
func TestAClientThatNeverReadsHoldsABoundedQueue(t *testing.T) {
	const answer = 4 << 10
	body := []byte(strings.Repeat("x", answer))
	var served atomic.Int64
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(body)
		served.Add(1)
	})}
	addr := startServer(t, s)
	c := dialRaw(t, addr, goodPreface)
	bound := api.MaxStreamQueuedBytes + api.MaxStreamsInFlight*(answer+256)
	// state returns the requests in flight and the bytes queued.
	state := func() (inFlight, queued int) {
		s.mu.Lock()
		defer s.mu.Unlock()
		for sc := range s.conns {
			sc.mu.Lock()
			inFlight += len(sc.streams)
			sc.mu.Unlock()
			queued += sc.w.queued()
		}
		return inFlight, queued
	}
	peak := 0
	var batch []byte
	for id := uint32(1); id < 10000; id += 90 {
		batch = batch[:0]
		for i := id; i < id+90; i++ {
			batch = appendRequest(batch, i, "GET", "/v1/health", nil, nil)
		}
		_ = c.nc.SetWriteDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.nc.Write(batch); err != nil {
			t.Logf("write after %d requests: %v", id-1, err)
			break // the node reads no more, and the kernel's buffers are full
		}
		// Until the node has answered every request sent, or holds a
		// full queue (and so reads no more).
		for end := time.Now().Add(10 * time.Second); ; runtime.Gosched() {
			inFlight, queued := state()
			peak = max(peak, queued)
			if queued > bound {
				t.Fatalf("%d bytes of answers queued for a client that never reads; the bound is %d", queued, bound)
			}
			if (inFlight == 0 && served.Load() == int64(id+89)) || queued >= api.MaxStreamQueuedBytes || time.Now().After(end) {
				break
			}
		}
	}
	// Then watch the queue for two seconds: the node, not reading, must
	// not grow it past the bound (a node that reads on grows it in ms).
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); runtime.Gosched() {
		_, queued := state()
		peak = max(peak, queued)
		if queued > bound {
			t.Fatalf("%d bytes of answers queued for a client that never reads; the bound is %d", queued, bound)
		}
	}
	t.Logf("peak queue for the client that never reads: %d bytes (bound %d)", peak, bound)
	if peak < api.MaxStreamQueuedBytes {
		t.Errorf("the queue peaked at %d bytes: the client's answers were never held back, the test proves nothing", peak)
	}
}
