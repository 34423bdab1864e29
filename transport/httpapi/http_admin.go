package httpapi

import (
	"net/http"

	"github.com/raftlock/raftlock/api"
)

// handleRevoke answers POST /v1/locks/revoke (admin): one grant revoked.
func (s *Server) handleRevoke(w http.ResponseWriter, r *http.Request) error {
	var b api.RevokeBody
	if err := decodeBody(w, r, &b); err != nil {
		return err
	}
	rv, err := s.svc.RevokeGrant(r.Context(), api.RevokeRequest{Name: b.Name, Holder: b.Holder, SessionHandle: b.SessionHandle, Reason: b.Reason})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.RevokeReply{Revoked: true, Name: rv.Name, Holder: rv.Holder, SessionHandle: rv.SessionHandle,
		SessionName: rv.SessionName, Token: uint64(rv.Token), Unavailable: rv.Unavailable.String()})
	return nil
}

// handleSessions answers GET /v1/sessions[?name=N|handle=H] (admin).
func (s *Server) handleSessions(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r, "name", "handle")
	if err != nil {
		return err
	}
	out, err := s.svc.Sessions(r.Context(), api.SessionsQuery{Name: q.Get("name"), Handle: q.Get("handle")})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// handleCloseByHandle answers POST /v1/sessions/close-by-handle (admin).
func (s *Server) handleCloseByHandle(w http.ResponseWriter, r *http.Request) error {
	var b api.CloseByHandleBody
	if err := decodeBody(w, r, &b); err != nil {
		return err
	}
	c, err := s.svc.CloseSessionByHandle(r.Context(), api.CloseByHandleRequest{Handle: b.Handle, Reason: b.Reason})
	if err != nil {
		return err
	}
	locks := c.Locks
	if locks == nil {
		locks = []string{}
	}
	writeJSON(w, http.StatusOK, api.CloseByHandleReply{Closed: true, Handle: c.Handle, Name: c.Name, Locks: locks, Unavailable: c.Unavailable.String()})
	return nil
}

// handleRequestRelease answers POST /v1/locks/request-release.
func (s *Server) handleRequestRelease(w http.ResponseWriter, r *http.Request) error {
	var b api.RequestReleaseBody
	if err := decodeBody(w, r, &b); err != nil {
		return err
	}
	if err := s.svc.RequestRelease(r.Context(), api.RequestReleaseRequest{Name: b.Name, Session: b.Session, Holder: b.Holder}); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.RequestReleaseReply{Requested: true})
	return nil
}
