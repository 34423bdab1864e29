package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/transport/internal/bufpool"
	"github.com/raftlock/raftlock/transport/stream"

	"github.com/raftlock/raftlock/sequencer"
)

// Defaults of the Client.
const (
	// DefaultRequestTimeout bounds one HTTP request of a call that does not
	// wait; a waiting acquire gets its wait plus this.
	DefaultRequestTimeout = 10 * time.Second
	// DefaultMinBackoff and DefaultMaxBackoff bound the pause between
	// retries, which doubles from the first to the second (each pause is
	// jittered down by up to half). The cap is short because the usual
	// cause is a leader election, which takes about a second: a client
	// that backed off for longer would find the new leader late.
	DefaultMinBackoff = 25 * time.Millisecond
	DefaultMaxBackoff = 250 * time.Millisecond
	// maxResponseBytes bounds an answer the client reads.
	maxResponseBytes = 64 << 20
	// minAttemptTimeout is the least time one attempt of a call with a
	// deadline gets.
	minAttemptTimeout = 100 * time.Millisecond
	// suspectPeriod is how long an address stays suspect after an attempt
	// there found no answer because the attempt's own timeout fired or the
	// dial failed: calls start elsewhere meanwhile, and retries skip it
	// while another address is not suspect. It is short, so that a node
	// that was only slow for a moment (or restarted) is soon used again.
	suspectPeriod = 5 * time.Second
)

// Client is the Go client of the HTTP/JSON API of a raftlock cluster. It
// implements api.Backend. Any node answers (followers forward to the
// leader), so the client talks to one address at a time and moves to the
// next after a connection failure or a no_leader answer.
//
// Retries (the one retry policy of a call through it; api.Backend): every
// call is retried, with a jittered backoff doubling from 25 ms to 250 ms,
// until its ctx is done, when the request surely was not processed: a
// failed dial, or a no_leader answer. Calls that are safe to repeat are
// also retried after an unknown outcome (an unknown_outcome answer, or a
// connection lost after the request was sent): Acquire with a holder id
// (the holder id makes a retry return the same grant), Release (a repeated
// release is a no-op), KeepAlive, CloseSession, every read, and
// OpenSession (a session a lost attempt may have opened is never used and
// expires after its TTL). An Acquire without a holder id is not retried
// after an unknown outcome: it is returned as an error with code
// unknown_outcome.
//
// Leader tracking: the client learns the leader's HTTP address from every
// answer (headers X-Raftlock-Leader-Addr and X-Raftlock-Term) and from
// Cluster, when its term is not older than the one already known; calls
// then start at the leader instead of going through a follower. With the
// member sync (WithMemberSync: on by default for a client given two
// addresses or more) an address the client does not know is added to its
// list, and the list follows the cluster's members (client_sync.go), so
// that a client keeps working when every member it was given has been
// replaced; without it, only the addresses given to NewClient are used.
// An attempt at the leader that fails over to another node forgets it. An address where an attempt's
// own timeout fired without an answer (a frozen or black-holed node), or
// whose dial failed, is suspect for a few seconds (5 s) or until it answers
// again: calls do not start there and retries skip it while another address
// is not suspect. A caller that ends its ctx before the node answered
// (e.g. a waiting acquire's poll) makes neither. With WithResolver, the
// resolver's order alone decides where attempts go.
type Client struct {
	// seeds are the addresses given to NewClient (host:port); https holds
	// those given as https://host:port; learnHTTPS is the scheme of the
	// addresses the client learns from the cluster (https if any seed was).
	seeds      []string
	https      map[string]bool
	learnHTTPS bool
	// addrs is the current address list (list): the seeds at first, then
	// what the client learns from the cluster (client_sync.go).
	addrs atomic.Pointer[[]string]
	// syncEvery is the period of the member sync (WithMemberSync; <= 0:
	// off); sync is its state.
	syncEvery  time.Duration
	sync       syncState
	tls        *tls.Config
	hc         *http.Client
	timeout    time.Duration
	minBackoff time.Duration
	maxBackoff time.Duration
	cur        atomic.Uint64
	// resolve, if set, names the addresses to try before every attempt.
	resolve func() []string
	// dial, if set, opens the connections of the default HTTP client.
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// suspectFor is how long an address stays suspect: suspectPeriod
	// (tests change it, holding track.mu, under which it is read).
	suspectFor time.Duration
	// track is what the client learned about the cluster's addresses.
	track tracker
	// failFast, if positive, is how long a call may go without connecting
	// to any of its addresses before it fails with unreachable
	// (WithFailFast).
	failFast time.Duration
	// token is the ACL secret sent as Authorization: Bearer (WithToken).
	token string
	// http2 makes the default HTTP client speak HTTP/2 only (WithHTTP2).
	http2 bool
	// noStream keeps the default HTTP client off the stream protocol
	// (WithStreamProtocol(false)).
	noStream bool
}

// tracker is a Client's view of the leader and of the addresses that did
// not answer; it is used only without a resolver, and only for addresses
// in the client's list (Client.list).
type tracker struct {
	mu sync.Mutex
	// leader is the HTTP address of the known leader ("" if none) and
	// term the highest term it was learned at; term stays when the
	// leader is forgotten, so that a lagging node cannot bring back an
	// older leader.
	leader string
	term   uint64
	// suspect maps a suspect address to when it became suspect; it is
	// suspect for Client.suspectFor from then.
	suspect map[string]time.Time
	// members is the last membership digest an answer carried
	// (api.HeaderMembers): a change starts a member sync.
	members string
}

// WithResolver makes the client ask resolve for the addresses to try before
// every attempt, in order of preference (e.g. the leader first), instead of
// rotating over a fixed list. When resolve returns none, the fixed list
// given to NewClient is used. An embedded replica uses it to reach whoever
// leads now.
func WithResolver(resolve func() []string) ClientOption {
	return func(c *Client) { c.resolve = resolve }
}

// ClientOption configures a Client.
type ClientOption func(*Client)

// WithHTTPClient sets the HTTP client. Its Timeout must be zero or longer
// than the longest wait of an acquire: the Client bounds every request
// itself. A client without a Jar and a Timeout is used through its
// Transport's RoundTrip (redirects still through the client).
func WithHTTPClient(hc *http.Client) ClientOption {
	return func(c *Client) {
		if hc != nil {
			c.hc = hc
		}
	}
}

// WithDialer makes the client open its connections with dial (e.g. from a
// given local address); the HTTP client is then built for it. It is
// ignored when WithHTTPClient is given too.
func WithDialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) ClientOption {
	return func(c *Client) {
		if dial != nil {
			c.dial = dial
		}
	}
}

// WithTLS sets the TLS configuration of the client's connections to
// https:// addresses: the CA to verify the nodes against (RootCAs; nil:
// the system's roots) and, for a cluster that requires client
// certificates, the client's (Certificates). tlsconf.ClientConfig builds
// one from PEM files. It is ignored when WithHTTPClient is given too.
func WithTLS(cfg *tls.Config) ClientOption {
	return func(c *Client) { c.tls = cfg }
}

// WithHTTP2 makes the client speak HTTP/2 only: cleartext HTTP/2 with
// prior knowledge (h2c) to http:// addresses and HTTP/2 negotiated by ALPN
// to https:// ones, so that all the client's sessions and requests share
// one multiplexed connection per node (a further one only while one
// carries api.MaxStreamsPerConn requests). Every raftlockd since HTTP/2
// was added serves it; an older node, or a proxy between that speaks
// HTTP/1.1 only, refuses the connection. The default is HTTP/1.1, a
// connection per request in flight (docs/DESIGN.md, "HTTP/2"). It is
// ignored when WithHTTPClient is given too.
func WithHTTP2() ClientOption {
	return func(c *Client) { c.http2 = true }
}

// WithStreamProtocol(false) keeps the client on HTTP. By default (true)
// the client sends its requests over the stream protocol
// (transport/stream; docs/API.md, "The stream protocol") to the nodes
// that serve it (raftlockd --stream-addr; off by default): all the
// client's sessions and requests to a node share one connection, and
// many frames go in one write. Measured, it costs the leader a quarter
// to a third less CPU per request than HTTP/1.1 at 64 clients (docs/RUNS.md,
// "The stream protocol against HTTP/1.1"). A node names its stream port
// on its HTTP answers, so the first request to a node goes over HTTP, and
// HTTP stays the way to a node that serves no stream port or whose stream
// port does not answer. The option is ignored when WithHTTPClient is
// given too, and WithHTTP2 turns the stream protocol off.
func WithStreamProtocol(on bool) ClientOption {
	return func(c *Client) { c.noStream = !on }
}

// WithToken makes the client send secret, an ACL token's secret, as
// Authorization: Bearer on every request (a cluster with ACLs on refuses
// calls without one).
func WithToken(secret string) ClientOption {
	return func(c *Client) { c.token = secret }
}

// WithRetryBackoff sets the first and the longest pause between retries.
func WithRetryBackoff(min, max time.Duration) ClientOption {
	return func(c *Client) {
		if min > 0 {
			c.minBackoff = min
		}
		if max >= c.minBackoff {
			c.maxBackoff = max
		}
	}
}

// WithRequestTimeout bounds one HTTP request (default 10 s); a waiting
// acquire's request gets its wait plus this.
func WithRequestTimeout(d time.Duration) ClientOption {
	return func(c *Client) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// WithFailFast makes a call fail with code unreachable (api.ErrUnreachable)
// once, for d, it has connected to no node: every address it was given (or
// that its resolver names) failed to connect (connection refused, no route,
// no such host, a dial timeout) and none was connected to since. The
// error names each address and why, e.g. "no node answered at
// 127.0.0.1:7009 (connection refused)". A node that answers, even with
// no_leader, counts as reached: the call then retries as usual. A ctx that
// ends before d has passed ends the call as without the option.
//
// It is for tools that make a call or two and tell a person why it failed,
// such as the raftlock CLI (which uses about 1 s): a wrong address or a
// cluster that is down is then reported at once rather than when the ctx
// ends. The default (no option, or d <= 0) is to retry until the call's ctx
// is done, because a Session must survive a full restart of the cluster: on
// a fail-fast client a Session's keepalives are still retried (a failed
// keepalive is tried again), but a waiting acquire, an Unlock or a Close
// fails once no node can be connected to for d.
func WithFailFast(d time.Duration) ClientOption {
	return func(c *Client) { c.failFast = max(d, 0) }
}

// NewClient returns a client of the cluster whose nodes listen on addrs
// (host:port each, plain HTTP; https://host:port for a node that serves
// HTTPS, see WithTLS); it starts with the first, and with the leader once
// an answer named it (see Client).
func NewClient(addrs []string, opts ...ClientOption) (*Client, error) {
	c := &Client{timeout: DefaultRequestTimeout, minBackoff: DefaultMinBackoff, maxBackoff: DefaultMaxBackoff,
		suspectFor: suspectPeriod, https: map[string]bool{}, syncEvery: syncUnset}
	for _, a := range addrs {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		hostport, secure, err := splitScheme(a)
		if err != nil {
			return nil, err
		}
		if slices.Contains(c.seeds, hostport) && c.https[hostport] != secure {
			return nil, fmt.Errorf("raftlock client: address %s given both with and without https://", hostport)
		}
		c.seeds = append(c.seeds, hostport)
		c.https[hostport] = secure
		c.learnHTTPS = c.learnHTTPS || secure
	}
	seeds := slices.Clone(c.seeds)
	c.addrs.Store(&seeds)
	for _, o := range opts {
		o(c)
	}
	if c.syncEvery == syncUnset {
		// A client given one address talks to that node (a probe of one
		// node, a reader pinned to it); one given the members follows them.
		c.syncEvery = 0
		if len(c.seeds) >= 2 {
			c.syncEvery = DefaultMemberSync
		}
	}
	if len(c.seeds) == 0 && c.resolve == nil {
		return nil, errors.New("raftlock client: no address")
	}
	if c.maxBackoff < c.minBackoff {
		c.maxBackoff = c.minBackoff
	}
	if c.hc == nil {
		dial := c.dial
		if dial == nil {
			dial = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
		}
		tr := &http.Transport{
			DialContext:           dial,
			TLSClientConfig:       c.tls,
			MaxIdleConnsPerHost:   64,
			IdleConnTimeout:       90 * time.Second,
			ExpectContinueTimeout: time.Second,
		}
		if c.http2 {
			tr.Protocols = HTTP2Only()
		}
		c.hc = &http.Client{Transport: tr}
		if !c.noStream && !c.http2 {
			c.hc.Transport = &stream.Transport{Fallback: tr, Dial: dial, TLSConfig: c.tls}
		}
	}
	return c, nil
}

// HTTP2Only is the protocol set of a transport that speaks HTTP/2 alone:
// h2c with prior knowledge to http:// URLs, h2 through ALPN to https://
// ones (WithHTTP2; a program that builds its own http.Transport for
// WithHTTPClient sets it as the transport's Protocols).
func HTTP2Only() *http.Protocols {
	var p http.Protocols
	p.SetHTTP2(true)
	p.SetUnencryptedHTTP2(true)
	return &p
}

// splitScheme reads a node's address: host:port, http://host:port or
// https://host:port; it returns host:port and whether it is https.
func splitScheme(a string) (hostport string, secure bool, err error) {
	hostport = a
	if rest, ok := strings.CutPrefix(a, "https://"); ok {
		hostport, secure = rest, true
	} else if rest, ok := strings.CutPrefix(a, "http://"); ok {
		hostport = rest
	}
	hostport = strings.TrimSuffix(hostport, "/")
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", false, fmt.Errorf("raftlock client: address %q: %w", a, err)
	}
	if host == "" || port == "" {
		return "", false, fmt.Errorf("raftlock client: address %q: want host:port or https://host:port", a)
	}
	return hostport, secure, nil
}

// url is the URL of path (escaped) at addr, https if addr was given so.
func (c *Client) url(addr, path string) string {
	secure, given := c.https[addr]
	if !given {
		secure = c.learnHTTPS
	}
	if secure {
		return "https://" + addr + path
	}
	return "http://" + addr + path
}

// tlsRefused returns the error of a TLS handshake that failed (a
// certificate not verified, one refused by the node, a node that does not
// speak TLS), nil for any other error: the request was surely not served.
func tlsRefused(err error) error {
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var ci x509.CertificateInvalidError
	var rh tls.RecordHeaderError
	var op *net.OpError
	switch {
	case errors.As(err, &cv):
		return cv
	case errors.As(err, &ua):
		return ua
	case errors.As(err, &he):
		return he
	case errors.As(err, &ci):
		return ci
	case errors.As(err, &rh):
		return fmt.Errorf("the node does not speak TLS (%w); use host:port without https://", rh)
	case errors.As(err, &op) && op.Op == "remote error":
		// A TLS alert from the node: e.g. "tls: certificate required".
		return op.Err
	}
	return nil
}

// CloseIdleConnections closes the client's idle connections.
func (c *Client) CloseIdleConnections() { c.hc.CloseIdleConnections() }

var _ api.Backend = (*Client)(nil)

// call is one API call.
type call struct {
	method, path string
	query        url.Values
	// queryFunc, if set, builds the query before every attempt.
	queryFunc func() url.Values
	// body returns the request body (nil: none) and the timeout of one
	// attempt; it runs before every attempt.
	body func() (any, time.Duration)
	out  any
	// idempotent calls (safe to repeat; see Client) are retried after an
	// unknown outcome.
	idempotent bool
	// uncertain is set when an attempt's outcome was unknown.
	uncertain bool
	// accept, if set, takes a non-2xx answer for a success (decoded into
	// out) when it returns true: GET /v1/health's 503 carries its body.
	accept func(status int, data []byte) bool
}

// attemptError is the outcome of one failed attempt.
type attemptError struct {
	err *api.Error
	// rotate: the node did not serve; try the next address.
	rotate bool
	// dial, if set, is why the connection could not be opened (no node
	// was reached).
	dial error
}

// unreached is a call's current run of failed dials (WithFailFast): since
// when no attempt has connected to a node, and why each address failed.
type unreached struct {
	since time.Time
	why   map[string]error
}

// note records an attempt at addr: a failed dial (dial non-nil) extends
// the run, a connection ends it.
func (u *unreached) note(addr string, dial error) {
	if dial == nil {
		u.since, u.why = time.Time{}, nil
		return
	}
	if u.why == nil {
		u.since, u.why = time.Now(), map[string]error{}
	}
	u.why[addr] = dial
}

// check returns the unreachable error once every address of addrs failed
// to connect in the run and the run has lasted d; nil before.
func (u *unreached) check(addrs []string, d time.Duration) *api.Error {
	if u.why == nil || time.Since(u.since) < d {
		return nil
	}
	var tried, parts, causes []string
	for _, a := range addrs {
		err, ok := u.why[a]
		if !ok {
			return nil
		}
		if slices.Contains(tried, a) {
			continue
		}
		cause := dialCause(err)
		tried, parts = append(tried, a), append(parts, a+" ("+cause+")")
		if !slices.Contains(causes, cause) {
			causes = append(causes, cause)
		}
	}
	if len(causes) == 1 { // say the one cause once
		return api.Errorf(api.CodeUnreachable, "no node answered at %s (%s)", strings.Join(tried, ", "), causes[0])
	}
	return api.Errorf(api.CodeUnreachable, "no node answered at %s", strings.Join(parts, ", "))
}

// dialCause is the innermost error of a failed dial: "connection refused"
// rather than "dial tcp 127.0.0.1:7009: connect: connection refused".
func dialCause(err error) string {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}

// do runs a call with retries; it returns the answer's header.
func (c *Client) do(ctx context.Context, cl *call) (http.Header, error) {
	backoff := c.minBackoff
	var last *api.Error
	var unreach unreached // this call's failed dials, with WithFailFast
	var rotated uint64    // failed attempts of this call that asked to rotate
	var failed []string   // addresses where this call's attempts asked to rotate
	for {
		c.maybeSync(false)
		idx := c.cur.Load()
		addrs := c.list()
		pos, viaLeader := idx, false
		if c.resolve != nil {
			if r := c.resolve(); len(r) > 0 {
				// The resolver's order is its preference: start with its first
				// address and move on only after this call's failures.
				addrs, idx, pos = r, rotated, rotated
			}
		} else {
			pos, viaLeader = c.pick(addrs, idx, failed)
		}
		if len(addrs) == 0 {
			last = api.Errorf(api.CodeNoLeader, "no address to reach the cluster at")
			if err := sleepCtx(ctx, backoff); err != nil {
				return nil, fmt.Errorf("raftlock %s %s: %w (gave up: %w)", cl.method, cl.path, last, err)
			}
			backoff = min(2*backoff, c.maxBackoff)
			continue
		}
		addr := addrs[pos%uint64(len(addrs))]
		hdr, ae, err := c.attempt(ctx, addr, cl)
		if err != nil {
			if last != nil && ctx.Err() != nil {
				// Report why the earlier attempts failed, not just the ctx.
				return nil, fmt.Errorf("raftlock %s %s via %s: %w (gave up: %w)", cl.method, cl.path, addr, last, err)
			}
			return nil, fmt.Errorf("raftlock %s %s via %s: %w", cl.method, cl.path, addr, err)
		}
		if ae == nil {
			return hdr, nil
		}
		if c.failFast > 0 {
			unreach.note(addr, ae.dial)
			if e := unreach.check(addrs, c.failFast); e != nil {
				return nil, fmt.Errorf("raftlock %s %s: %w", cl.method, cl.path, e)
			}
		}
		last = ae.err
		code := ae.err.Code
		if code == api.CodeUnknownOutcome {
			cl.uncertain = true
		}
		retry := code == api.CodeNoLeader || (code == api.CodeUnknownOutcome && cl.idempotent)
		if ae.rotate {
			rotated++
			failed = append(failed, addr)
			if c.resolve == nil && coversAll(failed, addrs) {
				// Every address this call knows failed: ask the cluster
				// (and the seeds) where its members are now.
				c.maybeSync(true)
			}
			if viaLeader {
				// The leader's address is not where c.cur points, unless
				// it happens to be.
				c.moveOn(addr)
			} else {
				// Another goroutine may have rotated already.
				c.cur.CompareAndSwap(idx, pos+1)
			}
		}
		if !retry {
			return nil, fmt.Errorf("raftlock %s %s via %s: %w", cl.method, cl.path, addr, ae.err)
		}
		if err := sleepCtx(ctx, backoff); err != nil {
			return nil, fmt.Errorf("raftlock %s %s via %s: %w (gave up: %w)", cl.method, cl.path, addr, ae.err, err)
		}
		backoff = min(2*backoff, c.maxBackoff)
	}
}

// sleepCtx waits between d/2 and d (jittered, so that many clients
// retrying after one leader loss do not arrive together) or until ctx is
// done (then it returns ctx's error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d > 1 {
		d -= rand.N(d / 2)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// attempt sends one request. A non-nil error ends the call at once (ctx
// done, a request that cannot be built); an attemptError may be retried.
func (c *Client) attempt(ctx context.Context, addr string, cl *call) (http.Header, *attemptError, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	timeout := c.timeout
	if dl, ok := ctx.Deadline(); ok {
		// An attempt takes at most half of what the caller has left, so
		// that a node that does not answer (frozen, black-holed) leaves
		// time for another attempt at the next address.
		timeout = min(timeout, max(time.Until(dl)/2, minAttemptTimeout))
	}
	var body io.Reader
	if cl.body != nil {
		v, t := cl.body()
		if t > 0 {
			timeout = t
		}
		if v != nil {
			data, err := encodeRequest(v)
			if err != nil {
				return nil, nil, fmt.Errorf("encode request: %w", err)
			}
			body = bytes.NewReader(data)
		}
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// cl.path is already escaped.
	u := c.url(addr, cl.path)
	q := cl.query
	if cl.queryFunc != nil {
		q = cl.queryFunc()
	}
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(rctx, cl.method, u, body)
	if err != nil {
		return nil, nil, fmt.Errorf("build request: %w", err)
	}
	setRequestHeaders(req.Header, c.token, body != nil)
	resp, err := c.send(req)
	if err != nil {
		if ctx.Err() != nil {
			// The caller gave up on this node before it answered: the
			// next call starts at the next address, so that a frozen or
			// black-holed node does not keep every later call.
			c.moveOn(addr)
			return nil, nil, ctx.Err()
		}
		var op *net.OpError
		var dialErr error
		if errors.As(err, &op) && op.Op == "dial" {
			dialErr = op
		} else if te := tlsRefused(err); te != nil {
			// A TLS handshake that failed is a failed dial: nothing was
			// served (a node that refuses a client's certificate under TLS
			// 1.3 says so only after the request was written).
			dialErr = te
		}
		dialFailed := dialErr != nil
		c.noAnswer(addr, dialFailed || rctx.Err() != nil)
		if dialFailed || cl.method == http.MethodGet {
			// Surely not processed (or a read): no_leader, try another node.
			ae := &attemptError{rotate: true, err: api.Errorf(api.CodeNoLeader, "cannot reach %s: %v", addr, err)}
			if dialFailed {
				ae.dial = dialErr
			}
			return nil, ae, nil
		}
		return nil, &attemptError{rotate: true, err: api.Errorf(api.CodeUnknownOutcome,
			"connection to %s failed after the request was sent: %v; it may or may not have been processed", addr, err)}, nil
	}
	defer resp.Body.Close()
	buf := bufpool.Get()
	defer bufpool.Put(buf)
	data, err := bufpool.ReadAll(io.LimitReader(resp.Body, maxResponseBytes), (*buf)[:0])
	*buf = data[:0]
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		c.noAnswer(addr, rctx.Err() != nil)
		code := api.CodeUnknownOutcome
		if cl.method == http.MethodGet {
			code = api.CodeNoLeader
		}
		return nil, &attemptError{rotate: true, err: api.Errorf(code, "reading the answer of %s: %v", addr, err)}, nil
	}
	hdr, ae, err := c.answer(addr, cl, resp, data)
	c.answered(addr, resp.Header, ae != nil && ae.rotate)
	return hdr, ae, err
}

// answer classifies a node's whole answer (attempt's results).
func (c *Client) answer(addr string, cl *call, resp *http.Response, data []byte) (http.Header, *attemptError, error) {
	if resp.StatusCode/100 == 2 || (cl.accept != nil && cl.accept(resp.StatusCode, data)) {
		if cl.out != nil && !decodeFastAnswer(data, cl.out) {
			if err := json.Unmarshal(data, cl.out); err != nil {
				if resp.Header.Get(api.HeaderTerm) == "" {
					return nil, &attemptError{rotate: true, err: notRaftlock(addr, resp.StatusCode)}, nil
				}
				return nil, nil, fmt.Errorf("decode answer (HTTP %d): %w", resp.StatusCode, err)
			}
		}
		return resp.Header, nil, nil
	}
	var er api.ErrorReply
	if err := json.Unmarshal(data, &er); err == nil && er.Error.Code != "" {
		e := &api.Error{Code: api.Code(er.Error.Code), Message: er.Error.Message}
		return nil, &attemptError{err: e, rotate: e.Code == api.CodeNoLeader}, nil
	}
	// Not an API answer: something between us and the node.
	text := strings.TrimSpace(string(data))
	if len(text) > 200 {
		text = text[:200] + "..."
	}
	switch resp.StatusCode {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return nil, &attemptError{rotate: true, err: api.Errorf(api.CodeNoLeader, "%s: HTTP %d: %s", addr, resp.StatusCode, text)}, nil
	}
	if strings.Contains(text, "HTTP request to an HTTPS server") {
		text += " (use https://" + addr + ")"
	} else if resp.Header.Get(api.HeaderTerm) == "" {
		// Every answer of a raftlock node carries its term: this is some
		// other server. Another address may be a node.
		return nil, &attemptError{rotate: true, err: notRaftlock(addr, resp.StatusCode)}, nil
	}
	return nil, &attemptError{err: api.Errorf(api.CodeInternal, "%s: HTTP %d: %s", addr, resp.StatusCode, text)}, nil
}

// notRaftlock is the error of an answer from a server that is not a
// raftlock node (no X-Raftlock-Term header, no API error body): a wrong
// --addr, e.g. another service's port.
func notRaftlock(addr string, status int) *api.Error {
	return api.Errorf(api.CodeUnreachable, "%s is not a raftlock node: it answered HTTP %d without raftlock's headers; check the address (a node's --http-addr)", addr, status)
}

// pick chooses where the next attempt of a call without a resolver goes
// among addrs (the client's list as the call read it), c.cur being idx:
// the known leader, unless it is suspect or an attempt of this call at it
// asked to rotate (in failed); otherwise the first address
// from idx on that is not suspect, or idx's if all are. It returns the
// position in addrs (modulo its length) and whether it is the leader's.
func (c *Client) pick(addrs []string, idx uint64, failed []string) (pos uint64, viaLeader bool) {
	n := uint64(len(addrs))
	now := time.Now()
	t := &c.track
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.leader != "" && !c.suspectLocked(t.leader, now) && !slices.Contains(failed, t.leader) {
		if i := slices.Index(addrs, t.leader); i >= 0 {
			return uint64(i), true
		}
	}
	for k := range n {
		if !c.suspectLocked(addrs[(idx+k)%n], now) {
			return idx + k, false
		}
	}
	return idx, false
}

// suspectLocked reports whether addr is suspect at now, forgetting an
// expired suspicion. c.track.mu is held.
func (c *Client) suspectLocked(addr string, now time.Time) bool {
	since, ok := c.track.suspect[addr]
	if ok && now.Sub(since) >= c.suspectFor {
		delete(c.track.suspect, addr)
		ok = false
	}
	return ok
}

// noAnswer records an attempt at addr that got no answer although the
// caller still waited: the client forgets addr as the leader, and makes
// addr suspect if suspect is set (the attempt's own timeout fired, or the
// dial failed).
func (c *Client) noAnswer(addr string, suspect bool) {
	if c.resolve != nil {
		return
	}
	t := &c.track
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.leader == addr {
		t.leader = ""
	}
	if suspect {
		if t.suspect == nil {
			t.suspect = make(map[string]time.Time)
		}
		t.suspect[addr] = time.Now()
	}
}

// answered records a whole answer of addr with header h: addr is no longer
// suspect; if the answer asks to rotate (failed), addr is no longer taken
// for the leader and cannot name itself the leader; and the leader the
// answer names is learned (see learn).
func (c *Client) answered(addr string, h http.Header, failed bool) {
	if c.resolve != nil {
		return
	}
	t := &c.track
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.suspect, addr)
	if failed && t.leader == addr {
		t.leader = ""
	}
	if m := h.Get(api.HeaderMembers); m != "" && m != t.members {
		// The membership changed (or this is the first answer to say
		// it): learn the members now, not at the next period, so that a
		// rotation of every member leaves the client an address.
		// Kept until a sync starts (at most one a second).
		if t.members == "" || c.maybeSync(true) {
			t.members = m
		}
	}
	if la := h.Get(api.HeaderLeaderAddr); la != "" && !(failed && la == addr) {
		c.learnLocked(la, termOf(h))
	}
}

// learn takes leader, an HTTP address, for the leader at term.
func (c *Client) learn(leader string, term uint64) {
	if c.resolve != nil {
		return
	}
	c.track.mu.Lock()
	defer c.track.mu.Unlock()
	c.learnLocked(leader, term)
}

// learnLocked takes leader for the leader at term if term is not older
// than the known leader's and leader is one of the client's addresses;
// with the member sync on, an address the client does not know yet is
// added first (addLearned), so that a client follows the cluster through
// a rotation of its members. c.track.mu is held.
func (c *Client) learnLocked(leader string, term uint64) {
	t := &c.track
	if slices.Contains(c.seeds, leader) {
		// The given addresses are the members' own: follow the cluster.
		c.sync.active.Store(true)
	}
	if term < t.term {
		return
	}
	if !slices.Contains(c.list(), leader) {
		if !c.addLearned(leader) {
			return
		}
	}
	t.leader, t.term = leader, term
}

// moveOn makes the client start its next call at the address after addr,
// unless another call has moved on already.
func (c *Client) moveOn(addr string) {
	if c.resolve != nil {
		return // the resolver decides where calls start
	}
	idx := c.cur.Load()
	if addrs := c.list(); len(addrs) > 0 && addrs[idx%uint64(len(addrs))] == addr {
		c.cur.CompareAndSwap(idx, idx+1)
	}
}

func fixed(v any) func() (any, time.Duration) {
	return func() (any, time.Duration) { return v, 0 }
}

func termOf(h http.Header) uint64 {
	t, _ := strconv.ParseUint(h.Get(api.HeaderTerm), 10, 64)
	return t
}

// OpenSession opens a session. It is retried after an unknown outcome too:
// a session the lost attempt may have opened is never used, holds no lock,
// and expires after its TTL.
func (c *Client) OpenSession(ctx context.Context, req api.OpenRequest) (api.Info, error) {
	var out api.OpenSessionReply
	cl := &call{method: http.MethodPost, path: "/v1/sessions", out: &out, idempotent: true,
		body: fixed(api.OpenSessionBody{Name: req.Name, TTL: api.WireDuration(req.TTL), LockDelay: api.WireLockDelay(req.LockDelay)})}
	if _, err := c.do(ctx, cl); err != nil {
		return api.Info{}, err
	}
	info, err := api.SessionReply{ID: out.ID, Name: req.Name, TTL: out.TTL, LockDelay: out.LockDelay}.Info()
	if err != nil {
		return api.Info{}, fmt.Errorf("raftlock open session: %w", err)
	}
	return info, nil
}

// KeepAlive extends a session's lease and returns its TTL and the
// session's revoked grants. The caller should count the lease from before
// the call.
func (c *Client) KeepAlive(ctx context.Context, id string) (api.KeepAliveAnswer, error) {
	var out api.KeepAliveReply
	cl := &call{method: http.MethodPost, path: "/v1/sessions/" + url.PathEscape(id) + "/keepalive", out: &out, idempotent: true}
	if _, err := c.do(ctx, cl); err != nil {
		return api.KeepAliveAnswer{}, err
	}
	a, err := out.Answer()
	if err != nil {
		return api.KeepAliveAnswer{}, fmt.Errorf("raftlock keepalive: %w", err)
	}
	return a, nil
}

// CloseSession ends a session, releasing its locks at once. When an
// earlier attempt's outcome was unknown and a retry finds the session gone,
// the close is reported as done.
func (c *Client) CloseSession(ctx context.Context, id string) error {
	cl := &call{method: http.MethodDelete, path: "/v1/sessions/" + url.PathEscape(id), out: &api.CloseReply{}, idempotent: true}
	_, err := c.do(ctx, cl)
	if err != nil && cl.uncertain && errors.Is(err, api.ErrSessionNotFound) {
		return nil
	}
	return err
}

// SessionInfo describes a session.
func (c *Client) SessionInfo(ctx context.Context, id string) (api.Info, error) {
	var out api.SessionReply
	cl := &call{method: http.MethodGet, path: "/v1/sessions/" + url.PathEscape(id), out: &out, idempotent: true}
	if _, err := c.do(ctx, cl); err != nil {
		return api.Info{}, err
	}
	info, err := out.Info()
	if err != nil {
		return api.Info{}, fmt.Errorf("raftlock session info: %w", err)
	}
	return info, nil
}

// Acquire takes a lock (Wait 0: try once; otherwise wait in the lock's
// queue up to Wait). A retried attempt asks for the wait that remains, so
// the whole call waits about Wait at most; the ctx can end it sooner. The
// Grant's Term is the X-Raftlock-Term of the answer.
func (c *Client) Acquire(ctx context.Context, req api.AcquireRequest) (api.Grant, error) {
	var out api.GrantReply
	mode := ""
	if req.Mode != 0 {
		mode = req.Mode.String()
	}
	start := time.Now()
	cl := &call{method: http.MethodPost, path: "/v1/acquire", out: &out, idempotent: req.Holder != "",
		body: func() (any, time.Duration) {
			b := api.AcquireBody{Name: req.Name, Session: req.Session, Holder: req.Holder, Mode: mode, Value: req.Value,
				Permits: req.Permits}
			if req.MaxHold != 0 {
				b.MaxHold = req.MaxHold.String()
			}
			if req.Wait <= 0 {
				b.Wait = api.WireDuration(req.Wait)
				return b, 0
			}
			left := req.Wait - time.Since(start)
			if left < time.Millisecond {
				left = time.Millisecond // still a wait: wait_timeout, not lock_busy
			}
			b.Wait = left.String()
			return b, left + c.timeout
		}}
	hdr, err := c.do(ctx, cl)
	if err != nil {
		return api.Grant{}, err
	}
	g, err := out.Grant(termOf(hdr))
	if err != nil {
		return api.Grant{}, fmt.Errorf("raftlock acquire %s: %w", req.Name, err)
	}
	return g, nil
}

// Release gives a lock up.
func (c *Client) Release(ctx context.Context, req api.ReleaseRequest) error {
	cl := &call{method: http.MethodPost, path: "/v1/release", out: &api.ReleaseReply{}, idempotent: true,
		body: fixed(api.ReleaseBody{Name: req.Name, Session: req.Session, Holder: req.Holder})}
	_, err := c.do(ctx, cl)
	return err
}

// LockState returns the state of one lock.
func (c *Client) LockState(ctx context.Context, name string) (api.LockState, error) {
	var out api.LockReply
	cl := &call{method: http.MethodGet, path: "/v1/lock", query: url.Values{"name": {name}}, out: &out, idempotent: true}
	if _, err := c.do(ctx, cl); err != nil {
		return api.LockState{}, err
	}
	l, err := out.State()
	if err != nil {
		return api.LockState{}, fmt.Errorf("raftlock lock: %w", err)
	}
	return l, nil
}

// WatchLock is a blocking query (GET /v1/lock?name=&index=&wait=): it
// answers once the lock's index is above index, or with the current state
// after wait (zero: the server's default, api.DefaultWatchWait). A
// retried attempt asks for the wait that remains.
func (c *Client) WatchLock(ctx context.Context, name string, index uint64, wait time.Duration) (api.LockState, error) {
	if wait <= 0 {
		wait = api.DefaultWatchWait
	}
	var out api.LockReply
	start := time.Now()
	cl := &call{method: http.MethodGet, path: "/v1/lock", out: &out, idempotent: true,
		body: func() (any, time.Duration) {
			left := wait - time.Since(start)
			if left < time.Millisecond {
				left = time.Millisecond
			}
			return nil, left + c.timeout
		}}
	cl.queryFunc = func() url.Values {
		left := wait - time.Since(start)
		if left < time.Millisecond {
			left = time.Millisecond
		}
		return url.Values{"name": {name}, "index": {strconv.FormatUint(index, 10)}, "wait": {left.String()}}
	}
	if _, err := c.do(ctx, cl); err != nil {
		return api.LockState{}, err
	}
	l, err := out.State()
	if err != nil {
		return api.LockState{}, fmt.Errorf("raftlock watch %s: %w", name, err)
	}
	return l, nil
}

// Locks lists the locks whose names start with prefix, in name order,
// asking for them page by page (LocksPage, the server's default page, so
// that its first request is the one a server from before pages answers in
// full): every lock that exists throughout the listing is in it exactly
// once.
func (c *Client) Locks(ctx context.Context, prefix string) ([]api.LockState, error) {
	ls := []api.LockState{}
	q := api.LocksQuery{Prefix: prefix}
	for {
		page, err := c.LocksPage(ctx, q)
		if err != nil {
			return nil, err
		}
		ls = append(ls, page.Locks...)
		if page.Next == "" {
			return ls, nil
		}
		q.After = page.Next
	}
}

// LocksPage lists one page of the locks: at most q.Limit (zero: the
// server's default page) whose names start with q.Prefix and sort after
// q.After, in name order, and the cursor of the next page.
func (c *Client) LocksPage(ctx context.Context, q api.LocksQuery) (api.LocksPage, error) {
	var out api.LocksReply
	cl := &call{method: http.MethodGet, path: "/v1/locks", out: &out, idempotent: true, query: url.Values{}}
	for k, v := range map[string]string{"prefix": q.Prefix, "after": q.After} {
		if v != "" {
			cl.query.Set(k, v)
		}
	}
	if q.Limit != 0 {
		cl.query.Set("limit", strconv.Itoa(q.Limit))
	}
	if _, err := c.do(ctx, cl); err != nil {
		return api.LocksPage{}, err
	}
	page := api.LocksPage{Locks: make([]api.LockState, 0, len(out.Locks)), Next: out.Next}
	for _, l := range out.Locks {
		st, err := l.State()
		if err != nil {
			return api.LocksPage{}, fmt.Errorf("raftlock locks: %w", err)
		}
		page.Locks = append(page.Locks, st)
	}
	if page.Next != "" && page.Next <= q.After {
		return api.LocksPage{}, api.Errorf(api.CodeInternal, "raftlock locks: the server's next page %q does not follow %q", page.Next, q.After)
	}
	return page, nil
}

// CheckSequencer asks whether a sequencer is still current.
func (c *Client) CheckSequencer(ctx context.Context, seq string) (api.SequencerCheck, error) {
	var out api.CheckReply
	cl := &call{method: http.MethodPost, path: "/v1/sequencer/check", out: &out, idempotent: true,
		body: fixed(api.CheckBody{Sequencer: seq})}
	if _, err := c.do(ctx, cl); err != nil {
		return api.SequencerCheck{}, err
	}
	return api.SequencerCheck{Valid: out.Valid, CurrentToken: sequencer.Token(out.CurrentToken)}, nil
}

// Cluster describes the cluster as the leader sees it.
func (c *Client) Cluster(ctx context.Context) (api.ClusterInfo, error) {
	var out api.ClusterInfo
	if _, err := c.do(ctx, &call{method: http.MethodGet, path: "/v1/cluster", out: &out, idempotent: true}); err != nil {
		return api.ClusterInfo{}, err
	}
	if c.syncOn() {
		// The members' addresses become the client's (WithMemberSync).
		c.applyMembers(out)
		return out, nil
	}
	for _, m := range out.Members {
		if m.ID == out.Leader && m.HTTPAddr != "" {
			c.learn(m.HTTPAddr, out.Term)
		}
	}
	return out, nil
}

// Health asks the node the client currently talks to whether it is
// healthy and whom it takes for the leader (answered locally, never
// forwarded). An unhealthy node's answer (503) is no error: its OK is
// false and Reason says why.
func (c *Client) Health(ctx context.Context) (api.HealthInfo, error) {
	var out api.HealthInfo
	if _, err := c.do(ctx, &call{method: http.MethodGet, path: "/v1/health", out: &out, idempotent: true,
		accept: isHealthAnswer}); err != nil {
		return api.HealthInfo{}, err
	}
	return out, nil
}

// ACLBootstrap creates the cluster's management token, once per cluster,
// and answers its secret (shown only this once).
func (c *Client) ACLBootstrap(ctx context.Context) (api.TokenSecret, error) {
	return c.ACLBootstrapReset(ctx, "")
}

// ACLBootstrapReset bootstraps ACLs once more on a cluster whose
// management token was lost: secret is the reset secret the operator
// wrote into the reset file of the leader's data dir (docs/OPERATIONS.md).
func (c *Client) ACLBootstrapReset(ctx context.Context, secret string) (api.TokenSecret, error) {
	var out api.TokenSecret
	req := api.BootstrapRequest{ResetSecret: secret}
	if _, err := c.do(ctx, &call{method: http.MethodPost, path: "/v1/acl/bootstrap", out: &out, body: fixed(req)}); err != nil {
		return api.TokenSecret{}, err
	}
	return out, nil
}

// CreateToken creates an ACL token (admin) and answers its secret (shown
// only this once).
func (c *Client) CreateToken(ctx context.Context, req api.TokenRequest) (api.TokenSecret, error) {
	var out api.TokenSecret
	if _, err := c.do(ctx, &call{method: http.MethodPost, path: "/v1/acl/tokens", out: &out, body: fixed(req)}); err != nil {
		return api.TokenSecret{}, err
	}
	return out, nil
}

// Tokens lists the ACL tokens (admin), without secrets.
func (c *Client) Tokens(ctx context.Context) ([]api.TokenInfo, error) {
	var out api.TokensReply
	if _, err := c.do(ctx, &call{method: http.MethodGet, path: "/v1/acl/tokens", out: &out, idempotent: true}); err != nil {
		return nil, err
	}
	return out.Tokens, nil
}

// DeleteToken deletes an ACL token (admin), closing its sessions.
func (c *Client) DeleteToken(ctx context.Context, id string) error {
	var out api.DeletedReply
	_, err := c.do(ctx, &call{method: http.MethodDelete, path: "/v1/acl/tokens/" + url.PathEscape(id), out: &out})
	return err
}

// RevokeGrant revokes one grant of a lock (admin; POST /v1/locks/revoke).
// It is not retried after an unknown outcome: a repeat would answer
// not_holder for the grant the first attempt revoked.
func (c *Client) RevokeGrant(ctx context.Context, req api.RevokeRequest) (api.Revocation, error) {
	var out api.RevokeReply
	cl := &call{method: http.MethodPost, path: "/v1/locks/revoke", out: &out,
		body: fixed(api.RevokeBody{Name: req.Name, Holder: req.Holder, SessionHandle: req.SessionHandle, Reason: req.Reason})}
	if _, err := c.do(ctx, cl); err != nil {
		return api.Revocation{}, err
	}
	d, err := api.ParseWireDuration("unavailable_for", out.Unavailable)
	if err != nil {
		return api.Revocation{}, fmt.Errorf("raftlock revoke: %w", err)
	}
	return api.Revocation{Name: out.Name, Holder: out.Holder, SessionHandle: out.SessionHandle, SessionName: out.SessionName,
		Token: sequencer.Token(out.Token), Unavailable: d}, nil
}

// Sessions lists the open sessions by handle and name (admin; GET
// /v1/sessions).
func (c *Client) Sessions(ctx context.Context, q api.SessionsQuery) (api.SessionsReply, error) {
	v := url.Values{}
	if q.Name != "" {
		v.Set("name", q.Name)
	}
	if q.Handle != "" {
		v.Set("handle", q.Handle)
	}
	path := "/v1/sessions"
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var out api.SessionsReply
	if _, err := c.do(ctx, &call{method: http.MethodGet, path: path, out: &out, idempotent: true}); err != nil {
		return api.SessionsReply{}, err
	}
	return out, nil
}

// CloseSessionByHandle ends a session by its handle (admin; POST
// /v1/sessions/close-by-handle): its locks stay unavailable for its ttl +
// lock-delay.
func (c *Client) CloseSessionByHandle(ctx context.Context, req api.CloseByHandleRequest) (api.ClosedSession, error) {
	var out api.CloseByHandleReply
	cl := &call{method: http.MethodPost, path: "/v1/sessions/close-by-handle", out: &out,
		body: fixed(api.CloseByHandleBody{Handle: req.Handle, Reason: req.Reason})}
	if _, err := c.do(ctx, cl); err != nil {
		return api.ClosedSession{}, err
	}
	d, err := api.ParseWireDuration("unavailable_for", out.Unavailable)
	if err != nil {
		return api.ClosedSession{}, fmt.Errorf("raftlock close session: %w", err)
	}
	return api.ClosedSession{Handle: out.Handle, Name: out.Name, Locks: out.Locks, Unavailable: d}, nil
}

// RequestRelease asks the holders of a lock to release it, on behalf of
// (req.Session, req.Holder) (POST /v1/locks/request-release; write on the
// lock). Repeating it changes nothing more.
func (c *Client) RequestRelease(ctx context.Context, req api.RequestReleaseRequest) error {
	var out api.RequestReleaseReply
	_, err := c.do(ctx, &call{method: http.MethodPost, path: "/v1/locks/request-release", out: &out, idempotent: true,
		body: fixed(api.RequestReleaseBody{Name: req.Name, Session: req.Session, Holder: req.Holder})})
	return err
}
