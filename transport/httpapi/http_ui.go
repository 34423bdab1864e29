package httpapi

import (
	"net/http"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/transport/httpapi/ui"
)

// serveUI answers the status page's paths (/ui, /ui/...): its embedded
// assets, served by the node asked, never forwarded and open with ACLs on
// (they hold no data; the page's data calls need a token).
func (s *Server) serveUI(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		s.writeError(w, r, api.Errorf(api.CodeMethodNotAllowed, "method %s not allowed on %s", r.Method, logPath(r.URL.Path)))
		return
	}
	if !ui.Serve(w, r) {
		s.writeError(w, r, api.Errorf(api.CodeNotFound, "no route %s %s", r.Method, logPath(r.URL.Path)))
	}
}
