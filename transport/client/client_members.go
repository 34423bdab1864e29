package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/raftlock/raftlock/api"
)

// Members lists the cluster's members (admin): the Raft configuration,
// each with its HTTP address and whether it votes.
func (c *Client) Members(ctx context.Context) ([]api.Member, error) {
	var out api.MembersReply
	if _, err := c.do(ctx, &call{method: http.MethodGet, path: "/v1/cluster/members", out: &out, idempotent: true}); err != nil {
		return nil, err
	}
	return out.Members, nil
}

// AddMember adds m to the cluster (admin), as a voter when m.Voter, with
// its HTTP address recorded at once. It is idempotent: adding a member as
// it already is changes nothing.
func (c *Client) AddMember(ctx context.Context, m api.Member) error {
	var out api.Member
	_, err := c.do(ctx, &call{method: http.MethodPost, path: "/v1/cluster/members", out: &out, body: fixed(m), idempotent: true})
	return err
}

// RemoveMember removes member id from the cluster (admin). Unless force,
// it is refused (invalid_argument) when fewer than 2 voters would remain.
func (c *Client) RemoveMember(ctx context.Context, id string, force bool) error {
	var q url.Values
	if force {
		q = url.Values{"force": {"true"}}
	}
	var out api.DeletedReply
	_, err := c.do(ctx, &call{method: http.MethodDelete, path: "/v1/cluster/members/" + url.PathEscape(id), query: q, out: &out})
	return err
}

// TransferLeadership asks the leader to hand leadership to voter to (""
// lets the leader pick the most up-to-date voter), and answers the old
// and the new leader.
func (c *Client) TransferLeadership(ctx context.Context, to string) (api.TransferReply, error) {
	var out api.TransferReply
	if _, err := c.do(ctx, &call{method: http.MethodPost, path: "/v1/cluster/transfer-leadership", out: &out,
		body: fixed(api.TransferBody{To: to})}); err != nil {
		return api.TransferReply{}, err
	}
	return out, nil
}
