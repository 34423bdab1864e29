package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
)

// daemonPackage is the import path of the server.
const daemonPackage = "github.com/raftlock/raftlock/cmd/raftlockd"

// faultsTag is the build tag that compiles raftlockd's --unsafe-fault in.
const faultsTag = "raftlock_faults"

// buildDaemon builds raftlockd into dir with go build; it must run inside
// this module. With faults set it builds the checker-testing binary, whose
// --unsafe-fault breaks guarantees on purpose (-tags raftlock_faults); the
// default binary has no such flag.
func buildDaemon(ctx context.Context, dir string, faults bool) (string, error) {
	gobin, err := exec.LookPath("go") // go test puts GOROOT/bin first on PATH
	if err != nil {
		return "", fmt.Errorf("build raftlockd: the go command is not on PATH (or pass --raftlockd): %w", err)
	}
	bin := filepath.Join(dir, "raftlockd")
	args := []string{"build", "-o", bin}
	if faults {
		args = append(args, "-tags", faultsTag)
	}
	out, err := exec.CommandContext(ctx, gobin, append(args, daemonPackage)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build %s (run inside the raftlock module, or pass --raftlockd): %w\n%s", daemonPackage, err, out)
	}
	return bin, nil
}

// workerPackage is the import path of the conformance suite, whose
// "worker" subcommand is the Go client's worker.
const workerPackage = "github.com/raftlock/raftlock/cmd/raftlock-conformance"

// buildWorker builds the conformance suite into dir and returns the Go
// worker's command line.
func buildWorker(ctx context.Context, dir string) ([]string, error) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("build the Go worker: the go command is not on PATH (or pass --worker): %w", err)
	}
	bin := filepath.Join(dir, "raftlock-conformance")
	out, err := exec.CommandContext(ctx, gobin, "build", "-o", bin, workerPackage).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("go build %s (run inside the raftlock module, or pass --worker): %w\n%s", workerPackage, err, out)
	}
	return []string{bin, "worker"}, nil
}
