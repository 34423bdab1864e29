package httpapi

import (
	"net/http"

	"github.com/raftlock/raftlock/api"
)

func (s *Server) handleDigests(w http.ResponseWriter, r *http.Request) error {
	if _, err := query(r); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.svc.DigestReport())
	return nil
}

func (s *Server) handleDiverged(w http.ResponseWriter, r *http.Request) error {
	if _, err := query(r); err != nil {
		return err
	}
	var n api.DivergedNotice
	if err := decodeBody(w, r, &n); err != nil {
		return err
	}
	s.svc.Diverged(n)
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	return nil
}
