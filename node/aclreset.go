package node

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/fsm"
)

// ACLBootstrapResetFile is the file, in the data dir of the node that
// leads, through which an operator allows one more ACL bootstrap after
// the answer of the first was lost (Consul's bootstrap reset). It holds
// the reset index that a refused bootstrap names and a reset secret the
// operator chose, "INDEX SECRET" (or "INDEX sha256:HEX", the SHA-256 of
// the secret); the bootstrap must carry the secret. So only whoever can
// write a node's data dir can allow it, and only they can use it: a
// client polling the bootstrap endpoint gets nothing from the file. The
// leader removes the file once used.
const ACLBootstrapResetFile = "acl-bootstrap-reset"

// resetHow is the way back that every refusal of a reset names.
const resetHow = "write \"%d SECRET\" (a secret of %d characters or more that you choose, or sha256:HEX of it) " +
	"into %s in the data dir of the node that leads, and run: raftlock acl bootstrap --reset-secret-file FILE " +
	"(a file holding the secret, e.g. that one)"

// errBootstrapped refuses a bootstrap after the first, naming the reset
// index and the way back.
func (n *Node) errBootstrapped() error {
	idx := n.fsm.ACLBootstrapResetIndex()
	return api.Errorf(api.CodePermissionDenied, "ACLs were already bootstrapped on this cluster (reset index: %d); "+
		"if the management token is lost, "+resetHow, idx, idx, api.MinResetSecretLen, ACLBootstrapResetFile)
}

// resetFile is what a reset file allows: the reset index and the SHA-256
// of the reset secret.
type resetFile struct {
	index uint64
	hash  [sha256.Size]byte
}

// parseResetFile reads a reset file's text: "INDEX SECRET" or "INDEX
// sha256:HEX". A file of the index alone (the format before the secret)
// is refused with the way forward.
func parseResetFile(text string) (resetFile, error) {
	f := strings.Fields(text)
	if len(f) == 0 {
		return resetFile{}, fmt.Errorf("it is empty")
	}
	var rf resetFile
	var err error
	if rf.index, err = strconv.ParseUint(f[0], 10, 64); err != nil {
		return resetFile{}, fmt.Errorf("it does not start with a reset index")
	}
	switch {
	case len(f) == 1:
		return resetFile{}, fmt.Errorf("it holds no reset secret")
	case len(f) > 2:
		return resetFile{}, fmt.Errorf("it holds %d fields; want the reset index and the secret", len(f))
	}
	if hexHash, ok := strings.CutPrefix(f[1], "sha256:"); ok {
		b, err := hex.DecodeString(hexHash)
		if err != nil || len(b) != sha256.Size {
			return resetFile{}, fmt.Errorf("its sha256: is not %d hex digits", 2*sha256.Size)
		}
		copy(rf.hash[:], b)
		return rf, nil
	}
	if len(f[1]) < api.MinResetSecretLen {
		return resetFile{}, fmt.Errorf("its secret is %d characters; the shortest is %d", len(f[1]), api.MinResetSecretLen)
	}
	rf.hash = sha256.Sum256([]byte(f[1]))
	return rf, nil
}

// bootstrapAgain is an ACL bootstrap on a bootstrapped cluster: refused
// unless this node's data dir holds the reset file with the current reset
// index and the secret the request carries (resetSecret); then a new
// management token is created (the earlier tokens stay; delete the lost
// one once in), the file is removed, and the reset index moves, so that
// neither the file nor a replay of the request allows another.
func (n *Node) bootstrapAgain(ctx context.Context, resetSecret string) (api.TokenSecret, error) {
	idx := n.fsm.ACLBootstrapResetIndex()
	path := filepath.Join(n.cfg.DataDir, ACLBootstrapResetFile)
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return api.TokenSecret{}, n.errBootstrapped()
	case errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE):
		// Out of file descriptors: it passes (retryable), and nothing
		// is granted meanwhile.
		return api.TokenSecret{}, api.Errorf(api.CodeResourceExhausted, "acl bootstrap reset: the node is out of file descriptors: try again: %v", err)
	case err != nil:
		return api.TokenSecret{}, api.Errorf(api.CodeInternal, "acl bootstrap reset: %v", err)
	}
	rf, err := parseResetFile(string(data))
	if err != nil {
		return api.TokenSecret{}, api.Errorf(api.CodePermissionDenied,
			"ACLs were already bootstrapped on this cluster: %s in this node's data dir is not a reset file (%v); "+resetHow,
			ACLBootstrapResetFile, err, idx, api.MinResetSecretLen, ACLBootstrapResetFile)
	}
	if rf.index != idx {
		return api.TokenSecret{}, api.Errorf(api.CodePermissionDenied,
			"ACLs were already bootstrapped on this cluster: %s in this node's data dir does not hold the reset index %d", ACLBootstrapResetFile, idx)
	}
	got := sha256.Sum256([]byte(resetSecret))
	if resetSecret == "" || subtle.ConstantTimeCompare(got[:], rf.hash[:]) != 1 {
		// Never says how it differs; the secret is never logged.
		n.log.Warn("acl bootstrap reset refused: the request's reset secret does not match the reset file's", "file", path)
		return api.TokenSecret{}, api.Errorf(api.CodePermissionDenied,
			"acl bootstrap reset: the request carries no reset secret, or not the one in %s (raftlock acl bootstrap --reset-secret-file FILE)",
			ACLBootstrapResetFile)
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
