package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/raftlock/raftlock/api"
)

// The members commands and leader-transfer end to end on a one-node
// cluster with ACLs: admin only; list; add a non-voter; remove refused
// below 2 voters; remove; transfer to an unknown member is not_found.
func TestMembersCommandsListAddRemoveAndLeaderTransfer(t *testing.T) {
	startACLNode(t)
	code, out, errOut := runCLI(t, "acl", "bootstrap")
	if code != 0 {
		t.Fatalf("bootstrap: %d %s", code, errOut)
	}
	t.Setenv("RAFTLOCK_ACL_TOKEN", secretOf(t, out))
	code, out, errOut = runCLI(t, "acl", "token", "create", "--rule", "read:")
	if code != 0 {
		t.Fatalf("token create: %d %s", code, errOut)
	}
	reader := secretOf(t, out)
	// Any valid token reads the members (clients follow them); changing
	// them is admin's.
	if code, out, errOut := runCLI(t, "--token", reader, "members", "list"); code != 0 || !strings.Contains(out, "n1") {
		t.Fatalf("members list with a read token: %d %q %q, want the list", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, "--token", reader, "members", "add", "--raft-addr", "127.0.0.1:1", "--http-addr", "127.0.0.1:2", "n9"); code != 1 || !strings.Contains(errOut, "permission_denied") {
		t.Fatalf("members add without admin: %d %q, want 1 permission_denied", code, errOut)
	}
	if code, out, errOut = runCLI(t, "members", "list"); code != 0 || !strings.Contains(out, "n1") || !strings.Contains(out, "voter") {
		t.Fatalf("members list: %d %q %q", code, out, errOut)
	}
	if code, out, errOut = runCLI(t, "members", "add", "--raft-addr", "127.0.0.1:1", "--http-addr", "127.0.0.1:2", "--nonvoter", "n2"); code != 0 ||
		!strings.Contains(out, "added n2 (non-voter)") {
		t.Fatalf("members add: %d %q %q", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "-o", "json", "members", "list")
	var ms api.MembersReply
	if code != 0 || json.Unmarshal([]byte(out), &ms) != nil || len(ms.Members) != 2 ||
		ms.Members[1] != (api.Member{ID: "n2", RaftAddr: "127.0.0.1:1", HTTPAddr: "127.0.0.1:2"}) {
		t.Fatalf("members list -o json: %d %q %q", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, "members", "remove", "n1"); code != 1 || !strings.Contains(errOut, "invalid_argument") ||
		!strings.Contains(errOut, "force") {
		t.Fatalf("remove the only voter: %d %q, want 1 invalid_argument naming force", code, errOut)
	}
	if code, out, errOut := runCLI(t, "members", "remove", "n2"); code != 0 || !strings.Contains(out, "removed n2") {
		t.Fatalf("members remove n2: %d %q %q", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, "leader-transfer", "n9"); code != 1 || !strings.Contains(errOut, "not_found") {
		t.Fatalf("leader-transfer n9: %d %q, want 1 not_found", code, errOut)
	}
	if code, _, errOut := runCLI(t, "members", "add", "n3"); code != 2 || !strings.Contains(errOut, "--raft-addr") {
		t.Fatalf("members add without addresses: %d %q, want usage error", code, errOut)
	}
}
