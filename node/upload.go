package node

import (
	"context"

	"github.com/raftlock/raftlock/api"
)

// AuthorizeRestore is Restore's authorisation alone (admin with ACLs on):
// the HTTP server asks it before it reads a byte of an uploaded backup.
func (n *Node) AuthorizeRestore(ctx context.Context) error {
	return n.authorize(ctx, api.AccessAdmin, "")
}

// SpoolDir is where an uploaded backup is written while it arrives: the
// node's data dir, on its own disk (not a tmpfs that would hold it in
// memory). The file (api.SpoolPattern) is removed once the request
// ends; one left by a crash mid-upload may be deleted.
func (n *Node) SpoolDir() string { return n.cfg.DataDir }
