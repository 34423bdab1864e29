package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/raftlock/raftlock/node"
)

// checkEnv, when set in raftlockd's environment, makes it check the data
// dir it names and exit (0: sound, 1: damaged, anything else: it crashed
// on the damage): checkDataDir runs it as a child process.
const checkEnv = "RAFTLOCKD_CHECK_DATA_DIR"

// checkTimeout bounds the child's check; a check that does not end in
// time is taken as damage too (bbolt stuck on a damaged file).
const checkTimeout = 30 * time.Second

// runCheckChild is the child's side: it checks dir and exits.
// It says which file it checks ("checking FILE") before each, so that a
// crash is known to have happened in that file.
func runCheckChild(dir string, stderr io.Writer) int {
	for _, f := range node.DeepCheckedFiles(dir) {
		fmt.Fprintln(stderr, checkingPrefix+f)
		if err := node.CheckBoltFileDeep(f); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
	}
	return 0
}

// checkingPrefix begins the child's line naming the file it checks next.
const checkingPrefix = "checking "

// crashLine finds what a crashed child printed first: its panic or fatal
// error line.
var crashLine = regexp.MustCompile(`(?m)^(panic: |fatal error: |unexpected fault).*$`)

// checkDataDir checks a node's data dir in a child process before the
// node opens it: bbolt's full page check and a writable open (which scans
// every page to rebuild the freelist) run goroutines of bbolt's own, where
// a damaged page crashes the process with no way to recover. In a child,
// that crash becomes a clean refusal naming the file and the repair.
func checkDataDir(ctx context.Context, id, dir string) error {
	db := filepath.Join(dir, "raft.db")
	if _, err := os.Stat(db); errors.Is(err, os.ErrNotExist) {
		if _, err := os.Stat(filepath.Join(dir, "wal")); errors.Is(err, os.ErrNotExist) {
			return nil
		}
	}
	// Plain reads first: a truncated file is refused without mapping it.
	if err := node.CheckRaftDBFile(id, db); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("check the data dir: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), checkEnv+"="+dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return node.DataDamaged(id, db, fmt.Sprintf("checking it did not finish within %v", checkTimeout))
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return fmt.Errorf("check the data dir: %w", err)
	}
	// The damaged file is the last one the child began checking.
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if f, ok := strings.CutPrefix(l, checkingPrefix); ok {
			db = f
			continue
		}
		lines = append(lines, l)
	}
	what := strings.Join(lines, "\n")
	if ee.ExitCode() != 1 {
		what = "bbolt crashed reading it"
		if l := crashLine.FindString(out.String()); l != "" {
			what += ": " + l
		}
	}
	return node.DataDamaged(id, db, what)
}
