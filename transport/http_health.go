package transport

import (
	"encoding/json"
	"net/http"

	"github.com/raftlock/raftlock/api"
)

// HealthService is what a Service implements for a truthful GET
// /v1/health (node.Node does): without it, the server answers 200
// whenever it answers at all.
type HealthService interface {
	Health() api.HealthStatus
}

// handleHealth answers GET /v1/health, locally (never forwarded, no
// token): 200 when the service is healthy, else 503, both with the
// HealthInfo body (pollers that look for the leader read it either way);
// ?stale answers 200 whatever the verdict, for a probe that only asks
// whether the process answers.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) error {
	li := s.svc.Leader()
	h := api.HealthInfo{OK: true, Leader: li.ID, Term: li.Term, IsLeader: li.Self, Serving: li.Self && li.Serving}
	if hs, ok := s.svc.(HealthService); ok {
		st := hs.Health()
		h.OK, h.Reason, h.Node, h.AppliedIndex = st.Healthy, st.Reason, st.ID, st.AppliedIndex
		if !li.Self && st.LastContact > 0 {
			h.LastContactMillis = st.LastContact.Milliseconds()
		}
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

// isHealthAnswer reports whether a GET /v1/health answer that is not 2xx
// is a node's unhealthy verdict (503 with a HealthInfo body) rather than
// an error of something in between.
func isHealthAnswer(status int, data []byte) bool {
	if status != http.StatusServiceUnavailable {
		return false
	}
	var probe struct {
		OK *bool `json:"ok"`
	}
	return json.Unmarshal(data, &probe) == nil && probe.OK != nil
}
