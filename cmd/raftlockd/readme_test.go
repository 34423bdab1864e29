package main

// The README runner: TestReadme runs the README's commands, in order, the
// way a new user pastes them, so that the README cannot drift from the
// product.
//
// Which commands. Every ```sh block of README.md that comes right after a
// line
//
//	<!-- ci: run -->
//
// (an HTML comment, which GitHub does not show). Options follow "run", each
// after a ";" (TEXT in Go's quoted form, without a ";"):
//
//	<!-- ci: run; stop-dev -->        stop the dev cluster first, as Ctrl-C
//	                                   would (the block needs its ports)
//	<!-- ci: run; stop-background --> stop what the blocks before left
//	                                   running (SIGTERM, and wait), e.g. a
//	                                   cluster on the ports the block needs
//	<!-- ci: run; expect "TEXT" -->   once every block has run, the output
//	                                   (background processes included) must
//	                                   show TEXT within 30 s
//
// Comments in a block (# {"id":…}) are the user's expected output; they are
// not checked. TestReadmeMarkedBlocks checks the markers and that the
// quickstart and its curl version are marked.
//
// How. The repository's files (git ls-files: tracked, and untracked ones
// that are not ignored) are copied to a temporary directory, so that the
// binaries and data directories README's commands create never land in the
// tree. There the test runs README's first command, go run
// ./cmd/raftlockd --dev (in its own process group, TMPDIR a directory of
// the test's), and waits until its three nodes answer GET /v1/health with a
// leader. Then the marked blocks run in order in ONE bash process, under set
// -euo pipefail, from the copy's root, so shell variables carry from block
// to block. Two adaptations, both in the script's preamble: curl fails on
// an HTTP error answer (--fail-with-body; curl -s alone exits 0 on one) and
// retries a transient one (a leader change on a loaded machine). At the end
// the test stops what the blocks left running (SIGTERM, then SIGKILL, to
// bash's process group), stops the dev cluster with SIGINT (Ctrl-C) if a
// block did not, and checks that it exited cleanly and removed its
// raftlock-dev-* data dir, and that .gitignore covers every path the blocks
// created in the copy.
//
// Needs bash, curl (.ci/run installs it), git, and the fixed ports of the
// dev cluster (127.0.0.1:7001-7003 and 7101-7103) and of the embedded
// example (7201-7203): if one is taken (say, by a developer's own
// raftlockd --dev) the test is skipped with a message naming it. It takes
// about 15 s (more on a cold build cache).

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/raftlock/raftlock/cmd/internal/proccluster"
)

// devCommand is README's first command, which starts the dev cluster the
// blocks run against.
const devCommand = "go run ./cmd/raftlockd --dev"

// readmePorts are the fixed ports the marked blocks use: the dev cluster's
// (also the three-process cluster's) and the embedded example's.
var readmePorts = append(append([]int{}, devPorts...), 7201, 7202, 7203)

// readmeBlock is one ```sh block of README.md marked for the runner.
type readmeBlock struct {
	line    int    // of the opening fence, 1-based
	heading string // the section it is in
	stopDev bool
	stopBg  bool
	expect  []string
	body    string
}

const readmeMarker = "<!-- ci:"

// parseReadme returns the marked blocks of a README, in order.
func parseReadme(text string) ([]readmeBlock, error) {
	lines := strings.Split(text, "\n")
	var blocks []readmeBlock
	heading := ""
	inFence := false
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		if strings.HasPrefix(line, "#") {
			heading = line
			continue
		}
		if !strings.HasPrefix(line, readmeMarker) {
			continue
		}
		b := readmeBlock{line: i + 2, heading: heading}
		if err := b.parseMarker(line); err != nil {
			return nil, fmt.Errorf("README.md:%d: %v", i+1, err)
		}
		if i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) != "```sh" {
			return nil, fmt.Errorf("README.md:%d: %s is not followed by a ```sh block on the next line", i+1, line)
		}
		var body []string
		closed := false
		for i += 2; i < len(lines); i++ {
			if strings.TrimSpace(lines[i]) == "```" {
				closed = true
				break
			}
			body = append(body, lines[i])
		}
		if !closed {
			return nil, fmt.Errorf("README.md:%d: the block never ends", b.line)
		}
		b.body = strings.Join(body, "\n")
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// parseMarker reads "<!-- ci: run[; stop-dev][; stop-background][; expect "TEXT"]... -->".
func (b *readmeBlock) parseMarker(line string) error {
	inner, ok := strings.CutSuffix(strings.TrimPrefix(line, readmeMarker), "-->")
	if !ok {
		return fmt.Errorf("%q: the marker must fit on one line and end with -->", line)
	}
	parts := strings.Split(inner, ";")
	if strings.TrimSpace(parts[0]) != "run" {
		return fmt.Errorf("%q: want <!-- ci: run[; option]... -->", line)
	}
	for _, opt := range parts[1:] {
		opt = strings.TrimSpace(opt)
		switch {
		case opt == "stop-dev":
			b.stopDev = true
		case opt == "stop-background":
			b.stopBg = true
		case strings.HasPrefix(opt, "expect "):
			text, err := strconv.Unquote(strings.TrimSpace(strings.TrimPrefix(opt, "expect ")))
			if err != nil || text == "" {
				return fmt.Errorf("%q: expect takes a quoted, non-empty text", opt)
			}
			b.expect = append(b.expect, text)
		default:
			return fmt.Errorf("%q: unknown option (stop-dev, stop-background, expect \"TEXT\")", opt)
		}
	}
	return nil
}

// repoRoot returns the root of the git work tree this test runs in, or
// skips the test outside one.
func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git work tree (git rev-parse: %v): the README runner copies git's list of files", err)
	}
	return strings.TrimSpace(string(out))
}

func readReadme(t *testing.T) []readmeBlock {
	t.Helper()
	text, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(text), devCommand) {
		t.Fatalf("README.md no longer says %q, the command the runner starts the dev cluster with", devCommand)
	}
	blocks, err := parseReadme(string(text))
	if err != nil {
		t.Fatal(err)
	}
	return blocks
}

// The markers are well formed, and at least the quickstart, CLI and curl,
// is marked.
func TestReadmeMarkedBlocks(t *testing.T) {
	blocks := readReadme(t)
	var cli, curl bool
	for _, b := range blocks {
		if b.heading != "## Quickstart" {
			continue
		}
		cli = cli || strings.Contains(b.body, "./raftlock session open")
		curl = curl || strings.Contains(b.body, "curl ")
	}
	if !cli || !curl {
		t.Fatalf("the quickstart's CLI block (marked: %v) and curl block (marked: %v) must both be marked <!-- ci: run -->", cli, curl)
	}
	// The parser refuses what it does not understand.
	for _, bad := range []string{
		"<!-- ci: run -->\n```go\nx\n```\n",
		"<!-- ci: run -->\n\n```sh\nx\n```\n",
		"<!-- ci: ran -->\n```sh\nx\n```\n",
		"<!-- ci: run; expect elected -->\n```sh\nx\n```\n",
		"<!-- ci: run; stop -->\n```sh\nx\n```\n",
		"<!-- ci: run -->\n```sh\nx\n",
	} {
		if _, err := parseReadme(bad); err == nil {
			t.Errorf("parseReadme accepted %q", bad)
		}
	}
	got, err := parseReadme("# A\n```sh\n<!-- ci: run -->\n```\n## B\n<!-- ci: run; stop-dev; stop-background; expect \"x y\" -->\n```sh\necho 1\necho 2\n```\n")
	if err != nil || len(got) != 1 || got[0].heading != "## B" || !got[0].stopDev || !got[0].stopBg ||
		len(got[0].expect) != 1 || got[0].expect[0] != "x y" || got[0].body != "echo 1\necho 2" || got[0].line != 7 {
		t.Fatalf("parseReadme = %+v, %v", got, err)
	}
}

// copyRepo copies the repository's files (tracked, and untracked but not
// ignored: what a fresh clone would hold once committed) from root to dst
// and returns their paths relative to root.
func copyRepo(t *testing.T, root, dst string) map[string]bool {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	files := map[string]bool{}
	for _, rel := range strings.Split(string(out), "\x00") {
		if rel == "" || files[rel] {
			continue
		}
		src, to := filepath.Join(root, rel), filepath.Join(dst, rel)
		fi, err := os.Lstat(src)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the work tree
		} else if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(src)
			if err == nil {
				err = os.Symlink(target, to)
			}
			if err != nil {
				t.Fatal(err)
			}
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(src)
			if err == nil {
				err = os.WriteFile(to, data, fi.Mode().Perm())
			}
			if err != nil {
				t.Fatal(err)
			}
		default:
			continue // a submodule's directory
		}
		files[rel] = true
	}
	return files
}

// groupAlive reports whether process group pgid has a process that is not
// a zombie (orphans of a finished bash may wait long for a reaper).
func groupAlive(pgid int) bool {
	if syscall.Kill(-pgid, 0) != nil {
		return false
	}
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil || len(stats) == 0 {
		return true // no /proc: trust kill
	}
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parens.
		s := string(data)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) >= 3 && fields[0] != "Z" && fields[2] == strconv.Itoa(pgid) {
			return true
		}
	}
	return false
}

// stopGroup sends sig to process group pgid and waits up to d for it to
// end; then it kills what is left.
func stopGroup(pgid int, sig syscall.Signal, d time.Duration) {
	_ = syscall.Kill(-pgid, sig)
	for deadline := time.Now().Add(d); time.Now().Before(deadline) && groupAlive(pgid); {
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// groupProc is a command in its own process group, its output in a file.
type groupProc struct {
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed once it has exited; then err is set
	err     error
}

func startGroup(t *testing.T, dir string, env []string, logPath string, name string, args ...string) *groupProc {
	t.Helper()
	p := &groupProc{logPath: logPath, exited: make(chan struct{})}
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	p.cmd = exec.Command(name, args...)
	p.cmd.Dir, p.cmd.Env = dir, env
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		stopGroup(p.cmd.Process.Pid, syscall.SIGKILL, 5*time.Second)
		<-p.exited
	})
	return p
}

func (p *groupProc) log() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// env is the environment of the runner's processes: this one's, without
// RAFTLOCK_ADDR (README's commands use the CLI's default address), plus
// extra.
func readmeEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RAFTLOCK_ADDR=") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// readmeScript is the one bash script of the marked blocks.
func readmeScript(blocks []readmeBlock) string {
	var b strings.Builder
	b.WriteString(`set -euo pipefail
# The runner's preamble (cmd/raftlockd/readme_test.go). curl -s exits 0 on
# an error answer; here it fails the run, and a transient error (503 while
# a loaded machine changes leaders) is retried.
case "$(command curl --help all 2>/dev/null)" in
*--fail-with-body*) ci_curl_fail=--fail-with-body ;;
*) ci_curl_fail=--fail ;;
esac
curl() { command curl "$ci_curl_fail" --retry 3 --retry-delay 1 "$@"; }
# Ctrl-C to the dev cluster, then wait until it has exited (30 s at most).
ci_stop_dev() {
	kill -INT -- "-$CI_DEV_PGID"
	for _ in $(seq 150); do
		kill -0 -- "-$CI_DEV_PGID" 2>/dev/null || return 0
		sleep 0.2
	done
	echo "the dev cluster did not stop within 30s of SIGINT" >&2
	return 1
}
# SIGTERM to the blocks' background jobs, then wait until they have exited.
ci_stop_background() {
	local pids
	pids=$(jobs -p)
	if [ -n "$pids" ]; then
		kill $pids 2>/dev/null || true
		wait $pids 2>/dev/null || true
	fi
}
set -x
`)
	for _, blk := range blocks {
		fmt.Fprintf(&b, "\n# README.md:%d (%s)\n", blk.line, blk.heading)
		if blk.stopDev {
			b.WriteString("ci_stop_dev\n")
		}
		if blk.stopBg {
			b.WriteString("ci_stop_background\n")
		}
		b.WriteString(blk.body)
		b.WriteString("\n")
	}
	return b.String()
}

// TestReadme runs the README's marked blocks against the dev cluster (see
// the top of this file).
func TestReadme(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the README's commands")
	}
	for _, tool := range []string{"bash", "curl", "git", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the README's commands need %s (.ci/run installs curl): %v", tool, err)
		}
	}
	requireFreePorts(t, readmePorts...)
	blocks := readReadme(t)
	root := repoRoot(t)
	work := filepath.Join(t.TempDir(), "raftlock")
	files := copyRepo(t, root, work)
	devTmp, scriptDir := t.TempDir(), t.TempDir()

	// README's first command, in "another terminal".
	start := time.Now()
	dev := startGroup(t, work, readmeEnv("TMPDIR="+devTmp), filepath.Join(scriptDir, "dev.log"),
		"go", strings.Fields(devCommand)[1:]...)
	defer func() {
		if t.Failed() {
			t.Logf("%s output:\n%s", devCommand, dev.log())
		}
	}()
	for {
		err := devHealthy()
		if err == nil {
			break
		}
		select {
		case <-dev.exited:
			t.Fatalf("%s exited before its cluster had a leader: %v", devCommand, dev.err)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Since(start) > 90*time.Second {
			t.Fatalf("%s: no cluster with a leader after %v: %v", devCommand, time.Since(start), err)
		}
	}
	if dirs := devDataDirs(t, devTmp); len(dirs) != 1 {
		t.Fatalf("the running dev cluster's data dirs in its TMPDIR: %q, want one raftlock-dev-*", dirs)
	}
	t.Logf("dev cluster up after %v", time.Since(start).Round(time.Millisecond))

	// The marked blocks, in one bash process.
	run := runDocBlocks(t, work, scriptDir, "README.md", blocks, 60*time.Second,
		readmeEnv("CI_DEV_PGID="+strconv.Itoa(dev.cmd.Process.Pid), "TMPDIR="+t.TempDir()))
	t.Logf("README's blocks ran in %v", time.Since(start).Round(time.Millisecond))
	// What they left running in the background (the three-process cluster,
	// the embedded instances) stops as on SIGTERM.
	stopGroup(run.cmd.Process.Pid, syscall.SIGTERM, 10*time.Second)

	// The dev cluster: Ctrl-C, unless a block did it; it exits cleanly and
	// leaves no data dir behind.
	_ = syscall.Kill(-dev.cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-dev.exited:
		// go run exits 1 whenever it got a SIGINT itself, whatever the
		// program's status (TestDevRemovesItsDataDirOnExit checks that
		// raftlockd exits 0), so the log tells: a clean stop says this.
		if !strings.Contains(dev.log(), "shutting down") {
			t.Errorf("%s exited (%v) without \"shutting down\"", devCommand, dev.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not exit within 30s of SIGINT", devCommand)
	}
	if dirs := devDataDirs(t, devTmp); len(dirs) != 0 {
		t.Errorf("%s left its data dir behind: %q", devCommand, dirs)
	}

	checkIgnored(t, work, files)
}

// numbered returns s with line numbers.
// runDocBlocks runs the marked blocks of doc (a path from the
// repository's root, for messages) in one bash process in work, with env,
// waits up to timeout for it to exit 0, then for the output every block
// expects. It returns the process group, still holding what the blocks
// left running; on a failure the test logs the script and its output.
func runDocBlocks(t *testing.T, work, scriptDir, doc string, blocks []readmeBlock, timeout time.Duration, env []string) *groupProc {
	t.Helper()
	script := filepath.Join(scriptDir, filepath.Base(doc)+".sh")
	if err := os.WriteFile(script, []byte(readmeScript(blocks)), 0o644); err != nil {
		t.Fatal(err)
	}
	run := startGroup(t, work, env, filepath.Join(scriptDir, filepath.Base(doc)+".log"), "bash", script)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s's blocks (%s):\n%s", doc, script, numbered(readmeScript(blocks)))
			t.Logf("their output:\n%s", run.log())
		}
	})
	select {
	case <-run.exited:
		if run.err != nil {
			t.Fatalf("%s's blocks failed: %v", doc, run.err)
		}
	case <-time.After(timeout):
		t.Fatalf("%s's blocks did not finish within %v", doc, timeout)
	}
	for _, blk := range blocks {
		for _, text := range blk.expect {
			proccluster.Eventually(t, 30*time.Second, fmt.Sprintf("%s:%d: output showing %q", doc, blk.line, text),
				func() error {
					if !strings.Contains(run.log(), text) {
						return errors.New("not yet")
					}
					return nil
				})
		}
	}
	return run
}

func numbered(s string) string {
	var b strings.Builder
	sc := bufio.NewScanner(strings.NewReader(s))
	for n := 1; sc.Scan(); n++ {
		fmt.Fprintf(&b, "%4d  %s\n", n, sc.Text())
	}
	return b.String()
}

// checkIgnored checks that .gitignore covers every path the README's
// blocks created in the copy work (all but files).
func checkIgnored(t *testing.T, work string, files map[string]bool) {
	t.Helper()
	dirs := map[string]bool{".": true}
	for f := range files {
		for d := filepath.Dir(f); !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	var created []string
	err := filepath.WalkDir(work, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(work, path)
		switch {
		case d.IsDir() && dirs[rel], files[rel]:
			return nil
		case d.IsDir():
			created = append(created, rel+"/")
			return filepath.SkipDir
		default:
			created = append(created, rel)
			return nil
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the README's blocks created %q", created)
	if len(created) == 0 {
		return
	}
	// A repository of its own in the copy, so that only the copy's
	// .gitignore files count (not the developer's own excludes).
	if out, err := exec.Command("git", "-C", work, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := append([]string{"-C", work, "-c", "core.excludesFile=/dev/null", "check-ignore", "--no-index", "--"}, created...)
	out, _ := exec.CommandContext(ctx, "git", args...).Output() // exit 1: none ignored
	ignored := map[string]bool{}
	for _, p := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		ignored[p] = true
	}
	for _, p := range created {
		if !ignored[p] {
			t.Errorf("the README's commands create %s, which .gitignore does not cover", p)
		}
	}
}
