package httpapi

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/api/apitest"
	"github.com/raftlock/raftlock/transport/client"
	"github.com/raftlock/raftlock/transport/httpapi/httpapitest"
)

// serveConfigured serves h on a loopback port as raftlockd does
// (configureServer, with TLS when cfg is set) and returns its address.
func serveConfigured(t *testing.T, h http.Handler, idle, read time.Duration, cfg *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, TLSConfig: cfg, ErrorLog: log.New(io.Discard, "", 0)}
	configureServer(srv, idle, read)
	go func() {
		if cfg != nil {
			_ = srv.ServeTLS(ln, "", "")
		} else {
			_ = srv.Serve(ln)
		}
	}()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// h2Client is an HTTP client that speaks HTTP/2 only (h2c to http://).
func h2Client(t *testing.T, cfg *tls.Config) *http.Client {
	t.Helper()
	tr := &http.Transport{Protocols: client.HTTP2Only(), TLSClientConfig: cfg}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// The API port speaks HTTP/1.1 and cleartext HTTP/2 with prior knowledge
// on one plain port: a raw HTTP/1.1 request (what curl sends), one asking
// to upgrade to h2c (curl --http2; answered in HTTP/1.1, the upgrade
// ignored), Go's HTTP/1.1 client and an HTTP/2-only client are all served,
// each in its own protocol.
func TestPlainPortServesHTTP1AndH2C(t *testing.T) {
	addr := serveConfigured(t, NewServer(httpapitest.New("n1")), time.Minute, ReadTimeout, nil)
	for _, req := range []string{
		"GET /v1/health HTTP/1.1\r\nHost: x\r\nUser-Agent: curl/8\r\nAccept: */*\r\nConnection: close\r\n\r\n",
		"GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n",
	} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(conn, req); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		conn.Close()
		if err != nil {
			t.Fatalf("%q: %v", req, err)
		}
		resp.Body.Close()
		if resp.Proto != "HTTP/1.1" || resp.StatusCode != http.StatusOK {
			t.Fatalf("%q: answered %s %d, want HTTP/1.1 200", req, resp.Proto, resp.StatusCode)
		}
	}
	for name, hc := range map[string]*http.Client{"HTTP/1.1": {Transport: &http.Transport{}}, "HTTP/2.0": h2Client(t, nil)} {
		resp, err := hc.Get("http://" + addr + "/v1/health")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		resp.Body.Close()
		if resp.Proto != name || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s client: answered %s %d", name, resp.Proto, resp.StatusCode)
		}
	}
}

// Over TLS the API negotiates HTTP/2 through ALPN ("h2"), and a client
// that offers only HTTP/1.1 is still served in HTTP/1.1.
func TestTLSPortNegotiatesH2ThroughALPN(t *testing.T) {
	pki := newTestPKI(t)
	addr := serveConfigured(t, NewServer(httpapitest.New("n1")), time.Minute, ReadTimeout, pki.identity(t, "n1", true).APIConfig(false))
	h1 := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.pool()}}}
	for name, hc := range map[string]*http.Client{"HTTP/1.1": h1, "HTTP/2.0": h2Client(t, &tls.Config{RootCAs: pki.pool()})} {
		resp, err := hc.Get("https://" + addr + "/v1/health")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		resp.Body.Close()
		if resp.Proto != name || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s client over TLS: answered %s %d", name, resp.Proto, resp.StatusCode)
		}
	}
}

// The body limit holds over HTTP/2: an acquire body over api.MaxBodyBytes
// is answered too_large and reaches no call of the service.
func TestBodyLimitHoldsOverHTTP2(t *testing.T) {
	f := httpapitest.New("n1")
	addr := serveConfigured(t, NewServer(f), time.Minute, ReadTimeout, nil)
	body := `{"name":"a","session":"s","holder":"` + strings.Repeat("h", api.MaxBodyBytes) + `"}`
	resp, err := h2Client(t, nil).Post("http://"+addr+"/v1/acquire", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var reply api.ErrorReply
	if err := json.NewDecoder(resp.Body).Decode(&reply); err != nil {
		t.Fatal(err)
	}
	if resp.ProtoMajor != 2 || reply.Error.Code != string(api.CodeTooLarge) {
		t.Fatalf("an oversized body over %s: HTTP %d %+v, want too_large", resp.Proto, resp.StatusCode, reply)
	}
	if n := f.Calls("Acquire"); n != 0 {
		t.Fatalf("the service saw %d acquires, want 0", n)
	}
}

// h2conn is a hand-driven cleartext HTTP/2 connection: the tests below
// send what Go's client never would (more streams than allowed, a body
// that stops arriving) and read the server's frames as they come.
type h2conn struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
}

// HTTP/2 frame types and flags (RFC 9113 section 6).
const (
	h2Data         = 0x0
	h2Headers      = 0x1
	h2RSTStream    = 0x3
	h2Settings     = 0x4
	h2GoAway       = 0x7
	h2EndStream    = 0x1
	h2Ack          = 0x1
	h2EndHeaders   = 0x4
	h2MaxStreamsID = 0x3
)

type h2frame struct {
	typ, flags byte
	stream     uint32
	payload    []byte
}

// dialH2C opens an h2c connection: the preface and an empty SETTINGS,
// then the server's SETTINGS, acknowledged; it returns the server's
// settings.
func dialH2C(t *testing.T, addr string) (*h2conn, map[uint16]uint32) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	c := &h2conn{t: t, conn: conn, r: bufio.NewReader(conn)}
	if _, err := io.WriteString(conn, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	c.write(h2Settings, 0, 0, nil)
	f, err := c.read()
	if err != nil || f.typ != h2Settings || f.flags&h2Ack != 0 {
		t.Fatalf("the server's first frame: %+v, %v; want its SETTINGS", f, err)
	}
	settings := map[uint16]uint32{}
	for p := f.payload; len(p) >= 6; p = p[6:] {
		settings[binary.BigEndian.Uint16(p)] = binary.BigEndian.Uint32(p[2:])
	}
	c.write(h2Settings, h2Ack, 0, nil)
	return c, settings
}

func (c *h2conn) write(typ, flags byte, stream uint32, payload []byte) {
	c.t.Helper()
	hdr := make([]byte, 9, 9+len(payload))
	hdr[0], hdr[1], hdr[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	hdr[3], hdr[4] = typ, flags
	binary.BigEndian.PutUint32(hdr[5:], stream)
	if _, err := c.conn.Write(append(hdr, payload...)); err != nil {
		c.t.Fatal(err)
	}
}

func (c *h2conn) read() (h2frame, error) {
	var hdr [9]byte
	if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
		return h2frame{}, err
	}
	f := h2frame{typ: hdr[3], flags: hdr[4], stream: binary.BigEndian.Uint32(hdr[5:]) & 0x7fffffff}
	f.payload = make([]byte, int(hdr[0])<<16|int(hdr[1])<<8|int(hdr[2]))
	_, err := io.ReadFull(c.r, f.payload)
	return f, err
}

// post opens stream id with the headers of a POST to path with a body of
// length bytes (HPACK literals without indexing; no END_STREAM).
func (c *h2conn) post(id uint32, path string, length int) {
	c.t.Helper()
	lit := func(b []byte, index byte, v string) []byte { // name by static index < 15
		return append(append(b, index, byte(len(v))), v...)
	}
	block := []byte{0x83, 0x86} // :method POST, :scheme http
	block = lit(block, 0x04, path)
	block = lit(block, 0x01, "x") // :authority
	// content-length is static index 28: a 4-bit prefix of 15, then 13.
	block = append(block, 0x0f, 0x0d, byte(len(fmt.Sprint(length))))
	block = append(block, fmt.Sprint(length)...)
	c.write(h2Headers, h2EndHeaders, id, block)
}

// until reads frames until one satisfies done; it fails the test on a
// GOAWAY or an error (the connection's deadline included).
func (c *h2conn) until(what string, done func(h2frame) bool) {
	c.t.Helper()
	for {
		f, err := c.read()
		if err != nil {
			c.t.Fatalf("waiting for %s: %v", what, err)
		}
		if f.typ == h2GoAway {
			c.t.Fatalf("waiting for %s: GOAWAY %x", what, f.payload)
		}
		if done(f) {
			return
		}
	}
}

// An HTTP/2 connection carries at most api.MaxStreamsPerConn requests at
// once: the server announces it in its SETTINGS, and a stream beyond it
// is reset without reaching the service, while the others are served.
func TestHTTP2StreamsPerConnectionAreCapped(t *testing.T) {
	f := httpapitest.New("n1")
	release := make(chan struct{})
	f.SetHook(func(ctx context.Context, c apitest.Call) error {
		if c.Method != "OpenSession" {
			return nil
		}
		select { // held open until the test has tried one stream more
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	c, settings := dialH2C(t, serveConfigured(t, NewServer(f), time.Minute, ReadTimeout, nil))
	if got := settings[h2MaxStreamsID]; got != api.MaxStreamsPerConn {
		t.Fatalf("SETTINGS_MAX_CONCURRENT_STREAMS %d, want %d", got, api.MaxStreamsPerConn)
	}
	for i := range uint32(api.MaxStreamsPerConn + 1) {
		id := 2*i + 1
		c.post(id, "/v1/sessions", 2)
		c.write(h2Data, h2EndStream, id, []byte("{}"))
	}
	over := uint32(2*api.MaxStreamsPerConn + 1)
	c.until("the stream over the cap reset", func(f h2frame) bool {
		if f.stream == over && f.typ != h2RSTStream {
			t.Fatalf("the stream over the cap got a frame of type %d, want RST_STREAM", f.typ)
		}
		return f.stream == over
	})
	close(release)
	answered := map[uint32]bool{}
	c.until("every stream within the cap answered", func(f h2frame) bool {
		if (f.typ == h2Headers || f.typ == h2Data) && f.flags&h2EndStream != 0 {
			answered[f.stream] = true
		}
		return len(answered) == api.MaxStreamsPerConn
	})
	if n := f.Calls("OpenSession"); n != api.MaxStreamsPerConn {
		t.Fatalf("the service saw %d opens, want %d", n, api.MaxStreamsPerConn)
	}
}

// The read timeout holds per HTTP/2 stream: a request whose body stops
// arriving is ended (answered or reset) after ReadTimeout, while an
// acquire that waits three times as long after its body was read, on
// the same kind of connection, is answered.
func TestHTTP2StreamWithStalledBodyIsCut(t *testing.T) {
	const read = 300 * time.Millisecond
	f := httpapitest.New("n1")
	f.SetHook(func(ctx context.Context, c apitest.Call) error {
		if c.Method != "Acquire" {
			return nil
		}
		select { // the fake's stand-in for a wait: not a synchronisation
		case <-time.After(3 * read):
			return nil
		case <-ctx.Done():
			return fmt.Errorf("acquire: request context ended while waiting: %w", ctx.Err())
		}
	})
	addr := serveConfigured(t, NewServer(f), time.Minute, read, nil)
	cl, err := client.NewClient([]string{addr}, client.WithHTTP2())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.CloseIdleConnections)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	info, err := cl.OpenSession(ctx, api.OpenRequest{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Acquire(ctx, api.AcquireRequest{Name: "a", Session: info.ID, Holder: "h"}); err != nil {
		t.Fatalf("an acquire over HTTP/2 that waits after its body was read: %v", err)
	}

	c, _ := dialH2C(t, addr)
	c.post(1, "/v1/sessions", 100)
	c.write(h2Data, 0, 1, []byte(`{"ttl":`))
	c.until("the stalled stream ended", func(f h2frame) bool {
		return f.stream == 1 && (f.typ == h2RSTStream || f.flags&h2EndStream != 0 && (f.typ == h2Headers || f.typ == h2Data))
	})
}

// An HTTP/2 connection that carries no stream is closed after the idle
// timeout, as an idle HTTP/1.1 connection is.
func TestIdleHTTP2ConnectionIsClosed(t *testing.T) {
	c, _ := dialH2C(t, serveConfigured(t, NewServer(httpapitest.New("n1")), 300*time.Millisecond, ReadTimeout, nil))
	for {
		f, err := c.read()
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("an idle HTTP/2 connection was kept open")
		}
		if err != nil || f.typ == h2GoAway {
			return // GOAWAY, then the close
		}
	}
}

// A request that reaches a follower over HTTP/2 is forwarded to the
// leader (over HTTP/1.1 here: the leader is an API port, not a peer
// port, and the probe finds out) and answered as
// over HTTP/1.1: the leader serves it, the follower serves nothing.
func TestHTTP2RequestIsForwardedToTheLeader(t *testing.T) {
	leader := httpapitest.New("n1")
	lts := newTestServer(t, leader)
	follower := httpapitest.New("n2")
	follower.SetLeader(api.LeaderInfo{ID: "n1", HTTPAddr: hostOf(lts), Term: 3})
	addr := serveConfigured(t, NewServer(follower), time.Minute, ReadTimeout, nil)
	c, err := client.NewClient([]string{addr}, client.WithHTTP2())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	ctx := testCtx(t)
	s, err := c.OpenSession(ctx, api.OpenRequest{Name: "h2-via-follower"})
	if err != nil {
		t.Fatal(err)
	}
	if g, err := c.Acquire(ctx, api.AcquireRequest{Name: "f", Session: s.ID, Holder: "h"}); err != nil || g.Term != 3 {
		t.Fatalf("an acquire over HTTP/2 through a follower: %+v, %v", g, err)
	}
	if n := leader.Calls("Acquire"); n != 1 {
		t.Fatalf("the leader served %d acquires, want 1", n)
	}
	if n := follower.Calls("*"); n != 0 {
		t.Fatalf("the follower served %d calls itself", n)
	}
}

// The peer port speaks HTTP/1.1 (members' calls, older members'
// forwarding) and HTTP/2 with prior knowledge (forwarding: one connection
// carries many requests).
func TestPeerPortSpeaksHTTP1AndH2C(t *testing.T) {
	addr := string(newTLSPeerPort(t, httpapitest.New("n1"), nil).Transport.LocalAddr())
	h1 := &http.Client{Transport: &http.Transport{}}
	defer h1.CloseIdleConnections()
	resp, err := h1.Get("http://" + addr + "/v1/health")
	if err != nil {
		t.Fatalf("HTTP/1.1 to the peer port: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP/1.1 to the peer port: HTTP %d", resp.StatusCode)
	}
	resp, err = h2Client(t, nil).Get("http://" + addr + "/v1/health")
	if err != nil {
		t.Fatalf("h2c to the peer port: %v", err)
	}
	resp.Body.Close()
	if resp.Proto != "HTTP/2.0" || resp.StatusCode != http.StatusOK {
		t.Fatalf("h2c to the peer port: %s %d", resp.Proto, resp.StatusCode)
	}
}
