package httpapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"path"
	"runtime/debug"
	"strings"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/transport/httpapi/ui"
	"github.com/raftlock/raftlock/transport/internal/bufpool"
	"github.com/raftlock/raftlock/transport/internal/warnlimit"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
)

// Server is the HTTP/JSON API of one replica (shared/API.md). It is an
// http.Handler: it answers on the leader, forwards every /v1 request but
// /v1/health from a follower to the leader, answers every error as
// {"error":{"code","message"}}, stamps X-Raftlock-Leader and
// X-Raftlock-Term on every answer and turns handler panics into 500
// internal errors.
type Server struct {
	svc   Service
	log   hclog.Logger
	mux   *http.ServeMux
	proxy http.RoundTripper
	// warns rate-limits the WARN lines of failed requests.
	warns warnlimit.Limiter
	// peer serves the routes only members may call (POST
	// /v1/internal/members): set on the peer port's server (ServePeers),
	// never on the client HTTP port's.
	peer bool
	// durations is raftlock_http_request_duration_seconds (nil: the
	// service serves no metrics); http_metrics.go.
	durations *prometheus.HistogramVec
	// routeObs caches each route's 200 series of durations (read-only
	// map after routes(); http_lean.go).
	routeObs map[string]*routeObserver
	// localReads answers read endpoints without forwarding: a deliberate
	// fault, set only in a build with -tags raftlock_faults
	// (WithUnsafeLocalReads).
	localReads bool
	// removed is what a node removed from the cluster last learned from
	// its peers about the leader (http_removed.go).
	removed removedHint
	// metricsOnly serves GET /v1/health and GET /metrics alone, the
	// metrics without a token (NewMetricsServer).
	metricsOnly bool
}

// ServerOption configures a Server.
type ServerOption func(*Server)

// WithLogger sets the server's logger (default: none).
func WithLogger(l hclog.Logger) ServerOption {
	return func(s *Server) {
		if l != nil {
			s.log = l
		}
	}
}

// WithProxyTransport sets the RoundTripper a follower forwards requests to
// the leader with. It must not time out a response sooner than the longest
// waiting acquire (api.MaxWait). The default dials through the service's
// DialPeer, never times out responses, and speaks HTTP/2 without TLS to a
// peer port that serves it (ServePeers), on at most ForwardConnsPerLeader
// connections per leader, HTTP/1.1 to one of an older build.
func WithProxyTransport(rt http.RoundTripper) ServerOption {
	return func(s *Server) {
		if rt != nil {
			s.proxy = rt
		}
	}
}

// NewServer returns the HTTP API serving svc.
func NewServer(svc Service, opts ...ServerOption) *Server {
	s := &Server{svc: svc, log: hclog.NewNullLogger(), mux: http.NewServeMux(), routeObs: map[string]*routeObserver{}}
	for _, o := range opts {
		o(s)
	}
	if s.proxy == nil {
		s.proxy = newForwardTransport(svc.DialPeer)
	}
	if !s.metricsOnly {
		// A probe every few seconds on the metrics listener would drown
		// the API's request durations: not counted.
		s.durations = newRequestDurations(svc)
	}
	s.routes()
	return s
}

// routes registers the API routes: each a ServeMux pattern, whether a
// follower forwards it to the leader, whether only members may call it (the
// peer port's Server alone serves those), and its handler.
func (s *Server) routes() {
	for _, r := range []struct {
		pattern  string
		forward  bool
		peerOnly bool
		h        func(http.ResponseWriter, *http.Request) error
	}{
		// With ACLs on, every route needs a token but health, the ACL
		// bootstrap and the peer-only routes (open).
		{"POST /v1/sessions", true, false, s.handleOpenSession},
		{"POST /v1/sessions/{id}/keepalive", true, false, s.handleKeepAlive},
		{"GET /v1/sessions/{id}", !s.localReads, false, s.handleSessionInfo},
		{"DELETE /v1/sessions/{id}", true, false, s.handleCloseSession},
		{"POST /v1/acquire", true, false, s.handleAcquire},
		{"POST /v1/release", true, false, s.handleRelease},
		{"GET /v1/lock", !s.localReads, false, s.handleLock},
		{"GET /v1/locks", !s.localReads, false, s.handleLocks},
		{"POST /v1/sequencer/check", !s.localReads, false, s.handleCheck},
		{"GET /v1/cluster", true, false, s.handleCluster},
		{"GET /v1/health", false, false, s.handleHealth},
		{"POST /v1/acl/bootstrap", true, false, s.handleACLBootstrap},
		{"POST /v1/acl/tokens", true, false, s.handleCreateToken},
		{"GET /v1/acl/tokens", true, false, s.handleTokens},
		{"DELETE /v1/acl/tokens/{id}", true, false, s.handleDeleteToken},
		{"POST /v1/internal/members", true, true, s.handleRegister},
		{"GET /v1/snapshot", true, false, s.handleSnapshot},
		{"POST /v1/snapshot/restore", true, false, s.handleRestore},
		{"POST /v1/internal/restore", true, true, s.handlePeerRestore},
		{"GET /v1/cluster/members", true, false, s.handleMembers},
		{"POST /v1/cluster/members", true, false, s.handleAddMember},
		{"DELETE /v1/cluster/members/{id}", true, false, s.handleRemoveMember},
		{"POST /v1/cluster/transfer-leadership", true, false, s.handleTransferLeadership},
		{"GET /v1/internal/bootstrap-state", false, true, s.handleBootstrapState},
		{"GET /v1/internal/digests", false, true, s.handleDigests},
		{"POST /v1/internal/diverged", false, true, s.handleDiverged},
		{"GET /metrics", false, false, s.handleMetrics}, // authorizes itself (--metrics-open)
		{"GET /v1/overview", !s.localReads, false, s.handleOverview},
		{"POST /v1/locks/revoke", true, false, s.handleRevoke},
		{"POST /v1/locks/request-release", true, false, s.handleRequestRelease},
		{"GET /v1/sessions", true, false, s.handleSessions},
		{"POST /v1/sessions/close-by-handle", true, false, s.handleCloseByHandle},
	} {
		if r.peerOnly && !s.peer {
			continue
		}
		if s.metricsOnly && r.pattern != "GET /v1/health" && r.pattern != "GET /metrics" {
			continue
		}
		open := r.peerOnly || r.pattern == "GET /v1/health" || r.pattern == "POST /v1/acl/bootstrap" || r.pattern == "GET /metrics"
		s.mux.Handle(r.pattern, s.endpoint(r.forward, open, r.h))
		s.routeObs[r.pattern] = &routeObserver{}
	}
}

// endpoint wraps a handler: forwarding when this node does not lead (the
// Authorization header goes along: the leader authenticates; a blocking
// query is counted against this node's caps first), then, with
// ACLs on and unless the route is open, authentication, and error answers
// for a returned error.
func (s *Server) endpoint(forward, open bool, h func(http.ResponseWriter, *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if forward {
			li, ok := leaderOf(w)
			if !ok {
				li = s.svc.Leader()
			}
			if !li.Self {
				// A header-only check before forwarding: with ACLs on, a
				// request without a well-formed token is refused here, so
				// that its body (a restore's up to 1 GiB) never travels.
				if !open {
					if err := s.checkBearer(r); err != nil {
						w.Header().Set("WWW-Authenticate", `Bearer realm="raftlock"`)
						s.writeError(w, r, err)
						return
					}
				}
				if isBlockingQuery(r) {
					secret, _ := api.ParseBearer(r.Header.Get("Authorization"))
					done, err := s.svc.AdmitForwardedQuery(secret)
					if err != nil {
						s.writeError(w, r, err)
						return
					}
					defer done()
				}
				s.forward(w, r, li)
				return
			}
		}
		if !open {
			ctx, err := s.authenticate(r)
			if err != nil {
				if api.CodeOf(err) == api.CodeUnauthenticated {
					w.Header().Set("WWW-Authenticate", `Bearer realm="raftlock"`)
				}
				s.writeError(w, r, err)
				return
			}
			r = r.WithContext(ctx)
		}
		if err := h(w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// authenticate returns r's context carrying the token of its
// Authorization header, with ACLs on (r's context as it is with them off).
func (s *Server) authenticate(r *http.Request) (context.Context, error) {
	if !s.svc.ACLEnabled() {
		return r.Context(), nil
	}
	secret, err := api.ParseBearer(r.Header.Get("Authorization"))
	if err != nil {
		return nil, err
	}
	p, err := s.svc.Authenticate(r.Context(), secret)
	if err != nil {
		return nil, err
	}
	return api.WithPrincipal(r.Context(), p), nil
}

// checkBearer refuses (unauthenticated), with ACLs on, a request whose
// Authorization header is not a bearer token: what the leader would
// answer, decided from the header alone.
func (s *Server) checkBearer(r *http.Request) error {
	if !s.svc.ACLEnabled() {
		return nil
	}
	_, err := api.ParseBearer(r.Header.Get("Authorization"))
	return err
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	watchBody(w, r)
	rw := &responseWriter{ResponseWriter: w}
	start, route := time.Now(), ""
	defer func() { s.observeRequest(rw, route, start) }()
	defer s.recoverPanic(rw, r)

	li := s.svc.Leader()
	rw.leader = li
	setLeaderHeaders(rw.Header(), li)

	// The status page (/ui/), served by this node; not on the peer port.
	if ui.Is(r.URL.Path) && !s.peer && !s.metricsOnly {
		s.serveUI(rw, r)
		return
	}
	// ServeMux would redirect unclean paths; the API has none.
	if p := r.URL.Path; p == "" || p[0] != '/' || path.Clean(p) != p {
		s.writeError(rw, r, api.Errorf(api.CodeNotFound, "no route %s %q", r.Method, logPath(r.URL.Path)))
		return
	}
	h, pattern := s.mux.Handler(r)
	if pattern == "" {
		// No route matched: ServeMux's own handler tells 404 from 405 (and
		// sets Allow); answer in JSON instead of its plain text.
		probe := &statusProbe{header: http.Header{}}
		h.ServeHTTP(probe, r)
		if probe.status == http.StatusMethodNotAllowed {
			if allow := probe.header.Get("Allow"); allow != "" {
				rw.Header().Set("Allow", allow)
			}
			s.writeError(rw, r, api.Errorf(api.CodeMethodNotAllowed, "method %s not allowed on %s", r.Method, logPath(r.URL.Path)))
			return
		}
		s.writeError(rw, r, api.Errorf(api.CodeNotFound, "no route %s %s", r.Method, logPath(r.URL.Path)))
		return
	}
	route = pattern
	s.serveRoute(rw, r, h, pattern)
}

// watchBody pushes a restore upload's read deadline (ReadTimeout, set by
// ConfigureServer when the request's first byte came) ReadTimeout further
// after each piece that arrives, so that a large backup may take as long
// as it keeps arriving; any other request must arrive whole within
// ReadTimeout. (net/http lifts the deadline itself once a body has been
// read, so a waiting acquire or a blocking query, which waits after
// reading, is never cut by it.)
func watchBody(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody || !isSnapshotUpload(r) {
		return
	}
	r.Body = &deadlineBody{ReadCloser: r.Body, rc: http.NewResponseController(w)}
}

// deadlineBody is a restore upload's body: each piece read pushes the
// connection's read deadline (watchBody).
type deadlineBody struct {
	io.ReadCloser
	rc *http.ResponseController
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 && err == nil {
		_ = b.rc.SetReadDeadline(time.Now().Add(ReadTimeout))
	}
	return n, err
}

// recoverPanic turns a handler panic into a 500 internal answer.
func (s *Server) recoverPanic(rw *responseWriter, r *http.Request) {
	v := recover()
	if v == nil {
		return
	}
	if v == http.ErrAbortHandler {
		panic(v) // net/http aborts the response quietly.
	}
	s.log.Error("handler panic", "method", r.Method, "path", logPath(r.URL.Path), "panic", v, "stack", string(debug.Stack()))
	if rw.wrote {
		// Too late for an error answer: abort the connection so the client
		// does not take a truncated answer for a whole one.
		panic(http.ErrAbortHandler)
	}
	s.writeError(rw, r, api.Errorf(api.CodeInternal, "internal error"))
}

// apiError turns any error into an *api.Error. A context error means
// the request ended (client gone, server shutting down) before its outcome
// was known.
func apiError(err error) *api.Error {
	var e *api.Error
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return api.Errorf(api.CodeUnknownOutcome, "request ended before its outcome was known: %v", err)
	}
	return api.Errorf(api.CodeInternal, "%v", err)
}

// writeError answers err as {"error":{"code","message"}}. An answer of
// the contract (no_leader, unknown_outcome, lock_busy, wait_timeout,
// not_found, invalid_argument...: what clients expect, act on or retry) is
// logged at DEBUG, so that a client retrying against a leaderless node
// writes nothing at INFO; anything else (internal) at WARN, at most one
// line per code per warnlimit.Every, with the count of those left out.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := apiError(err)
	status := api.StatusOf(e.Code)
	if expectedCode(e.Code) {
		s.log.Debug("request refused", "method", r.Method, "path", logPath(r.URL.Path), "code", e.Code, "error", e.Message)
	} else if ok, suppressed := s.warns.Allow(e.Code); ok {
		args := []any{"method", r.Method, "path", logPath(r.URL.Path), "code", e.Code, "error", e.Message}
		if suppressed > 0 {
			args = append(args, "suppressed", suppressed)
		}
		s.log.Warn("request failed", args...)
	}
	writeJSON(w, status, api.ErrorReply{Error: api.ErrorBody{Code: string(e.Code), Message: e.Message}})
}

// logPath is a request's path as log lines and error answers show it: a
// session is named by its handle, never by its id (a secret capability),
// whatever the path around it: the segment after any "sessions" segment
// (so "//v1/sessions/ID" and "/v1//sessions/ID" too), and any segment with
// a run of 16 hex digits (an id or a token secret in a wrong place), show
// as handle:H.
func logPath(p string) string {
	if !strings.Contains(p, "sessions/") && !hasHexRun(p) {
		return p
	}
	segs := strings.Split(p, "/")
	for i, seg := range segs {
		if seg == "" {
			continue
		}
		if (i > 0 && segs[i-1] == "sessions") || hasHexRun(seg) {
			segs[i] = "handle:" + api.SessionHandle(seg)
		}
	}
	return strings.Join(segs, "/")
}

// expectedCode reports whether code is an answer of the contract rather
// than a failure of the server: every code but internal (and codes this
// build does not know).
func expectedCode(code api.Code) bool {
	switch code {
	case api.CodeInvalidArgument, api.CodeSessionNotFound, api.CodeLockBusy, api.CodeNotHolder,
		api.CodeWaitTimeout, api.CodeWaitCancelled, api.CodeNoLeader, api.CodeUnknownOutcome,
		api.CodeTooLarge, api.CodeResourceExhausted, api.CodeNotFound, api.CodeMethodNotAllowed,
		api.CodeUnauthenticated, api.CodePermissionDenied:
		return true
	default:
		return false
	}
}

// writeJSON answers v as JSON with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	buf := bufpool.Get()
	defer bufpool.Put(buf)
	body, err := encodeAnswer((*buf)[:0], v)
	if err != nil {
		status = http.StatusInternalServerError
		body = append(body[:0], `{"error":{"code":"internal","message":"encoding the answer failed"}}`...)
	}
	body = append(body, '\n')
	*buf = body[:0]
	setJSONHeaders(w.Header(), len(body))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// responseWriter remembers whether the header was written; it unwraps for
// http.ResponseController (flushing through the forwarding proxy).
type responseWriter struct {
	http.ResponseWriter
	wrote bool
	// status is the status code written (0: none yet).
	status int
	// leader is the leadership view taken once per request: it names the
	// leader in the headers and decides forwarding.
	leader api.LeaderInfo
}

// leaderOf returns the leadership view ServeHTTP took for this request.
func leaderOf(w http.ResponseWriter) (api.LeaderInfo, bool) {
	rw, ok := w.(*responseWriter)
	if !ok {
		return api.LeaderInfo{}, false
	}
	return rw.leader, true
}

func (w *responseWriter) WriteHeader(status int) {
	if !w.wrote {
		w.status = status
	}
	w.wrote = true
	w.ResponseWriter.WriteHeader(status)
}

func (w *responseWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Flush implements http.Flusher.
func (w *responseWriter) Flush() {
	w.wrote = true
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap returns the underlying ResponseWriter.
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// statusProbe records the status ServeMux's not-found or not-allowed
// handler writes.
type statusProbe struct {
	header http.Header
	status int
}

func (p *statusProbe) Header() http.Header { return p.header }

func (p *statusProbe) Write(b []byte) (int, error) {
	if p.status == 0 {
		p.status = http.StatusOK
	}
	return len(b), nil
}

func (p *statusProbe) WriteHeader(status int) {
	if p.status == 0 {
		p.status = status
	}
}
