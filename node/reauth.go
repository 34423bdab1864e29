package node

import (
	"context"

	"github.com/raftlock/raftlock/api"
)

// reauthorize checks, with ACLs on, that the caller's token still exists
// once a blocking read's wait has ended and its answer has been read: a
// token deleted while the read waited is unauthenticated, and must not
// receive state written after its deletion. A token's rules never change,
// so its existence is all there is to check again. Called after the state
// is read, so a delete applied before or during that read is seen.
func (n *Node) reauthorize(ctx context.Context) error {
	p, on, err := n.principal(ctx)
	if err != nil || !on {
		return err
	}
	if !n.fsm.HasToken(p.TokenID) {
		return api.Errorf(api.CodeUnauthenticated, "token %s was deleted while the request waited", p.TokenID)
	}
	return nil
}
