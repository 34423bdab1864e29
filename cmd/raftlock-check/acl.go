package main

import (
	"context"
	"fmt"

	"github.com/raftlock/raftlock/transport/client"
)

// lockPrefix is the prefix of every lock a run's clients take; with ACLs
// on, their token may write under it and nowhere else.
const lockPrefix = "check/"

// enableACL starts every node with --acl from then on; setupACL, once
// the cluster is up, bootstraps it.
func (c *cluster) enableACL() { c.args = append(c.args, "--acl") }

// setupACL bootstraps the ACLs of a fresh cluster with ACLs on and
// creates a token for each of the clients, whose rules allow writes under
// lockPrefix only: the workload's every call then passes the ACL checks a
// real deployment's would, and one client's token can be deleted
// (delete-token). It returns the tokens, and keeps the management token's
// secret for the membership faults and the operator actions (c.admin).
func (c *cluster) setupACL(ctx context.Context, clients int) ([]clientToken, error) {
	cl, err := client.NewClient(c.apiAddrs(), client.WithTLS(c.clientTLS))
	if err != nil {
		return nil, err
	}
	defer cl.CloseIdleConnections()
	mgmt, err := cl.ACLBootstrap(ctx)
	if err != nil {
		return nil, fmt.Errorf("acl bootstrap: %w", err)
	}
	c.admin = mgmt.Secret
	var toks []clientToken
	for i := 0; i < clients; i++ {
		tok, err := c.newClientToken(ctx, i)
		if err != nil {
			return nil, err
		}
		toks = append(toks, tok)
	}
	return toks, nil
}
