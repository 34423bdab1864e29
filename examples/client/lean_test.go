package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestClientOnlyProgramLinksNoServer pins the lean client: a program that
// imports only transport/client and session links none of the server's
// dependencies (Raft, its log and stable stores, Prometheus, protobuf)
// and not the HTTP server with the status page's assets.
func TestClientOnlyProgramLinksNoServer(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	forbidden := []string{
		"github.com/hashicorp/raft",
		"github.com/hashicorp/raft-wal",
		"github.com/hashicorp/raft-boltdb",
		"go.etcd.io/bbolt",
		"github.com/prometheus",
		"google.golang.org/protobuf",
		"github.com/raftlock/raftlock/transport/httpapi",
		"github.com/raftlock/raftlock/node",
		"github.com/raftlock/raftlock/fsm",
	}
	deps := strings.Fields(string(out))
	for _, d := range deps {
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f+"/") {
				t.Errorf("the client-only program links %s (%s)", d, f)
			}
		}
	}
	var mods []string
	for _, d := range deps {
		if first := strings.SplitN(d, "/", 2)[0]; strings.Contains(first, ".") && !strings.HasPrefix(d, "github.com/raftlock/raftlock") {
			mods = append(mods, d)
		}
	}
	t.Logf("%d packages, %d outside the standard library and raftlock: %v", len(deps), len(mods), mods)
}
