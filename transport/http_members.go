package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
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
	Members(ctx context.Context) ([]Member, error)
	// AddMember adds m to the Raft configuration, as a voter when m.Voter,
	// and records its HTTP address. Adding a member as it already is
	// succeeds and changes nothing.
	AddMember(ctx context.Context, m Member) error
	// RemoveMember removes member id from the Raft configuration. It is
	// refused (invalid_argument) when it would leave fewer than 2 voters,
	// unless force.
	RemoveMember(ctx context.Context, id string, force bool) error
	// TransferLeadership hands leadership to voter to ("": the most
	// up-to-date voter) and answers who leads afterwards, when known.
	TransferLeadership(ctx context.Context, to string) (TransferReply, error)
}

// BootstrapStater is what a Service implements to answer the bootstrap
// probe (GET /v1/internal/bootstrap-state, peer port only): whether this
// node holds Raft state, so that a node with an empty data dir never
// bootstraps a second cluster next to an existing one.
type BootstrapStater interface {
	BootstrapState() BootstrapState
}

// BootstrapState is a node's answer to the bootstrap probe.
type BootstrapState struct {
	// ID is the answering node's id.
	ID string `json:"id"`
	// HasState is true once the node holds Raft state (a log, a snapshot
	// or a term).
	HasState bool `json:"has_state"`
	// Term and LastIndex are the node's Raft term and last log index.
	Term      uint64 `json:"term"`
	LastIndex uint64 `json:"last_index"`
	// Servers is the node's latest Raft configuration (with HasState), or
	// the configuration it proposes to bootstrap (without).
	Servers []Member `json:"servers"`
	// Restoring, without state, says the node bootstraps the new cluster
	// from a backup (raftlockd --restore): the other peers start empty
	// and receive that state from it, so that the cluster serves nothing
	// before the restored state.
	Restoring bool `json:"restoring,omitempty"`
	// Leader is the leader the node knows ("" if none).
	Leader string `json:"leader,omitempty"`
	// StorageWriteMicros is the moving average of the node's log-store
	// write latency, fsync included, in µs (0: unknown, or no write yet);
	// StorageFailing says a store of it fails. A leader whose disk is much
	// slower than a follower's hands leadership over (DESIGN, "Disks").
	StorageWriteMicros int64 `json:"storage_write_us,omitempty"`
	StorageFailing     bool  `json:"storage_failing,omitempty"`
	// Ready, without state, says the node has seen every peer with an
	// empty data dir and the same configuration: it bootstraps once its
	// peers are ready too.
	Ready bool `json:"ready,omitempty"`
}

// MembersReply is the answer of GET /v1/cluster/members.
type MembersReply struct {
	Members []Member `json:"members"`
}

// TransferBody is the body of POST /v1/cluster/transfer-leadership: the
// voter to hand leadership to ("" or absent: the most up-to-date one).
type TransferBody struct {
	To string `json:"to,omitempty"`
}

// TransferReply answers POST /v1/cluster/transfer-leadership: the old
// leader and the new one ("" if not known yet when the answer was sent).
type TransferReply struct {
	From string `json:"from"`
	To   string `json:"to"`
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
		members = []Member{}
	}
	writeJSON(w, http.StatusOK, MembersReply{Members: members})
	return nil
}

func (s *Server) handleAddMember(w http.ResponseWriter, r *http.Request) error {
	var m Member
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
	writeJSON(w, http.StatusOK, DeletedReply{Deleted: true})
	return nil
}

func (s *Server) handleTransferLeadership(w http.ResponseWriter, r *http.Request) error {
	var b TransferBody
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

// BootstrapProbeHandler serves the bootstrap probe alone (GET
// /v1/internal/bootstrap-state, answered by state), for a node's peer port
// while the node decides whether to bootstrap, before it serves its API.
// Every other request is answered no_leader.
func BootstrapProbeHandler(state func() BootstrapState) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == bootstrapStatePath {
			writeJSON(w, http.StatusOK, state())
			return
		}
		writeJSON(w, StatusOf(api.CodeNoLeader), ErrorReply{Error: ErrorBody{Code: string(api.CodeNoLeader),
			Message: "node is starting: it is deciding whether to bootstrap"}})
	})
}

const bootstrapStatePath = "/v1/internal/bootstrap-state"

// GetBootstrapState asks the node at peer port addr whether it holds Raft
// state (the bootstrap probe), dialling with dial (nil: a plain dialer).
func GetBootstrapState(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), addr string) (BootstrapState, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+bootstrapStatePath, nil)
	if err != nil {
		return BootstrapState{}, fmt.Errorf("bootstrap probe of %s: %w", addr, err)
	}
	tr := &http.Transport{DialContext: dial, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return BootstrapState{}, fmt.Errorf("bootstrap probe of %s: %w", addr, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return BootstrapState{}, fmt.Errorf("bootstrap probe of %s: %w", addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		return BootstrapState{}, fmt.Errorf("bootstrap probe of %s: HTTP %d: %s", addr, resp.StatusCode, bytes.TrimSpace(data))
	}
	var st BootstrapState
	if err := json.Unmarshal(data, &st); err != nil {
		return BootstrapState{}, fmt.Errorf("bootstrap probe of %s: %w", addr, err)
	}
	return st, nil
}
