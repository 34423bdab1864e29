package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Access is what an API call does, as ACL rules name it.
type Access uint8

// The accesses, each implying the ones before it.
const (
	// AccessRead: lock get/list/watch, sequencer check (and the election
	// leader/observe recipes built on them).
	AccessRead Access = iota + 1
	// AccessWrite: acquire and release (and read).
	AccessWrite
	// AccessAdmin: cluster, members, ACL management, any session:
	// everything.
	AccessAdmin
)

// Rule is one ACL rule: an access on the lock names that start with Prefix
// (every name for admin).
type Rule struct {
	Access Access
	Prefix string
}

// Rules are a token's rules: it may do what one of them allows.
type Rules []Rule

// MaxRules bounds the rules of one token.
const MaxRules = 64

// ParseRules parses rules as written: "read:PREFIX", "write:PREFIX" (an
// empty prefix: every lock) or "admin".
func ParseRules(ss []string) (Rules, error) {
	if len(ss) == 0 {
		return nil, Errorf(CodeInvalidArgument, "a token needs at least one rule")
	}
	if len(ss) > MaxRules {
		return nil, Errorf(CodeInvalidArgument, "%d rules, at most %d", len(ss), MaxRules)
	}
	out := make(Rules, 0, len(ss))
	for _, s := range ss {
		if s == "admin" {
			out = append(out, Rule{Access: AccessAdmin})
			continue
		}
		kind, prefix, ok := strings.Cut(s, ":")
		var a Access
		switch kind {
		case "read":
			a = AccessRead
		case "write":
			a = AccessWrite
		}
		if !ok || a == 0 {
			return nil, Errorf(CodeInvalidArgument, "rule %q: want read:PREFIX, write:PREFIX or admin", s)
		}
		if err := CheckPrefix(prefix); err != nil {
			return nil, Errorf(CodeInvalidArgument, "rule %q: %s", s, err.(*Error).Message)
		}
		out = append(out, Rule{Access: a, Prefix: prefix})
	}
	return out, nil
}

// Allows reports whether the rules allow access a on the lock called name
// (name is ignored for admin). It is the one authorization rule of the
// API: write implies read on its prefix, admin implies everything.
func (rs Rules) Allows(a Access, name string) bool {
	for _, r := range rs {
		if r.Access == AccessAdmin {
			return true
		}
		if a != AccessAdmin && r.Access >= a && strings.HasPrefix(name, r.Prefix) {
			return true
		}
	}
	return false
}

// Strings writes the rules back as ParseRules reads them.
func (rs Rules) Strings() []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		switch r.Access {
		case AccessAdmin:
			out = append(out, "admin")
		case AccessWrite:
			out = append(out, "write:"+r.Prefix)
		default:
			out = append(out, "read:"+r.Prefix)
		}
	}
	return out
}

// Principal is the token an API call was authenticated with.
type Principal struct {
	// TokenID is the token's public id (never its secret).
	TokenID string
	Name    string
	Rules   Rules
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p: the HTTP layer attaches the
// authenticated token to every request's context; with ACLs on, the node
// refuses a call without one (unauthenticated).
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal ctx carries.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// HashSecret is how a token's secret is stored and looked up: the hex
// SHA-256 of the secret. Secrets are 32 random bytes, so a plain hash
// cannot be brute-forced; a lookup by hash leaks nothing a constant-time
// compare would protect.
func HashSecret(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// ParseBearer returns the secret of an Authorization header's value
// "Bearer SECRET" (scheme case-insensitive, RFC 6750). A missing or
// malformed header is unauthenticated.
func ParseBearer(v string) (string, error) {
	if v == "" {
		return "", Errorf(CodeUnauthenticated, "missing Authorization: Bearer <token>")
	}
	scheme, secret, ok := strings.Cut(v, " ")
	secret = strings.TrimLeft(secret, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || secret == "" || len(secret) > MaxSecretLen ||
		strings.ContainsAny(secret, " \t\r\n") {
		return "", Errorf(CodeUnauthenticated, "malformed Authorization header: want Bearer <token>")
	}
	return secret, nil
}

// MaxSecretLen bounds a presented secret (ours are 64 hex digits).
const MaxSecretLen = 256

// BootstrapRequest is the body of POST /v1/acl/bootstrap. ResetSecret is
// needed only for a bootstrap reset (a cluster already bootstrapped): it
// must match the secret the operator wrote into the reset file of the
// leader's data dir, so that only whoever wrote it can use it.
type BootstrapRequest struct {
	ResetSecret string `json:"reset_secret,omitempty"`
}

// MinResetSecretLen is the shortest reset secret a reset file may hold
// (16 characters: 64 bits or more of a random hex string).
const MinResetSecretLen = 16

// Check validates the request.
func (r BootstrapRequest) Check() error {
	return CheckText("reset_secret", r.ResetSecret, 0, MaxSecretLen)
}

// TokenRequest creates a token (POST /v1/acl/tokens).
type TokenRequest struct {
	Name  string   `json:"name"`
	Rules []string `json:"rules"`
}

// Check validates the request.
func (r TokenRequest) Check() (Rules, error) {
	if err := CheckText("token name", r.Name, 0, MaxSessionNameBytes); err != nil {
		return nil, err
	}
	return ParseRules(r.Rules)
}

// TokenSecret is a created token: its id and its secret, shown once.
type TokenSecret struct {
	ID     string `json:"id"`
	Secret string `json:"secret"`
}

// TokenInfo describes a token (never its secret).
type TokenInfo struct {
	ID      string   `json:"id"`
	Name    string   `json:"name,omitempty"`
	Rules   []string `json:"rules"`
	Created int64    `json:"created"`
}

// CheckTokenID validates a token id (32 hex digits).
func CheckTokenID(id string) error {
	if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
		return Errorf(CodeInvalidArgument, "token id: want 32 lowercase hex digits")
	}
	return nil
}

func (a Access) String() string {
	switch a {
	case AccessRead:
		return "read"
	case AccessWrite:
		return "write"
	case AccessAdmin:
		return "admin"
	}
	return fmt.Sprintf("access(%d)", uint8(a))
}
