package main

import (
	"context"
	"fmt"

	"github.com/raftlock/raftlock/session/api"
	"github.com/raftlock/raftlock/transport"
)

// lockPrefix is the prefix of every lock a run's clients take; with ACLs
// on, their token may write under it and nowhere else.
const lockPrefix = "check/"

// enableACL starts every node with --acl from then on; setupACL, once
// the cluster is up, bootstraps it.
func (c *cluster) enableACL() { c.args = append(c.args, "--acl") }

// setupACL bootstraps the ACLs of a fresh cluster with ACLs on and
// creates the clients' token, whose rules allow writes under lockPrefix
// only: the workload's every call then passes the ACL checks a real
// deployment's would. It returns that token's secret, and keeps the
// management token's for the membership faults (c.admin).
func (c *cluster) setupACL(ctx context.Context) (string, error) {
	cl, err := transport.NewClient(c.apiAddrs(), transport.WithTLS(c.clientTLS))
	if err != nil {
		return "", err
	}
	defer cl.CloseIdleConnections()
	mgmt, err := cl.ACLBootstrap(ctx)
	if err != nil {
		return "", fmt.Errorf("acl bootstrap: %w", err)
	}
	c.admin = mgmt.Secret
	admin, err := transport.NewClient(c.apiAddrs(), transport.WithTLS(c.clientTLS), transport.WithToken(mgmt.Secret))
	if err != nil {
		return "", err
	}
	defer admin.CloseIdleConnections()
	tok, err := admin.CreateToken(ctx, api.TokenRequest{Name: "raftlock-check clients", Rules: []string{"write:" + lockPrefix}})
	if err != nil {
		return "", fmt.Errorf("acl: create the clients' token: %w", err)
	}
	return tok.Secret, nil
}
