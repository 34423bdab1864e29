package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/cmd/internal/proccluster"
	"github.com/raftlock/raftlock/transport/client"
)

// A disaster restore into a new cluster brings back every ACL token of
// the backup, also one deleted (revoked) after the backup was taken: that
// is inherent to restoring, so it is said. The restoring node's log
// counts the tokens and says to delete again each revoked since the
// backup, and raftlock snapshot inspect --tokens lists the backup's
// tokens by id and name, never a secret or its hash.
func TestRestoreIntoNewClusterSaysTheBackupsTokensComeBack(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs raftlockd processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	old, mgmt := aclCluster(ctx, t)
	bin := old.Bin()
	cli := proccluster.Build(t, "github.com/raftlock/raftlock/cmd/raftlock", "raftlock")
	ocl := old.Client(client.WithToken(mgmt))
	revoked, err := ocl.CreateToken(ctx, api.TokenRequest{Name: "ci-deploy", Rules: []string{"write:deploy/"}})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := ocl.Snapshot(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "backup.rlsnap")
	if err := os.WriteFile(file, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ocl.DeleteToken(ctx, revoked.ID); err != nil {
		t.Fatal(err)
	}
	var max uint64
	if info, err := ocl.Cluster(ctx); err == nil {
		max = info.CommitIndex
	}
	for i := range old.Nodes {
		old.Kill(i)
	}

	out := runCLI(t, cli, "snapshot", "inspect", "--tokens", file)
	for _, want := range []string{"acl tokens: 2", revoked.ID, "ci-deploy", "write:deploy/", "delete again"} {
		if !strings.Contains(out, want) {
			t.Errorf("snapshot inspect --tokens does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, revoked.Secret) || strings.Contains(out, mgmt) {
		t.Errorf("snapshot inspect --tokens prints a secret:\n%s", out)
	}
	var rep struct {
		ACLTokens int               `json:"acl_tokens"`
		Tokens    []json.RawMessage `json:"tokens"`
	}
	js := runCLI(t, cli, "snapshot", "inspect", "--tokens", "-o", "json", file)
	if err := json.Unmarshal([]byte(js), &rep); err != nil || rep.ACLTokens != 2 || len(rep.Tokens) != 2 {
		t.Fatalf("snapshot inspect --tokens -o json: %+v, %v:\n%s", rep, err, js)
	}
	if strings.Contains(js, "hash") || strings.Contains(js, revoked.Secret) {
		t.Errorf("snapshot inspect --tokens -o json prints a secret or its hash:\n%s", js)
	}

	fresh := proccluster.StartEach(t, bin, 3, func(i int) []string {
		if i == 0 {
			return []string{"--restore", file, "--min-token", fmt.Sprint(max), "--restore-hold", "0s"}
		}
		return nil
	}, "--acl")
	if _, err := fresh.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	log := fresh.Nodes[0].Log()
	for _, want := range []string{"acl_tokens=2", "delete again each token revoked since the backup", "snapshot inspect --tokens"} {
		if !strings.Contains(log, want) {
			t.Errorf("the restoring node's log does not say %q:\n%s", want, log)
		}
	}
	// What the log warns of: the token deleted after the backup works
	// again until it is deleted again.
	back := fresh.Client(client.WithToken(revoked.Secret))
	proccluster.Eventually(t, time.Minute, "the revoked token is back", func() error {
		_, err := back.OpenSession(ctx, api.OpenRequest{Name: "ci", TTL: 10 * time.Second})
		return err
	})
	if err := fresh.Client(client.WithToken(mgmt)).DeleteToken(ctx, revoked.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := back.OpenSession(ctx, api.OpenRequest{Name: "ci", TTL: 10 * time.Second}); api.CodeOf(err) != api.CodePermissionDenied && api.CodeOf(err) != api.CodeUnauthenticated {
		t.Fatalf("the token deleted again: %v, want it refused", err)
	}
}
