package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/raftlock/raftlock/session/api"

	"github.com/raftlock/raftlock/sequencer"
)

func invalidf(format string, args ...any) error {
	return api.Errorf(api.CodeInvalidArgument, format, args...)
}

// decodeBody reads the whole body (at most MaxBodyBytes) and decodes it
// strictly into dst: no unknown fields, no trailing data. An empty body
// decodes as {}.
func decodeBody(w http.ResponseWriter, r *http.Request, dst any) error {
	if r.ContentLength > MaxBodyBytes {
		return api.Errorf(api.CodeTooLarge, "request body is %d bytes; the limit is %d", r.ContentLength, MaxBodyBytes)
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return api.Errorf(api.CodeTooLarge, "request body over the limit of %d bytes", MaxBodyBytes)
		}
		return invalidf("reading request body: %v", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return invalidf("malformed JSON body: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalidf("malformed JSON body: trailing data after the object")
	}
	return nil
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
			return nil, invalidf("unknown query parameter %q", k)
		}
		if len(vs) > 1 {
			return nil, invalidf("query parameter %q given %d times", k, len(vs))
		}
	}
	return q, nil
}

// parseDuration parses an optional duration field and checks it against
// [0, max]; "" is zero.
func parseDuration(field, s string, max time.Duration) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, invalidf("%s: %q is not a duration like \"15s\"", field, s)
	}
	if d < 0 || d > max {
		return 0, invalidf("%s %v out of range [0s, %v]", field, d, max)
	}
	return d, nil
}

func (s *Server) handleOpenSession(w http.ResponseWriter, r *http.Request) error {
	var b OpenSessionBody
	if err := decodeBody(w, r, &b); err != nil {
		return err
	}
	ttl, err := parseDuration("ttl", b.TTL, api.MaxTTL)
	if err != nil {
		return err
	}
	if ttl != 0 && ttl < api.MinTTL {
		return invalidf("ttl %v out of range [%v, %v]", ttl, api.MinTTL, api.MaxTTL)
	}
	ld, err := parseDuration("lock_delay", b.LockDelay, api.MaxLockDelay)
	if err != nil {
		return err
	}
	if ld == 0 && b.LockDelay != "" {
		ld = api.NoLockDelay // an explicit "0s": no lock-delay; absent: the default
	}
	if err := api.CheckText("session name", b.Name, 0, api.MaxSessionNameBytes); err != nil {
		return err
	}
	info, err := s.svc.OpenSession(r.Context(), api.OpenRequest{Name: b.Name, TTL: ttl, LockDelay: ld})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, OpenSessionReply{ID: info.ID, TTL: info.TTL.String(), LockDelay: info.LockDelay.String()})
	return nil
}

func sessionID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	return id, api.CheckText("session", id, 1, api.MaxSessionIDBytes)
}

func (s *Server) handleKeepAlive(w http.ResponseWriter, r *http.Request) error {
	if err := decodeBody(w, r, &struct{}{}); err != nil {
		return err
	}
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	ttl, err := s.svc.KeepAlive(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, KeepAliveReply{TTL: ttl.String()})
	return nil
}

func (s *Server) handleSessionInfo(w http.ResponseWriter, r *http.Request) error {
	if _, err := query(r); err != nil {
		return err
	}
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	info, err := s.svc.SessionInfo(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, NewSessionReply(info))
	return nil
}

func (s *Server) handleCloseSession(w http.ResponseWriter, r *http.Request) error {
	if err := decodeBody(w, r, &struct{}{}); err != nil {
		return err
	}
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	if err := s.svc.CloseSession(r.Context(), id); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, CloseReply{Closed: true})
	return nil
}

func (s *Server) handleAcquire(w http.ResponseWriter, r *http.Request) error {
	var b AcquireBody
	if err := decodeBody(w, r, &b); err != nil {
		return err
	}
	if err := api.CheckLockRef(b.Name, b.Session, b.Holder); err != nil {
		return err
	}
	mode, err := sequencer.ParseMode(b.Mode)
	if err != nil {
		return invalidf("mode: %v", err)
	}
	wait, err := parseDuration("wait", b.Wait, api.MaxWait)
	if err != nil {
		return err
	}
	if err := api.CheckValue(b.Value); err != nil {
		return err
	}
	g, err := s.svc.Acquire(r.Context(), api.AcquireRequest{Name: b.Name, Session: b.Session, Holder: b.Holder,
		Mode: mode, Wait: wait, Value: b.Value})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, NewGrantReply(g))
	return nil
}

func (s *Server) handleRelease(w http.ResponseWriter, r *http.Request) error {
	var b ReleaseBody
	if err := decodeBody(w, r, &b); err != nil {
		return err
	}
	if err := api.CheckLockRef(b.Name, b.Session, b.Holder); err != nil {
		return err
	}
	if err := s.svc.Release(r.Context(), api.ReleaseRequest{Name: b.Name, Session: b.Session, Holder: b.Holder}); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ReleaseReply{Released: true})
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
	if err := api.ValidateLockName(name); err != nil {
		return err
	}
	var index uint64
	if v := q.Get("index"); v != "" {
		if index, err = strconv.ParseUint(v, 10, 64); err != nil {
			return invalidf("index: %q is not a non-negative integer", v)
		}
	}
	wait, err := parseDuration("wait", q.Get("wait"), api.MaxWatchWait)
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
	w.Header().Set(HeaderIndex, strconv.FormatUint(l.Index, 10))
	writeJSON(w, http.StatusOK, NewLockReply(l))
	return nil
}

func (s *Server) handleLocks(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r, "prefix")
	if err != nil {
		return err
	}
	prefix := q.Get("prefix")
	if err := api.CheckPrefix(prefix); err != nil {
		return err
	}
	ls, err := s.svc.Locks(r.Context(), prefix)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, NewLocksReply(ls))
	return nil
}

func (s *Server) handleCheck(w http.ResponseWriter, r *http.Request) error {
	var b CheckBody
	if err := decodeBody(w, r, &b); err != nil {
		return err
	}
	seq, err := sequencer.Parse(b.Sequencer)
	if err != nil {
		return invalidf("sequencer: %v", err)
	}
	if err := api.ValidateLockName(seq.Name); err != nil {
		return err
	}
	c, err := s.svc.CheckSequencer(r.Context(), b.Sequencer)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, NewCheckReply(c))
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
		info.Members = []Member{}
	}
	writeJSON(w, http.StatusOK, info)
	return nil
}

func (s *Server) handleRegister(w http.ResponseWriter, r *http.Request) error {
	var m Member
	if err := decodeBody(w, r, &m); err != nil {
		return err
	}
	if err := m.Validate(); err != nil {
		return err
	}
	if err := s.svc.RegisterMember(r.Context(), m); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, RegisterReply{Registered: true})
	return nil
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) error {
	li := s.svc.Leader()
	writeJSON(w, http.StatusOK, HealthInfo{OK: true, Leader: li.ID, Term: li.Term, IsLeader: li.Self})
	return nil
}
