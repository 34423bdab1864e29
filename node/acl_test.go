package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/api/apitest"
	"github.com/raftlock/raftlock/sequencer"
	"github.com/raftlock/raftlock/transport/client"
)

func newACLCluster(t *testing.T, logs *apitest.LogBuffer) *testCluster {
	return newTestCluster(t, 3, func(cfg *Config) {
		cfg.ACL = true
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: cfg.ID, Level: hclog.Trace, Output: logs})
	}, withHTTP)
}

// aclDo sends one request with secret as its bearer token ("": none),
// without retry, and returns the answer's status and error code.
func aclDo(ctx context.Context, addr, method, path, secret string, body any) (int, string, []byte) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, rd)
	if err != nil {
		return 0, err.Error(), nil
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error(), nil
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(data, &out)
	return resp.StatusCode, out.Error.Code, data
}

// bootstrapACL bootstraps the cluster's ACLs and returns the management
// token's secret and a client that sends it.
func (c *testCluster) bootstrapACL(t *testing.T, ctx context.Context) (string, *client.Client) {
	t.Helper()
	boot, err := c.client(t).ACLBootstrap(ctx)
	if err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
	return boot.Secret, tokenClient(t, c.httpAddrs, boot.Secret)
}

func tokenClient(t *testing.T, addrs []string, secret string) *client.Client {
	t.Helper()
	cl, err := client.NewClient(addrs, client.WithToken(secret))
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func codeOf(err error) api.Code {
	var e *api.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// TestACLEveryRouteAnswersTheCodeOfItsToken runs every route with no
// token, a read-only token, a write token for another prefix, a write
// token for the prefix, that token on another token's session, and the
// management token, and checks the exact answer of each; then that
// bootstrap works once, that a follower forwards the token, that a deleted
// token's sessions are closed with their locks free at once, and that no
// issued secret ever reaches a log line (the nodes log at Trace).
func TestACLEveryRouteAnswersTheCodeOfItsToken(t *testing.T) {
	logs := &apitest.LogBuffer{}
	c := newACLCluster(t, logs)
	ctx := ctxT(t)
	_, li := c.leader()
	addr := c.httpAddrs[li]
	var secrets []string

	mgmt, admin := c.bootstrapACL(t, ctx)
	secrets = append(secrets, mgmt)
	create := func(name string, rules ...string) api.TokenSecret {
		t.Helper()
		ts, err := admin.CreateToken(ctx, api.TokenRequest{Name: name, Rules: rules})
		if err != nil {
			t.Fatalf("create token %s: %v", name, err)
		}
		secrets = append(secrets, ts.Secret)
		return ts
	}
	read, other, write := create("read", "read:jobs/"), create("other", "write:other/"), create("write", "write:jobs/")
	open := func(secret string) string {
		t.Helper()
		info, err := tokenClient(t, c.httpAddrs, secret).OpenSession(ctx, api.OpenRequest{Name: "acl"})
		if err != nil {
			t.Fatalf("open session: %v", err)
		}
		return info.ID
	}
	sW, sO, sClose, sCloseAdmin := open(write.Secret), open(other.Secret), open(write.Secret), open(write.Secret)

	t.Run("bootstrap works once", func(t *testing.T) {
		for _, secret := range []string{"", mgmt} {
			if st, code, _ := aclDo(ctx, addr, "POST", "/v1/acl/bootstrap", secret, nil); st != 403 || code != "permission_denied" {
				t.Errorf("second bootstrap (token %v): %d %s, want 403 permission_denied", secret != "", st, code)
			}
		}
	})

	seq := sequencer.Sequencer{Name: "jobs/a", Mode: sequencer.Exclusive, Token: 1}.String()
	const unknownToken = "0123456789abcdef0123456789abcdef"
	type caller struct {
		name, secret, session string
	}
	callers := []caller{{"no token", "", sW}, {"read token", read.Secret, sW}, {"write token for another prefix", other.Secret, sW},
		{"write token", write.Secret, sW}, {"write token on another token's session", write.Secret, sO}, {"admin", mgmt, sW}}
	ok := ""
	for _, r := range []struct {
		route        string
		method, path string
		body         func(session string) any
		want         [6]string // per caller; "-": not asked
	}{
		{"open session", "POST", "/v1/sessions", func(string) any { return map[string]any{"name": "x"} },
			[6]string{"unauthenticated", ok, ok, ok, "-", ok}},
		{"keepalive", "POST", "/v1/sessions/{s}/keepalive", nil,
			[6]string{"unauthenticated", "permission_denied", "permission_denied", ok, "permission_denied", ok}},
		{"session info", "GET", "/v1/sessions/{s}", nil,
			[6]string{"unauthenticated", "permission_denied", "permission_denied", ok, "permission_denied", ok}},
		{"acquire", "POST", "/v1/acquire", func(s string) any { return map[string]any{"name": "jobs/a", "session": s, "holder": "h"} },
			[6]string{"unauthenticated", "permission_denied", "permission_denied", ok, "permission_denied", ok}},
		{"lock get", "GET", "/v1/lock?name=jobs/a", nil,
			[6]string{"unauthenticated", ok, "permission_denied", ok, "-", ok}},
		{"lock watch", "GET", "/v1/lock?name=jobs/a&index=1&wait=1ms", nil,
			[6]string{"unauthenticated", ok, "permission_denied", ok, "-", ok}},
		{"lock list of a readable prefix", "GET", "/v1/locks?prefix=jobs/", nil,
			[6]string{"unauthenticated", ok, "permission_denied", ok, "-", ok}},
		{"lock list of every lock", "GET", "/v1/locks", nil,
			[6]string{"unauthenticated", "permission_denied", "permission_denied", "permission_denied", "-", ok}},
		{"sequencer check", "POST", "/v1/sequencer/check", func(string) any { return map[string]any{"sequencer": seq} },
			[6]string{"unauthenticated", ok, "permission_denied", ok, "-", ok}},
		{"release", "POST", "/v1/release", func(s string) any { return map[string]any{"name": "jobs/a", "session": s, "holder": "h"} },
			[6]string{"unauthenticated", "permission_denied", "permission_denied", ok, "permission_denied", ok}},
		// Any valid token reads the members: the Go client follows them.
		{"cluster", "GET", "/v1/cluster", nil,
			[6]string{"unauthenticated", ok, ok, ok, "-", ok}},
		{"health", "GET", "/v1/health", nil, [6]string{ok, ok, ok, ok, "-", ok}},
		{"token create", "POST", "/v1/acl/tokens", func(string) any { return map[string]any{"name": "t", "rules": []string{"read:x/"}} },
			[6]string{"unauthenticated", "permission_denied", "permission_denied", "permission_denied", "-", ok}},
		{"token list", "GET", "/v1/acl/tokens", nil,
			[6]string{"unauthenticated", "permission_denied", "permission_denied", "permission_denied", "-", ok}},
		{"token delete", "DELETE", "/v1/acl/tokens/" + unknownToken, nil,
			[6]string{"unauthenticated", "permission_denied", "permission_denied", "permission_denied", "-", "not_found"}},
		// An operator's actions: admin only; an unknown lock or handle
		// is not_found.
		{"revoke", "POST", "/v1/locks/revoke", func(string) any { return map[string]any{"name": "jobs/none", "holder": "h", "reason": "r"} },
			[6]string{"unauthenticated", "permission_denied", "permission_denied", "permission_denied", "-", "not_found"}},
		{"request release", "POST", "/v1/locks/request-release", func(s string) any { return map[string]any{"name": "jobs/none", "session": s, "holder": "h"} },
			[6]string{"unauthenticated", "permission_denied", "permission_denied", "not_found", "permission_denied", "not_found"}},
		{"session list", "GET", "/v1/sessions", nil,
			[6]string{"unauthenticated", "permission_denied", "permission_denied", "permission_denied", "-", ok}},
		{"session close by handle", "POST", "/v1/sessions/close-by-handle", func(string) any { return map[string]any{"handle": "0123456789abcdef", "reason": "r"} },
			[6]string{"unauthenticated", "permission_denied", "permission_denied", "permission_denied", "-", "not_found"}},
		// The write token closes sClose, admin sCloseAdmin (admin last).
		{"close session", "DELETE", "/v1/sessions/{close}", nil,
			[6]string{"unauthenticated", "permission_denied", "permission_denied", ok, "permission_denied", ok}},
	} {
		for i, cl := range callers {
			want := r.want[i]
			if want == "-" {
				continue
			}
			session := cl.session
			path := strings.ReplaceAll(r.path, "{s}", session)
			closing := sClose
			if cl.name == "admin" {
				closing = sCloseAdmin
			}
			if cl.session == sO {
				closing = sO
			}
			path = strings.ReplaceAll(path, "{close}", closing)
			var body any
			if r.body != nil {
				body = r.body(session)
			}
			st, code, data := aclDo(ctx, addr, r.method, path, cl.secret, body)
			if want == ok {
				if st != 200 {
					t.Errorf("%s, %s: %d %s (%s), want 200", r.route, cl.name, st, code, data)
				}
				if r.route == "token create" {
					var ts api.TokenSecret
					_ = json.Unmarshal(data, &ts)
					secrets = append(secrets, ts.Secret)
				}
				continue
			}
			wantStatus := map[string]int{"unauthenticated": 401, "permission_denied": 403, "not_found": 404}[want]
			if st != wantStatus || code != want {
				t.Errorf("%s, %s: %d %s (%s), want %d %s", r.route, cl.name, st, code, data, wantStatus, want)
			}
		}
	}

	t.Run("an unknown or malformed token is unauthenticated", func(t *testing.T) {
		for _, h := range []string{"Bearer " + unknownToken, "Basic " + mgmt, "Bearer", mgmt} {
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/v1/locks?prefix=jobs/", nil)
			req.Header.Set("Authorization", h)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("Authorization %q: no WWW-Authenticate: Bearer challenge", strings.ReplaceAll(h, mgmt, "<admin>"))
			}
			if resp.StatusCode != 401 {
				t.Errorf("Authorization %q: %d, want 401", strings.ReplaceAll(h, mgmt, "<admin>"), resp.StatusCode)
			}
		}
	})

	t.Run("a follower forwards the token to the leader", func(t *testing.T) {
		follower := []string{c.httpAddrs[(li+1)%len(c.httpAddrs)]}
		if _, err := tokenClient(t, follower, read.Secret).LockState(ctx, "jobs/a"); err != nil {
			t.Errorf("read through a follower: %v", err)
		}
		_, err := tokenClient(t, follower, read.Secret).LockState(ctx, "other/a")
		if codeOf(err) != api.CodePermissionDenied {
			t.Errorf("read of another prefix through a follower: %v, want permission_denied", err)
		}
		cl, _ := client.NewClient(follower)
		if _, err := cl.LockState(ctx, "jobs/a"); codeOf(err) != api.CodeUnauthenticated {
			t.Errorf("no token through a follower: %v, want unauthenticated", err)
		}
	})

	t.Run("an embedded backend calls with its token", func(t *testing.T) {
		for i, n := range c.snapshotNodes() {
			if _, err := n.BackendWithToken(read.Secret).LockState(ctx, "jobs/a"); err != nil {
				t.Errorf("node %d: read with a read token: %v", i, err)
			}
			if _, err := n.BackendWithToken(read.Secret).Locks(ctx, ""); codeOf(err) != api.CodePermissionDenied {
				t.Errorf("node %d: list of every lock with a read:jobs/ token: %v, want permission_denied", i, err)
			}
			if _, err := n.Backend().LockState(ctx, "jobs/a"); codeOf(err) != api.CodeUnauthenticated {
				t.Errorf("node %d: Backend without a token: %v, want unauthenticated", i, err)
			}
		}
	})

	t.Run("token list shows no secret", func(t *testing.T) {
		ts, err := admin.Tokens(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(ts)
		for _, s := range secrets {
			if s != "" && strings.Contains(string(b), s) {
				t.Errorf("token list %s shows a secret", b)
			}
		}
		if len(ts) < 4 {
			t.Errorf("token list %s: want at least 4 tokens", b)
		}
	})

	t.Run("deleting a token ends its sessions; their locks wait out ttl plus lock-delay", func(t *testing.T) {
		doomed := create("doomed", "write:jobs/")
		dcl := tokenClient(t, c.httpAddrs, doomed.Secret)
		info, err := dcl.OpenSession(ctx, api.OpenRequest{Name: "doomed", LockDelay: api.MaxLockDelay})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dcl.Acquire(ctx, api.AcquireRequest{Name: "jobs/d", Session: info.ID, Holder: "h"}); err != nil {
			t.Fatal(err)
		}
		if err := admin.DeleteToken(ctx, doomed.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.SessionInfo(ctx, info.ID); codeOf(err) != api.CodeSessionNotFound {
			t.Errorf("the deleted token's session: %v, want session_not_found", err)
		}
		// Not free at once: the holder's client may believe it holds the
		// lock until its lease (ttl) and its lock-delay have passed.
		if _, err := tokenClient(t, c.httpAddrs, write.Secret).Acquire(ctx, api.AcquireRequest{Name: "jobs/d", Session: sW, Holder: "h2"}); codeOf(err) != api.CodeLockBusy {
			t.Errorf("acquire of the deleted token's lock: %v, want lock_busy until ttl + lock-delay", err)
		}
		if _, err := dcl.LockState(ctx, "jobs/d"); codeOf(err) != api.CodeUnauthenticated {
			t.Errorf("the deleted token: %v, want unauthenticated", err)
		}
		if err := admin.DeleteToken(ctx, doomed.ID); codeOf(err) != api.CodeNotFound {
			t.Errorf("second delete: %v, want not_found", err)
		}
	})

	t.Run("secrets never appear in logs", func(t *testing.T) {
		all := logs.String()
		if !strings.Contains(all, "[TRACE]") && !strings.Contains(all, "[DEBUG]") {
			t.Fatal("no Trace/Debug lines captured: the check would be vacuous")
		}
		for i, s := range secrets {
			if s == "" {
				t.Errorf("secret %d is empty", i)
				continue
			}
			if strings.Contains(all, s) {
				t.Errorf("secret %d appears in the logs", i)
			}
		}
	})
}
