package httpapi

import (
	"net/http"
	"strconv"

	"github.com/raftlock/raftlock/api"
)

// handleOverview answers GET /v1/overview[?index=I&wait=D].
func (s *Server) handleOverview(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r, "index", "wait")
	if err != nil {
		return err
	}
	index, wait, err := blockingQuery(q)
	if err != nil {
		return err
	}
	ov, err := s.svc.Overview(r.Context(), index, wait)
	if err != nil {
		return err
	}
	w.Header().Set(api.HeaderIndex, strconv.FormatUint(ov.Index, 10))
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, ov)
	return nil
}
