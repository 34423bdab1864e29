package node

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/fsm"
)

// ACLBootstrapResetFile is the file, in the data dir of the node that
// leads, through which an operator allows one more ACL bootstrap after
// the answer of the first was lost (Consul's bootstrap reset): it holds
// the reset index that a refused bootstrap names. Only someone who can
// write a node's data dir can use it; the leader removes it once used.
const ACLBootstrapResetFile = "acl-bootstrap-reset"

// errBootstrapped refuses a bootstrap after the first, naming the reset
// index and the way back.
func (n *Node) errBootstrapped() error {
	idx := n.fsm.ACLBootstrapResetIndex()
	return api.Errorf(api.CodePermissionDenied, "ACLs were already bootstrapped on this cluster (reset index: %d); "+
		"if the management token is lost, write %d into %s in the data dir of the node that leads and bootstrap again",
		idx, idx, ACLBootstrapResetFile)
}

// bootstrapAgain is an ACL bootstrap on a bootstrapped cluster: refused
// unless this node's data dir holds the reset file with the current reset
// index; then a new management token is created (the earlier tokens stay;
// delete the lost one once in), the file is removed, and the reset index
// moves, so that neither the file nor a replay of the request allows
// another.
func (n *Node) bootstrapAgain(ctx context.Context) (api.TokenSecret, error) {
	idx := n.fsm.ACLBootstrapResetIndex()
	path := filepath.Join(n.cfg.DataDir, ACLBootstrapResetFile)
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return api.TokenSecret{}, n.errBootstrapped()
	case err != nil:
		return api.TokenSecret{}, api.Errorf(api.CodeInternal, "acl bootstrap reset: %v", err)
	}
	if got, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64); err != nil || got != idx {
		return api.TokenSecret{}, api.Errorf(api.CodePermissionDenied,
			"ACLs were already bootstrapped on this cluster: %s in this node's data dir does not hold the reset index %d", ACLBootstrapResetFile, idx)
	}
	if err := n.needCommands(ctx, fsm.VersionTokenLimits, "acl bootstrap reset"); err != nil {
		return api.TokenSecret{}, err
	}
	t, secret, err := newToken("management", []string{"admin"})
	if err != nil {
		return api.TokenSecret{}, err
	}
	res, err := n.propose(ctx, &fsm.Command{Type: fsm.CmdACLBootstrapReset,
		ACLBootstrapReset: &fsm.ACLBootstrapReset{ResetIndex: idx, Token: *t}})
	if err != nil {
		return api.TokenSecret{}, err
	}
	if res.Status == fsm.StatusAlreadyBootstrapped {
		return api.TokenSecret{}, n.errBootstrapped()
	}
	if err := mapStatus(res, "acl bootstrap reset"); err != nil {
		return api.TokenSecret{}, err
	}
	if err := os.Remove(path); err != nil {
		n.log.Warn("acl bootstrap reset: remove the reset file", "file", path, "error", err)
	}
	n.log.Warn("ACL bootstrap reset: a new management token was created", "token", t.ID, "reset_index", idx)
	return api.TokenSecret{ID: t.ID, Secret: secret}, nil
}
