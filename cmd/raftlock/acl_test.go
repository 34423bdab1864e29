package main

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/node"
	"github.com/raftlock/raftlock/node/nodehttp"
	"github.com/raftlock/raftlock/transport/httpapi"
	"github.com/raftlock/raftlock/transport/raftnet"
)

// startACLNode starts a one-node cluster with ACLs on, serving HTTP, and
// points the CLI at it.
func startACLNode(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pp, err := raftnet.NewRaftTCPTransport(raftnet.RaftTCPConfig{BindAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	raftAddr := string(pp.Transport.LocalAddr())
	n, err := node.New(node.Config{ID: "n1", DataDir: t.TempDir(), RaftBind: raftAddr, HTTPAddr: ln.Addr().String(),
		Peers: []node.Peer{{ID: "n1", RaftAddr: raftAddr}}, PeerPort: pp, ACL: true, Wire: nodehttp.Wire{}})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	srv := &http.Server{Handler: httpapi.NewServer(n), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = n.Shutdown(ctx)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := n.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	t.Setenv("RAFTLOCK_ADDR", ln.Addr().String())
	t.Setenv("RAFTLOCK_ACL_TOKEN", "")
	t.Setenv("RAFTLOCK_TOKEN", "")
}

// secretOf is the secret line of acl bootstrap's or token create's text.
func secretOf(t *testing.T, out string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if s, ok := strings.CutPrefix(l, "secret: "); ok {
			return s
		}
	}
	t.Fatalf("no secret in %q", out)
	return ""
}

// The acl commands end to end: bootstrap once, create a token, use it
// (its rules hold), list without secrets, delete it (then it is refused).
func TestACLCommandsBootstrapCreateUseListDelete(t *testing.T) {
	startACLNode(t)
	if code, _, errOut := runCLI(t, "lock", "get", "jobs/a"); code != 1 || !strings.Contains(errOut, "unauthenticated") {
		t.Fatalf("no token: %d %q, want 1 unauthenticated", code, errOut)
	}
	code, out, errOut := runCLI(t, "acl", "bootstrap")
	if code != 0 {
		t.Fatalf("bootstrap: %d %s", code, errOut)
	}
	admin := secretOf(t, out)
	if code, _, errOut := runCLI(t, "acl", "bootstrap"); code != 1 || !strings.Contains(errOut, "permission_denied") {
		t.Fatalf("second bootstrap: %d %q, want 1 permission_denied", code, errOut)
	}
	code, out, errOut = runCLI(t, "--token", admin, "acl", "token", "create", "--name", "jobs", "--rule", "write:jobs/", "--rule", "read:")
	if code != 0 {
		t.Fatalf("token create: %d %s", code, errOut)
	}
	jobs := secretOf(t, out)
	// The old name still works, for a release, with a warning.
	t.Setenv("RAFTLOCK_TOKEN", jobs)
	if code, _, errOut := runCLI(t, "lock", "list"); code != 0 || errOut != deprecatedTokenWarning {
		t.Errorf("lock list with read, secret in RAFTLOCK_TOKEN: %d %q, want 0 and the deprecation warning", code, errOut)
	}
	t.Setenv("RAFTLOCK_TOKEN", "")
	t.Setenv("RAFTLOCK_ACL_TOKEN", jobs)
	if code, _, errOut := runCLI(t, "lock", "list"); code != 0 || errOut != "" {
		t.Errorf("lock list with read: %d %q", code, errOut)
	}
	// CMD gets the fencing token as RAFTLOCK_FENCING_TOKEN (and as
	// RAFTLOCK_TOKEN, the old name) and the secret as RAFTLOCK_ACL_TOKEN.
	t.Setenv("WANT_SECRET", jobs)
	if code, _, errOut := runCLI(t, "exec", "jobs/a", "--", "sh", "-c",
		`test "$RAFTLOCK_ACL_TOKEN" = "$WANT_SECRET" && test "$RAFTLOCK_FENCING_TOKEN" -gt 0 && test "$RAFTLOCK_TOKEN" = "$RAFTLOCK_FENCING_TOKEN"`); code != 0 {
		t.Errorf("exec jobs/a with write:jobs/: %d %s", code, errOut)
	}
	t.Setenv("RAFTLOCK_ACL_TOKEN", "")
	t.Setenv("RAFTLOCK_TOKEN", jobs)
	if code, _, errOut := runCLI(t, "exec", "jobs/a", "--", "sh", "-c",
		`test "$RAFTLOCK_ACL_TOKEN" = "$WANT_SECRET" && test "$RAFTLOCK_TOKEN" = "$RAFTLOCK_FENCING_TOKEN"`); code != 0 {
		t.Errorf("exec jobs/a, secret in RAFTLOCK_TOKEN: %d %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, "exec", "other/a", "--", "true"); code != 125 || !strings.Contains(errOut, "permission_denied") {
		t.Errorf("exec other/a with write:jobs/: %d %q, want 125 permission_denied", code, errOut)
	}
	if code, _, errOut := runCLI(t, "acl", "token", "list"); code != 1 || !strings.Contains(errOut, "permission_denied") {
		t.Errorf("token list with a non-admin token: %d %q, want 1 permission_denied", code, errOut)
	}
	t.Setenv("RAFTLOCK_ACL_TOKEN", admin)
	code, out, errOut = runCLI(t, "acl", "token", "list", "-o", "json")
	if code != 0 || !strings.Contains(out, `"jobs"`) || strings.Contains(out, jobs) || strings.Contains(out, admin) {
		t.Fatalf("token list: %d %s %s", code, out, errOut)
	}
	var id string
	code, out, _ = runCLI(t, "acl", "token", "list")
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[1] == "jobs" {
			id = f[0]
		}
	}
	if code != 0 || id == "" {
		t.Fatalf("token list: %d %q: no jobs token", code, out)
	}
	if code, _, errOut := runCLI(t, "acl", "token", "delete", id); code != 0 {
		t.Fatalf("token delete: %d %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, "--token", jobs, "lock", "get", "jobs/a"); code != 1 || !strings.Contains(errOut, "unauthenticated") {
		t.Errorf("deleted token: %d %q, want 1 unauthenticated", code, errOut)
	}
}

// The ACL secret comes from RAFTLOCK_ACL_TOKEN, else (deprecated)
// RAFTLOCK_TOKEN; but inside a command exec runs (RAFTLOCK_LOCK set)
// RAFTLOCK_TOKEN is the fencing token and is never sent as a secret.
func TestACLTokenFromEnvNeverTakesExecsFencingToken(t *testing.T) {
	for _, tc := range []struct {
		env        map[string]string
		want       string
		deprecated bool
	}{
		{map[string]string{}, "", false},
		{map[string]string{"RAFTLOCK_TOKEN": "s1"}, "s1", true},
		{map[string]string{"RAFTLOCK_ACL_TOKEN": "s2", "RAFTLOCK_TOKEN": "s1"}, "s2", false},
		{map[string]string{"RAFTLOCK_TOKEN": "4711", "RAFTLOCK_LOCK": "jobs/a"}, "", false},
		{map[string]string{"RAFTLOCK_ACL_TOKEN": "s2", "RAFTLOCK_TOKEN": "4711", "RAFTLOCK_LOCK": "jobs/a"}, "s2", false},
	} {
		if got, dep := aclTokenFromEnv(func(k string) string { return tc.env[k] }); got != tc.want || dep != tc.deprecated {
			t.Errorf("env %v: secret %q deprecated %v, want %q %v", tc.env, got, dep, tc.want, tc.deprecated)
		}
	}
}
