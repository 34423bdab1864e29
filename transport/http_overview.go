package transport

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/raftlock/raftlock/api"
)

// OverviewService is what a Service implements to serve GET /v1/overview
// (node.Node does): the whole picture the status page (/ui/) shows, as one
// blocking query.
type OverviewService interface {
	// Overview answers the cluster, the locks, the sessions and the recent
	// events once the leader's applied index is above index (at once for
	// index 0), or after wait (0: api.DefaultWatchWait). Leader only.
	Overview(ctx context.Context, index uint64, wait time.Duration) (api.Overview, error)
}

// handleOverview answers GET /v1/overview[?index=I&wait=D].
func (s *Server) handleOverview(w http.ResponseWriter, r *http.Request) error {
	osvc, ok := s.svc.(OverviewService)
	if !ok {
		return api.Errorf(api.CodeNotFound, "this server has no overview")
	}
	q, err := query(r, "index", "wait")
	if err != nil {
		return err
	}
	index, wait, err := blockingQuery(q)
	if err != nil {
		return err
	}
	ov, err := osvc.Overview(r.Context(), index, wait)
	if err != nil {
		return err
	}
	w.Header().Set(api.HeaderIndex, strconv.FormatUint(ov.Index, 10))
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, ov)
	return nil
}
