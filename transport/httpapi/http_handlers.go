package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/transport/internal/bufpool"

	"github.com/raftlock/raftlock/sequencer"
)

func invalidf(format string, args ...any) error {
	return api.Errorf(api.CodeInvalidArgument, format, args...)
}

// decodeBody reads the whole body (at most MaxBodyBytes) and decodes it
// strictly into dst: no unknown fields, no trailing data. An empty body
// decodes as {}. The body must be valid UTF-8 and its strings must not
// escape a lone UTF-16 surrogate: encoding/json would silently replace
// either with U+FFFD, so that two different names became one before the
// contract's validators could refuse them.
func decodeBody(w http.ResponseWriter, r *http.Request, dst any) error {
	if r.ContentLength > api.MaxBodyBytes {
		return api.Errorf(api.CodeTooLarge, "request body is %d bytes; the limit is %d", r.ContentLength, api.MaxBodyBytes)
	}
	buf := bufpool.Get()
	defer bufpool.Put(buf)
	data, err := bufpool.ReadAll(http.MaxBytesReader(w, r.Body, api.MaxBodyBytes), (*buf)[:0])
	*buf = data[:0]
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return api.Errorf(api.CodeTooLarge, "request body over the limit of %d bytes", api.MaxBodyBytes)
		}
		return invalidf("reading request body: %v", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if !utf8.Valid(data) {
		return invalidf("request body is not valid UTF-8")
	}
	if decodeFastBody(data, dst) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return invalidf("malformed JSON body: %s", shownError(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalidf("malformed JSON body: trailing data after the object")
	}
	if esc := loneSurrogate(data); esc != "" {
		return invalidf("request body escapes a lone UTF-16 surrogate (%s), which is no character", esc)
	}
	return nil
}

// loneSurrogate returns the first \uXXXX escape of a well-formed JSON
// text that is a UTF-16 surrogate not paired with its other half ("" if
// none). Backslashes occur only inside strings in well-formed JSON, and
// each one starts an escape.
func loneSurrogate(data []byte) string {
	for i := 0; i+1 < len(data); i++ {
		if data[i] != '\\' {
			continue
		}
		start := i
		r, ok := unicodeEscape(data, start)
		i++ // the escaped character
		if !ok || !utf16.IsSurrogate(r) {
			continue
		}
		if r < 0xDC00 { // a high surrogate: a low one must follow
			if lo, ok := unicodeEscape(data, start+6); ok && lo >= 0xDC00 && lo <= 0xDFFF {
				i = start + 6 // the low half's backslash, skipped by i++
				continue
			}
		}
		return string(data[start : start+6])
	}
	return ""
}

// unicodeEscape decodes the \uXXXX escape at data[i:], if there is one.
func unicodeEscape(data []byte, i int) (rune, bool) {
	if i+6 > len(data) || data[i] != '\\' || data[i+1] != 'u' {
		return 0, false
	}
	v, err := strconv.ParseUint(string(data[i+2:i+6]), 16, 16)
	return rune(v), err == nil
}

// shown is an input value as an error answer (and its DEBUG log line) may
// echo it: quoted when it is short and holds no run of 16 hex digits, else
// only its length. A field in the wrong place (a session id given as a
// ttl, an index or a parameter name) must not be echoed: a session id is a
// secret capability, and so is a token's secret.
func shown(v string) string {
	if len(v) <= 24 && !hasHexRun(v) {
		return strconv.Quote(v)
	}
	return fmt.Sprintf("a value of %d bytes (not shown: it may be a secret)", len(v))
}

// shownError is err's text for an answer, unless it quotes a run of 16 hex
// digits (an input echoed by encoding/json, e.g. an unknown field's name).
func shownError(err error) string {
	if msg := err.Error(); !hasHexRun(msg) {
		return msg
	}
	return "its error quotes the input, not shown: it may hold a secret"
}

// hasHexRun reports whether s holds 16 hex digits in a row (a session id
// holds 32, a token secret 64).
func hasHexRun(s string) bool {
	run := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F') {
			if run++; run >= 16 {
				return true
			}
			continue
		}
		run = 0
	}
	return false
}

// query parses the query string strictly: only the allowed keys, each at
// most once.
func query(r *http.Request, allowed ...string) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, invalidf("malformed query: %v", err)
	}
	for k, vs := range q {
		ok := false
		for _, a := range allowed {
			ok = ok || k == a
		}
		if !ok {
			return nil, invalidf("unknown query parameter %s", shown(k))
		}
		if len(vs) > 1 {
			return nil, invalidf("query parameter %s given %d times", shown(k), len(vs))
		}
	}
	return q, nil
}

// parseDuration parses an optional duration field; "" is zero. Its range,
// negative values included, is the service's to check (the validators of
// package api), as for every other field, so that a value is refused in one
// form whichever bound it misses.
func parseDuration(field, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, invalidf("%s: %s is not a duration like \"15s\"", field, shown(s))
	}
	return d, nil
}

// blockingQuery parses the optional parameters of a blocking query:
// index (a non-negative integer, 0 if absent) and wait (parseDuration).
func blockingQuery(q url.Values) (index uint64, wait time.Duration, err error) {
	if v := q.Get("index"); v != "" {
		if index, err = strconv.ParseUint(v, 10, 64); err != nil {
			return 0, 0, invalidf("index: %s is not a non-negative integer", shown(v))
		}
	}
	wait, err = parseDuration("wait", q.Get("wait"))
	return index, wait, err
}

func (s *Server) handleOpenSession(w http.ResponseWriter, r *http.Request) error {
	var b api.OpenSessionBody
	if err := decodeBody(w, r, &b); err != nil {
		return err
	}
	ttl, err := parseDuration("ttl", b.TTL)
	if err != nil {
		return err
	}
	ld, err := parseDuration("lock_delay", b.LockDelay)
	if err != nil {
		return err
	}
	// A duration given is taken as it is ("ttl":"0s" refused,
	// "lock_delay":"0s" none); one left out takes the default.
	req := api.OpenRequest{Name: b.Name, TTL: ttl, LockDelay: ld}.Explicit(b.TTL != "", b.LockDelay != "")
	info, err := s.svc.OpenSession(r.Context(), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.OpenSessionReply{ID: info.ID, TTL: info.TTL.String(), LockDelay: info.LockDelay.String()})
	return nil
}

func (s *Server) handleKeepAlive(w http.ResponseWriter, r *http.Request) error {
	if err := decodeBody(w, r, &struct{}{}); err != nil {
		return err
	}
	id := r.PathValue("id")
	a, err := s.svc.KeepAlive(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.NewKeepAliveReply(a))
	return nil
}

func (s *Server) handleSessionInfo(w http.ResponseWriter, r *http.Request) error {
	if _, err := query(r); err != nil {
		return err
	}
	id := r.PathValue("id")
	info, err := s.svc.SessionInfo(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.NewSessionReply(info))
	return nil
}

func (s *Server) handleCloseSession(w http.ResponseWriter, r *http.Request) error {
	if err := decodeBody(w, r, &struct{}{}); err != nil {
		return err
	}
	id := r.PathValue("id")
	if err := s.svc.CloseSession(r.Context(), id); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.CloseReply{Closed: true})
	return nil
}

func (s *Server) handleAcquire(w http.ResponseWriter, r *http.Request) error {
	var b api.AcquireBody
	if err := decodeBody(w, r, &b); err != nil {
		return err
	}
	mode, err := sequencer.ParseMode(b.Mode)
	if err != nil {
		return invalidf("mode: %v", err)
	}
	wait, err := parseDuration("wait", b.Wait)
	if err != nil {
		return err
	}
	maxHold, err := parseDuration("max_hold", b.MaxHold)
	if err != nil {
		return err
	}
	if b.MaxHold != "" && maxHold == 0 {
		return invalidf("max_hold 0s out of range [%v, %v] (leave it out for no limit)", api.MinMaxHold, api.MaxMaxHold)
	}
	g, err := s.svc.Acquire(r.Context(), api.AcquireRequest{Name: b.Name, Session: b.Session, Holder: b.Holder,
		Mode: mode, Wait: wait, Value: b.Value, MaxHold: maxHold, Permits: b.Permits})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.NewGrantReply(g))
	return nil
}

func (s *Server) handleRelease(w http.ResponseWriter, r *http.Request) error {
	var b api.ReleaseBody
	if err := decodeBody(w, r, &b); err != nil {
		return err
	}
	if err := s.svc.Release(r.Context(), api.ReleaseRequest{Name: b.Name, Session: b.Session, Holder: b.Holder}); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.ReleaseReply{Released: true})
	return nil
}

// handleLock answers GET /v1/lock?name=N, and as a blocking query
// (Consul-style) with index=I: the answer comes once the lock's index is
// above I, or after wait (default api.DefaultWatchWait).
func (s *Server) handleLock(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r, "name", "index", "wait")
	if err != nil {
		return err
	}
	name := q.Get("name")
	index, wait, err := blockingQuery(q)
	if err != nil {
		return err
	}
	var l api.LockState
	if q.Has("index") || q.Has("wait") {
		l, err = s.svc.WatchLock(r.Context(), name, index, wait)
	} else {
		l, err = s.svc.LockState(r.Context(), name)
	}
	if err != nil {
		return err
	}
	w.Header().Set(api.HeaderIndex, strconv.FormatUint(l.Index, 10))
	writeJSON(w, http.StatusOK, api.NewLockReply(l))
	return nil
}

// handleLocks answers GET /v1/locks?prefix=P (a listing, paged with
// limit and after), and as a prefix watch with index=I or wait=D: the
// locks under P changed since I (api.LocksChange); with index=I and
// after=N, a page of the rest of a reset read at I. Every answer is
// bounded (api.MaxAnswerBytes), holds its bytes of the node's answer
// budget until written (api.AnswerHold), and is encoded as it is written
// (writeLocksAnswer).
func (s *Server) handleLocks(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r, "prefix", "limit", "after", "index", "wait")
	if err != nil {
		return err
	}
	ctx, hold := api.WithAnswerHold(r.Context())
	defer hold.Release()
	r = r.WithContext(ctx)
	if q.Has("index") || q.Has("wait") {
		return s.watchLocks(w, r, q)
	}
	lq := api.LocksQuery{Prefix: q.Get("prefix"), After: q.Get("after")}
	if v := q.Get("limit"); v != "" {
		if lq.Limit, err = strconv.Atoi(v); err != nil || lq.Limit <= 0 {
			return invalidf("limit %s out of range [1, %d]", shown(v), api.MaxLocksPage)
		}
	}
	page, err := s.svc.LocksPage(r.Context(), lq)
	if err != nil {
		return err
	}
	writeLocksAnswer(w, page.Locks, page.Next, false, 0)
	return nil
}

// watchLocks answers a prefix watch, or with after a page of a reset
// (handleLocks).
func (s *Server) watchLocks(w http.ResponseWriter, r *http.Request, q url.Values) error {
	if q.Has("limit") {
		return invalidf("a prefix watch (index or wait) is not paged by limit: its answers are bounded in bytes, and a reset names its next page")
	}
	index, wait, err := blockingQuery(q)
	if err != nil {
		return err
	}
	var c api.LocksChange
	if q.Has("after") {
		if q.Has("wait") {
			return invalidf("a reset's page (index and after) answers at once: no wait")
		}
		c, err = s.svc.ResetPage(r.Context(), q.Get("prefix"), index, q.Get("after"))
	} else {
		c, err = s.svc.WatchLocks(r.Context(), q.Get("prefix"), index, wait)
	}
	if err != nil {
		return err
	}
	w.Header().Set(api.HeaderIndex, strconv.FormatUint(c.Index, 10))
	writeLocksAnswer(w, c.Locks, c.Next, c.Reset, c.Index)
	return nil
}

func (s *Server) handleCheck(w http.ResponseWriter, r *http.Request) error {
	var b api.CheckBody
	if err := decodeBody(w, r, &b); err != nil {
		return err
	}
	c, err := s.svc.CheckSequencer(r.Context(), b.Sequencer)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.NewCheckReply(c))
	return nil
}

func (s *Server) handleCluster(w http.ResponseWriter, r *http.Request) error {
	if _, err := query(r); err != nil {
		return err
	}
	info, err := s.svc.Cluster(r.Context())
	if err != nil {
		return err
	}
	if info.Members == nil {
		info.Members = []api.Member{}
	}
	writeJSON(w, http.StatusOK, info)
	return nil
}

func (s *Server) handleRegister(w http.ResponseWriter, r *http.Request) error {
	var m api.Member
	if err := decodeBody(w, r, &m); err != nil {
		return err
	}
	if err := m.ValidateRecord(); err != nil {
		return err
	}
	// On a TLS peer port a node records itself only: the certificate of
	// the peer that sent the record must name the record's id.
	if c := peerCertFrom(r.Context()); c != nil && !CertNames(c, m.ID) {
		return api.Errorf(api.CodePermissionDenied, "member record of %q refused: the peer's certificate names %q, not that node",
			m.ID, c.Subject.CommonName)
	}
	if err := s.svc.RegisterMember(r.Context(), m); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.RegisterReply{Registered: true})
	return nil
}

// aclService is the server's ACLService; with ACLs off, the ACL routes
// answer so.
func (s *Server) aclService() (ACLService, error) {
	if !s.svc.ACLEnabled() {
		return nil, invalidf("ACLs are off on this cluster (raftlockd --acl)")
	}
	return s.svc, nil
}

func (s *Server) handleACLBootstrap(w http.ResponseWriter, r *http.Request) error {
	var b api.BootstrapRequest
	if err := decodeBody(w, r, &b); err != nil {
		return err
	}
	if err := b.Check(); err != nil {
		return err
	}
	as, err := s.aclService()
	if err != nil {
		return err
	}
	t, err := as.ACLBootstrap(r.Context(), b)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, t)
	return nil
}

func (s *Server) handleCreateToken(w http.ResponseWriter, r *http.Request) error {
	var b api.TokenRequest
	if err := decodeBody(w, r, &b); err != nil {
		return err
	}
	as, err := s.aclService()
	if err != nil {
		return err
	}
	t, err := as.CreateToken(r.Context(), b)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, t)
	return nil
}

func (s *Server) handleTokens(w http.ResponseWriter, r *http.Request) error {
	as, err := s.aclService()
	if err != nil {
		return err
	}
	ts, err := as.Tokens(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.TokensReply{Tokens: ts})
	return nil
}

func (s *Server) handleDeleteToken(w http.ResponseWriter, r *http.Request) error {
	if err := decodeBody(w, r, &struct{}{}); err != nil {
		return err
	}
	as, err := s.aclService()
	if err != nil {
		return err
	}
	if err := as.DeleteToken(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.DeletedReply{Deleted: true})
	return nil
}
