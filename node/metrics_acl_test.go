package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/api/apitest"
)

// TestMetricsUnderACLNeedReadOnTheEmptyPrefix: with ACLs on, GET /metrics
// answers 401 without a token, 403 to a token that reads only a prefix,
// 200 to one with read on the empty prefix (and to the management token);
// with MetricsOpen (--metrics-open), 200 without a token.
func TestMetricsUnderACLNeedReadOnTheEmptyPrefix(t *testing.T) {
	logs := &apitest.LogBuffer{}
	c := newACLCluster(t, logs)
	ctx := ctxT(t)
	_, li := c.leader()
	mgmt, admin := c.bootstrapACL(t, ctx)
	create := func(rules ...string) string {
		t.Helper()
		ts, err := admin.CreateToken(ctx, api.TokenRequest{Name: "m", Rules: rules})
		if err != nil {
			t.Fatalf("create token %v: %v", rules, err)
		}
		return ts.Secret
	}
	readAll, readJobs := create("read:"), create("read:jobs/")
	for _, r := range []struct {
		who, secret string
		status      int
		code        string
	}{
		{"no token", "", 401, "unauthenticated"},
		{"read on jobs/", readJobs, 403, "permission_denied"},
		{"read on everything", readAll, 200, ""},
		{"management token", mgmt, 200, ""},
	} {
		// A follower answers too, from its own replica of the tokens (once
		// it has applied their creation).
		for _, addr := range []string{c.httpAddrs[li], c.httpAddrs[(li+1)%3]} {
			eventually(t, 10*time.Second, r.who+" at "+addr, func() error {
				if st, code, _ := aclDo(ctx, addr, "GET", "/metrics", r.secret, nil); st != r.status || code != r.code {
					return fmt.Errorf("%d %q, want %d %q", st, code, r.status, r.code)
				}
				return nil
			})
		}
	}

	open := newTestCluster(t, 1, func(cfg *Config) {
		cfg.ACL, cfg.MetricsOpen = true, true
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: cfg.ID, Level: hclog.Warn, Output: logs})
	}, withHTTP)
	open.leader()
	mf, st, err := scrape(ctx, open.httpAddrs[0], "")
	if err != nil || st != 200 || mf["raftlock_sessions_live"] == nil {
		t.Errorf("metrics-open without a token: HTTP %d, %v, sessions_live %v", st, err, mf["raftlock_sessions_live"])
	}
}
