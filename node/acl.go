package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/fsm"
)

// ACLEnabled reports whether the node enforces ACLs (Config.ACL).
func (n *Node) ACLEnabled() bool { return n.cfg.ACL }

// Authenticate finds the token whose secret is secret in this replica's
// state: the hash of the secret is looked up, so there is no secret to
// compare in constant time. The HTTP layer calls it past forwarding, on
// the leader, whose state holds every committed token change once it
// serves (ready): a deleted token is refused from the moment its delete
// was answered.
func (n *Node) Authenticate(ctx context.Context, secret string) (api.Principal, error) {
	if !n.ready.Load() && !n.cfg.Faults.localReads() {
		return api.Principal{}, n.noLeader()
	}
	t, ok := n.fsm.TokenByHash(api.HashSecret(secret))
	if !ok {
		return api.Principal{}, api.Errorf(api.CodeUnauthenticated, "unknown token")
	}
	rules, err := api.ParseRules(t.Rules)
	if err != nil {
		return api.Principal{}, api.Errorf(api.CodeInternal, "token %s: stored rules: %v", t.ID, err)
	}
	return api.Principal{TokenID: t.ID, Name: t.Name, Rules: rules}, nil
}

// principal is the caller's token with ACLs on (ok false with ACLs off);
// a call without one is unauthenticated.
func (n *Node) principal(ctx context.Context) (api.Principal, bool, error) {
	if !n.cfg.ACL {
		return api.Principal{}, false, nil
	}
	p, ok := api.PrincipalFrom(ctx)
	if !ok {
		return api.Principal{}, false, api.Errorf(api.CodeUnauthenticated, "ACLs are on: this call needs a token")
	}
	return p, true, nil
}

// authorize is the one place where a call's token is checked against the
// ACL rule (api.Rules.Allows): access a on the lock name (or everything,
// for admin).
func (n *Node) authorize(ctx context.Context, a api.Access, name string) error {
	p, on, err := n.principal(ctx)
	if err != nil || !on {
		return err
	}
	if !p.Rules.Allows(a, name) {
		if a == api.AccessAdmin {
			return api.Errorf(api.CodePermissionDenied, "token %s: admin only", p.TokenID)
		}
		return api.Errorf(api.CodePermissionDenied, "token %s: no %s access to %q", p.TokenID, a, name)
	}
	return nil
}

// authorizeSession lets the token that opened session id (or an admin)
// use it. An unknown session passes: the call answers session_not_found.
func (n *Node) authorizeSession(ctx context.Context, id string) error {
	p, on, err := n.principal(ctx)
	if err != nil || !on {
		return err
	}
	s, ok := n.fsm.Session(id)
	if !ok || s.Owner == p.TokenID || p.Rules.Allows(api.AccessAdmin, "") {
		return nil
	}
	return api.Errorf(api.CodePermissionDenied, "session (handle %s) belongs to another token", api.SessionHandle(id))
}

// owner is the id of the token a new session belongs to ("" with ACLs off).
func (n *Node) owner(ctx context.Context) (string, error) {
	p, on, err := n.principal(ctx)
	if err != nil || !on {
		return "", err
	}
	return p.TokenID, nil
}

func (n *Node) aclOn() error {
	if !n.cfg.ACL {
		return api.Errorf(api.CodeInvalidArgument, "ACLs are off on this cluster (raftlockd --acl)")
	}
	return nil
}

// newToken draws a token: a 128-bit id and a 256-bit secret (hex), from
// crypto/rand, on the leader. Only the secret's hash goes into the command.
func newToken(name string, rules []string) (*fsm.Token, string, error) {
	var id [16]byte
	var secret [32]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, "", api.Errorf(api.CodeInternal, "token id: %v", err)
	}
	if _, err := rand.Read(secret[:]); err != nil {
		return nil, "", api.Errorf(api.CodeInternal, "token secret: %v", err)
	}
	s := hex.EncodeToString(secret[:])
	return &fsm.Token{ID: hex.EncodeToString(id[:]), Name: name, Hash: api.HashSecret(s), Rules: rules}, s, nil
}

// ACLBootstrap creates the management token (rules: admin), once per
// cluster, and answers its secret: the only time it is shown. Later calls
// are permission_denied.
func (n *Node) ACLBootstrap(ctx context.Context, req api.BootstrapRequest) (api.TokenSecret, error) {
	if err := n.aclOn(); err != nil {
		return api.TokenSecret{}, err
	}
	if n.fsm.ACLBootstrapped() {
		return n.bootstrapAgain(ctx, req.ResetSecret)
	}
	t, secret, err := newToken("management", []string{"admin"})
	if err != nil {
		return api.TokenSecret{}, err
	}
	res, err := n.propose(ctx, &fsm.Command{Type: fsm.CmdACLBootstrap, ACLBootstrap: t})
	if err != nil {
		return api.TokenSecret{}, err
	}
	if res.Status == fsm.StatusAlreadyBootstrapped {
		return api.TokenSecret{}, n.errBootstrapped()
	}
	if err := mapStatus(res, "acl bootstrap"); err != nil {
		return api.TokenSecret{}, err
	}
	return api.TokenSecret{ID: t.ID, Secret: secret}, nil
}

// CreateToken creates a token (admin) and answers its secret, once.
func (n *Node) CreateToken(ctx context.Context, req api.TokenRequest) (api.TokenSecret, error) {
	if err := n.aclOn(); err != nil {
		return api.TokenSecret{}, err
	}
	if err := n.authorize(ctx, api.AccessAdmin, ""); err != nil {
		return api.TokenSecret{}, err
	}
	rules, err := req.Check()
	if err != nil {
		return api.TokenSecret{}, err
	}
	t, secret, err := newToken(req.Name, rules.Strings())
	if err != nil {
		return api.TokenSecret{}, err
	}
	res, err := n.propose(ctx, &fsm.Command{Type: fsm.CmdCreateToken, CreateToken: t})
	if err != nil {
		return api.TokenSecret{}, err
	}
	if err := mapStatus(res, "create token"); err != nil {
		return api.TokenSecret{}, err
	}
	return api.TokenSecret{ID: t.ID, Secret: secret}, nil
}

// Tokens lists the tokens (admin), without secrets or hashes.
func (n *Node) Tokens(ctx context.Context) ([]api.TokenInfo, error) {
	if err := n.aclOn(); err != nil {
		return nil, err
	}
	if err := n.authorize(ctx, api.AccessAdmin, ""); err != nil {
		return nil, err
	}
	if err := n.verifyRead(ctx); err != nil {
		return nil, err
	}
	out := []api.TokenInfo{}
	for _, t := range n.fsm.Tokens() {
		out = append(out, api.TokenInfo{ID: t.ID, Name: t.Name, Rules: t.Rules, Created: t.Created})
	}
	return out, nil
}

// DeleteToken deletes a token (admin) and closes its sessions, releasing
// their locks at once, without lock-delay (DESIGN.md).
func (n *Node) DeleteToken(ctx context.Context, id string) error {
	if err := n.aclOn(); err != nil {
		return err
	}
	if err := n.authorize(ctx, api.AccessAdmin, ""); err != nil {
		return err
	}
	if err := api.CheckTokenID(id); err != nil {
		return err
	}
	res, err := n.propose(ctx, &fsm.Command{Type: fsm.CmdDeleteToken, DeleteToken: &fsm.TokenRef{ID: id}})
	if err != nil {
		return err
	}
	if res.Status == fsm.StatusTokenNotFound {
		return api.Errorf(api.CodeNotFound, "token %s: unknown", id)
	}
	if t := n.leadership(); t != nil && n.cfg.Faults.revokeWithoutNotice() {
		t.endDelaysNow()
	}
	return mapStatus(res, "delete token")
}
