package httpapi

import (
	"net/http"

	"github.com/raftlock/raftlock/api"
)

// handleHealth answers GET /v1/health, locally (never forwarded, no
// token): 200 when the service is healthy, else 503, both with the
// HealthInfo body (pollers that look for the leader read it either way);
// ?stale answers 200 whatever the verdict, for a probe that only asks
// whether the process answers.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) error {
	li := s.svc.Leader()
	h := api.HealthInfo{OK: true, Leader: li.ID, Term: li.Term, IsLeader: li.Self, Serving: li.Self && li.Serving}
	st := s.svc.Health()
	h.OK, h.Reason, h.Node, h.AppliedIndex = st.Healthy, st.Reason, st.ID, st.AppliedIndex
	if !li.Self && st.LastContact > 0 {
		h.LastContactMillis = st.LastContact.Milliseconds()
	}
	status := http.StatusOK
	if !h.OK {
		if _, stale := r.URL.Query()["stale"]; !stale {
			status = http.StatusServiceUnavailable
		}
	}
	writeJSON(w, status, h)
	return nil
}
