package httpapi

import (
	"net/http"
	"strconv"

	"github.com/raftlock/raftlock/api"
)

func (s *Server) handleMembers(w http.ResponseWriter, r *http.Request) error {
	if _, err := query(r); err != nil {
		return err
	}
	members, err := s.svc.Members(r.Context())
	if err != nil {
		return err
	}
	if members == nil {
		members = []api.Member{}
	}
	writeJSON(w, http.StatusOK, api.MembersReply{Members: members})
	return nil
}

func (s *Server) handleAddMember(w http.ResponseWriter, r *http.Request) error {
	var m api.Member
	if err := decodeBody(w, r, &m); err != nil {
		return err
	}
	if err := m.Validate(); err != nil {
		return err
	}
	if err := s.svc.AddMember(r.Context(), m); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, m)
	return nil
}

func (s *Server) handleRemoveMember(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r, "force")
	if err != nil {
		return err
	}
	force := false
	if v := q.Get("force"); v != "" {
		if force, err = strconv.ParseBool(v); err != nil {
			return invalidf("force=%s: want true or false", shown(v))
		}
	}
	if err := decodeBody(w, r, &struct{}{}); err != nil {
		return err
	}
	if err := s.svc.RemoveMember(r.Context(), r.PathValue("id"), force); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.DeletedReply{Deleted: true})
	return nil
}

func (s *Server) handleTransferLeadership(w http.ResponseWriter, r *http.Request) error {
	var b api.TransferBody
	if err := decodeBody(w, r, &b); err != nil {
		return err
	}
	out, err := s.svc.TransferLeadership(r.Context(), b.To)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) handleBootstrapState(w http.ResponseWriter, r *http.Request) error {
	if _, err := query(r); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.svc.BootstrapState())
	return nil
}
