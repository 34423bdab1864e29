package httpapi

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"time"

	"github.com/raftlock/raftlock/api"
)

// forward answers a request on a follower: it reverse-proxies it to the
// leader, or answers no_leader when the leader is unknown or the request
// was already forwarded once (so two nodes with stale views never bounce a
// request between them).
func (s *Server) forward(w http.ResponseWriter, r *http.Request, li api.LeaderInfo) {
	addr := li.ForwardAddr()
	if addr == "" {
		if s.answerRemoved(w, r) {
			return
		}
		s.writeError(w, r, api.Errorf(api.CodeNoLeader, "this node does not lead and knows no leader address (leader %q)", li.ID))
		return
	}
	if via := r.Header.Get(api.HeaderForwarded); via != "" {
		s.writeError(w, r, api.Errorf(api.CodeNoLeader,
			"request forwarded here as to the leader (%s), but this node does not lead (its leader: %q)", via, li.ID))
		return
	}
	if r.ContentLength > api.MaxBodyBytes && !isSnapshotUpload(r) {
		s.writeError(w, r, api.Errorf(api.CodeTooLarge, "request body is %d bytes; the limit is %d", r.ContentLength, api.MaxBodyBytes))
		return
	}
	if err := leaderReads(r, li); err != nil { // http_version.go
		s.writeError(w, r, err)
		return
	}
	target := &url.URL{Scheme: "http", Host: addr}
	view := li.ID + "@" + strconv.FormatUint(li.Term, 10)
	// The leader stamps its own leader and term headers on the answer; ours
	// are put back only if the answer carries none (see ModifyResponse).
	mine := w.Header().Clone()
	for _, h := range leaderHeaders {
		w.Header().Del(h)
	}
	p := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.SetXForwarded()
			pr.Out.Header.Set(api.HeaderForwarded, view)
		},
		Transport:     s.proxy,
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			if resp.Header.Get(api.HeaderLeader) == "" {
				for _, h := range leaderHeaders {
					if v := mine.Get(h); v != "" {
						resp.Header.Set(h, v)
					}
				}
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			for _, h := range leaderHeaders {
				if v := mine.Get(h); v != "" {
					w.Header().Set(h, v)
				}
			}
			s.writeError(w, r, proxyError(r, li, err))
		},
	}
	s.log.Trace("forwarding to the leader", "method", r.Method, "path", logPath(r.URL.Path), "leader", li.ID, "addr", addr)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go s.cancelOnLeaderChange(ctx, cancel, li)
	p.ServeHTTP(w, r.WithContext(ctx))
}

// isBlockingQuery reports whether r is a blocking query, which a follower
// counts against its caps before forwarding it (QueryAdmitter): a watch
// of a lock or a prefix (GET /v1/lock or /v1/locks with index or wait)
// or a blocking overview (GET /v1/overview with an index).
func isBlockingQuery(r *http.Request) bool {
	if r.Method != http.MethodGet {
		return false
	}
	q := r.URL.Query()
	switch r.URL.Path {
	case "/v1/lock", "/v1/locks":
		return q.Has("index") || q.Has("wait")
	case "/v1/overview":
		return q.Has("index")
	}
	return false
}

// leaderCheckInterval is how often a forwarded request checks whether this
// node's view of the leader changed.
const leaderCheckInterval = 100 * time.Millisecond

// cancelOnLeaderChange cancels a forwarded request once this node sees
// another leader (or term) than the one it forwarded to: a request held by
// a leader that froze or stepped down is answered at once (no_leader for a
// read, unknown_outcome for a write) so that the client asks again and
// reaches the new leader, instead of waiting on the old one.
func (s *Server) cancelOnLeaderChange(ctx context.Context, cancel context.CancelFunc, li api.LeaderInfo) {
	t := time.NewTicker(leaderCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if now := s.svc.Leader(); now.ID != li.ID || now.Term != li.Term {
				cancel()
				return
			}
		}
	}
}

// leaderHeaders are the headers in which a node tells its view of the
// leader: a forwarded answer carries the leader's own.
var leaderHeaders = []string{api.HeaderLeader, api.HeaderLeaderAddr, api.HeaderTerm, api.HeaderMembers}

// proxyError classifies a failure to forward. A request that never reached
// the leader (dial failure) or that only reads is answered no_leader
// (retry); a write that may have reached the leader is unknown_outcome
// (retry the same idempotent request).
func proxyError(r *http.Request, li api.LeaderInfo, err error) error {
	// A *url.Error quotes the request's URL, which may name a session id
	// (a secret): keep what went wrong, not where.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var op *net.OpError
	notSent := errors.As(err, &op) && op.Op == "dial"
	if notSent || r.Method == http.MethodGet || r.Method == http.MethodHead {
		return api.Errorf(api.CodeNoLeader, "leader %s at %s unreachable: %v", li.ID, li.ForwardAddr(), err)
	}
	return api.Errorf(api.CodeUnknownOutcome, "forwarding to leader %s at %s failed: %v; retry the same request", li.ID, li.ForwardAddr(), err)
}
