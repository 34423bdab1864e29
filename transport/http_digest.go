package transport

import (
	"net/http"

	"github.com/raftlock/raftlock/api"
)

// Digester is what a Service implements to prove that its replica agrees
// with the others (node.Node does): its recent state digests
// (fsm.FSM.Digests), served on the peer port.
type Digester interface {
	DigestReport() api.DigestReport
	// Diverged is told by the leader that this replica's digest differs
	// from the majority's (POST /v1/internal/diverged).
	Diverged(d api.DivergedNotice)
}

func (s *Server) handleDigests(w http.ResponseWriter, r *http.Request) error {
	if _, err := query(r); err != nil {
		return err
	}
	d, ok := s.svc.(Digester)
	if !ok {
		return invalidf("this server keeps no digests")
	}
	writeJSON(w, http.StatusOK, d.DigestReport())
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
	d, ok := s.svc.(Digester)
	if !ok {
		return invalidf("this server keeps no digests")
	}
	d.Diverged(n)
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	return nil
}
