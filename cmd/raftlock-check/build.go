package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
)

// daemonPackage is the import path of the server.
const daemonPackage = "github.com/raftlock/raftlock/cmd/raftlockd"

// buildDaemon builds raftlockd into dir with go build; it must run inside
// this module.
func buildDaemon(ctx context.Context, dir string) (string, error) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(dir, "raftlockd")
	out, err := exec.CommandContext(ctx, gobin, "build", "-o", bin, daemonPackage).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build %s (run inside the raftlock module, or pass --raftlockd): %w\n%s", daemonPackage, err, out)
	}
	return bin, nil
}
