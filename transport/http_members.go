package transport

import (
	"context"
	"net/http"
	"strconv"

	"github.com/raftlock/raftlock/api"
)

// MembershipService is what a Service implements to serve membership and
// leadership transfer (node.Node does): GET, POST and DELETE
// /v1/cluster/members and POST /v1/cluster/transfer-leadership, all admin
// calls forwarded to the leader.
type MembershipService interface {
	// Members lists the Raft configuration with each member's HTTP
	// address (leader only).
	Members(ctx context.Context) ([]api.Member, error)
	// AddMember adds m to the Raft configuration, as a voter when m.Voter,
	// and records its HTTP address. Adding a member as it already is
	// succeeds and changes nothing.
	AddMember(ctx context.Context, m api.Member) error
	// RemoveMember removes member id from the Raft configuration. It is
	// refused (invalid_argument) when it would leave fewer than 2 voters,
	// unless force.
	RemoveMember(ctx context.Context, id string, force bool) error
	// TransferLeadership hands leadership to voter to ("": the most
	// up-to-date voter) and answers who leads afterwards, when known.
	TransferLeadership(ctx context.Context, to string) (api.TransferReply, error)
}

// BootstrapStater is what a Service implements to answer the bootstrap
// probe (GET /v1/internal/bootstrap-state, peer port only): whether this
// node holds Raft state, so that a node with an empty data dir never
// bootstraps a second cluster next to an existing one.
type BootstrapStater interface {
	BootstrapState() api.BootstrapState
}

// membership returns the server's MembershipService.
func (s *Server) membership() (MembershipService, error) {
	ms, ok := s.svc.(MembershipService)
	if !ok {
		return nil, invalidf("this server does not manage membership")
	}
	return ms, nil
}

func (s *Server) handleMembers(w http.ResponseWriter, r *http.Request) error {
	if _, err := query(r); err != nil {
		return err
	}
	ms, err := s.membership()
	if err != nil {
		return err
	}
	members, err := ms.Members(r.Context())
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
	ms, err := s.membership()
	if err != nil {
		return err
	}
	if err := ms.AddMember(r.Context(), m); err != nil {
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
	ms, err := s.membership()
	if err != nil {
		return err
	}
	if err := ms.RemoveMember(r.Context(), r.PathValue("id"), force); err != nil {
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
	ms, err := s.membership()
	if err != nil {
		return err
	}
	out, err := ms.TransferLeadership(r.Context(), b.To)
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
	bs, ok := s.svc.(BootstrapStater)
	if !ok {
		return invalidf("this server does not answer the bootstrap probe")
	}
	writeJSON(w, http.StatusOK, bs.BootstrapState())
	return nil
}
