package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/raftlock/raftlock/node"
)

// checkEnv, when set in raftlockd's environment, makes it check the data
// dir it names in its own process and exit, as check-data --in-process
// does (deprecated: raftlockd check-data --data-dir DIR).
const checkEnv = "RAFTLOCKD_CHECK_DATA_DIR"

// checkOptions are the flags of raftlockd check-data.
type checkOptions struct {
	dataDir, id string
	// inProcess: check in this process, not in a child (checkDataDir's
	// child runs it so).
	inProcess bool
}

const checkDetails = `
It runs the check raftlockd runs before a node opens its data dir, on a
stopped node's: raft.db (and wal/wal-meta.db, raft-wal's index) read in
full by bbolt, its page check, and a writable open, in a child process,
where a damaged page that crashes bbolt becomes the verdict. It prints the
verdict on stdout: exit 0 sound, 1 damaged (the line names the file, what
is wrong and the repair, docs/DAMAGED.md). Exit 2: it could not check (a
flag is wrong, the directory holds no Raft state, or a running node holds
it). The log's entries and the snapshots are checked when the node starts.`

func checkFlags(o *checkOptions, stderr io.Writer) *flag.FlagSet {
	fs := newFlagSet("check-data", stderr)
	fs.StringVar(&o.dataDir, "data-dir", "", "the stopped node's data dir (required)")
	fs.StringVar(&o.id, "id", "ID", "the node's id, for the repair the verdict names")
	fs.BoolVar(&o.inProcess, "in-process", false, "check in this process, without a child: a damaged page may crash it (raftlockd's child runs it so; prints \"checking FILE\" before each file)")
	return fs
}

// runCheckCommand is raftlockd check-data.
func runCheckCommand(args []string, stdout, stderr io.Writer) int {
	var o checkOptions
	if code, ok := parseCommand("check-data", checkFlags(&o, stderr), args, stdout, stderr); !ok {
		return code
	}
	if o.dataDir == "" {
		fmt.Fprintln(stderr, "raftlockd check-data needs --data-dir: the stopped node's data dir")
		return 2
	}
	if o.inProcess {
		return runCheckChild(o.dataDir, stderr)
	}
	if st, err := os.Stat(o.dataDir); err != nil || !st.IsDir() {
		fmt.Fprintf(stderr, "raftlockd check-data: --data-dir %s is not a directory\n", o.dataDir)
		return 2
	}
	if !hasRaftState(o.dataDir) {
		fmt.Fprintf(stderr, "raftlockd check-data: %s holds no Raft state (no raft.db, no wal/): not a node's data dir, or a new one\n", o.dataDir)
		return 2
	}
	for _, f := range node.DeepCheckedFiles(o.dataDir) {
		if inUse(f) {
			fmt.Fprintf(stderr, "raftlockd check-data: %s is in use (a running node holds it): stop the node first\n", f)
			return 2
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := checkDataDir(ctx, o.id, o.dataDir)
	var damaged *node.DataDamagedError
	switch {
	case err == nil:
		fmt.Fprintf(stdout, "raftlockd check-data: %s: sound: %s pass bbolt's checks (the log's entries and the snapshots are checked when the node starts)\n",
			o.dataDir, strings.Join(existing(node.DeepCheckedFiles(o.dataDir)), " and "))
		return 0
	case errors.As(err, &damaged):
		fmt.Fprintf(stdout, "raftlockd check-data: %v\n", err)
		return 1
	default:
		fmt.Fprintf(stderr, "raftlockd check-data: %v\n", err)
		return 2
	}
}

// raftlockd's exit statuses beyond 0 (stopped on a signal), 1 (an error)
// and 2 (a usage error or a misconfiguration): a supervisor or an
// operator tells these apart without reading the log.
const (
	// exitDiskFull: the disk of the data dir is full (node.ErrDiskFull);
	// restarting once there is room brings the node back.
	exitDiskFull = 3
	// exitDataNewer: the data dir holds a command version a newer build
	// wrote (node.DataNewerError); run a newer build, do not wipe it.
	exitDataNewer = 4
)

// exitStatus is the exit status of a node that failed to start or
// stopped itself with err.
func exitStatus(err error) int {
	switch {
	case errors.Is(err, node.ErrDiskFull):
		return exitDiskFull
	case errors.As(err, new(*node.DataNewerError)):
		return exitDataNewer
	}
	return 1
}

// existing returns the files of paths that exist.
func existing(paths []string) []string {
	var out []string
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// inUse reports whether another process holds bbolt's lock on the file
// at path (a running node holds raft.db and wal/wal-meta.db so): a shared
// lock, tried without waiting and released at once.
func inUse(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

// checkTimeout bounds the child's check; a check that does not end in
// time is taken as damage too (bbolt stuck on a damaged file).
const checkTimeout = 30 * time.Second

// runCheckChild is the child's side (check-data --in-process): it checks
// dir and exits (0: sound, 1: damaged; a crash on the damage exits 2).
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
	cmd := exec.CommandContext(ctx, exe, "check-data", "--in-process", "--data-dir", dir)
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
