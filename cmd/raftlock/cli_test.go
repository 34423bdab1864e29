package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/api/apitest"
	"github.com/raftlock/raftlock/transport/client"
	"github.com/raftlock/raftlock/transport/httpapi"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// golden compares got with testdata/NAME.golden (or writes it, with
// -update).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from %s (run go test -update if the change is meant):\n--- got\n%s--- want\n%s", name, path, got, want)
	}
}

// transcript is one run of the CLI as a golden file keeps it.
func transcript(args []string, code int, out, errOut string) string {
	return fmt.Sprintf("$ raftlock %s\n# exit %d\n# stdout:\n%s# stderr:\n%s", strings.Join(args, " "), code, out, errOut)
}

// runCLI runs the CLI once with args and returns its transcript's parts.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	code := run(ctx, args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// The help: the overview, a command's help (the same, once, however it is
// asked for), a group's help.
func TestHelpGolden(t *testing.T) {
	t.Setenv("RAFTLOCK_ADDR", "")
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"help", []string{"help"}},
		{"help-exec", []string{"help", "exec"}},
		{"exec-h", []string{"exec", "-h"}},
		{"lock-help", []string{"lock", "--help"}},
	} {
		code, out, errOut := runCLI(t, tc.args...)
		golden(t, tc.name, transcript(tc.args, code, out, errOut))
	}
	_, overview, _ := runCLI(t, "help")
	_, execHelp, _ := runCLI(t, "help", "exec")
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help", "exec"}, {"exec", "-h"}, {"exec", "--help"}, {"exec", "--wait", "1s", "-h"}} {
		code, out, errOut := runCLI(t, args...)
		want := execHelp
		if len(args) == 1 {
			want = overview
		}
		if code != 0 || out != want || errOut != "" || strings.Count(out, "usage: raftlock") != 1 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 0 and the help once", args, code, out, errOut)
		}
	}
	for _, args := range [][]string{{"lock", "--help"}, {"lock", "-h"}, {"lock", "help"}, {"help", "lock"}} {
		if code, out, _ := runCLI(t, args...); code != 0 || !strings.HasPrefix(out, "usage: raftlock lock COMMAND") || strings.Count(out, "usage: ") != 1 {
			t.Errorf("%q: exit %d, stdout %q; want the group's help once", args, code, out)
		}
	}
}

// Every command of the table has a help, listed in the overview, that
// "help NAME" and "NAME --help" print.
func TestEveryCommandHasHelp(t *testing.T) {
	_, overview, _ := runCLI(t, "help")
	for _, cmd := range commands {
		if !strings.Contains(overview, "  "+cmd.name+"  ") || cmd.summary == "" {
			t.Errorf("%s: not in the overview, or no summary", cmd.name)
		}
		for _, args := range [][]string{append([]string{"help"}, strings.Fields(cmd.name)...), append(strings.Fields(cmd.name), "--help")} {
			code, out, errOut := runCLI(t, args...)
			if code != 0 || !strings.HasPrefix(out, "usage: raftlock "+cmd.name) || errOut != "" {
				t.Errorf("%q: exit %d, %q %q", args, code, out, errOut)
			}
			if cmd.output != strings.Contains(out, "-o/--output") {
				t.Errorf("%q: -o listed %v, want %v", args, !cmd.output, cmd.output)
			}
		}
	}
}

// Usage errors: one line "raftlock: usage: ...", then a hint naming the
// help to read; never the help itself.
func TestUsageErrorsGolden(t *testing.T) {
	t.Setenv("RAFTLOCK_ADDR", "")
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"bad-flag", []string{"exec", "--kill-grace", "soon", "jobs/x", "--", "true"}},
		{"unknown-command", []string{"frobnicate"}},
	} {
		code, out, errOut := runCLI(t, tc.args...)
		golden(t, tc.name, transcript(tc.args, code, out, errOut))
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 2 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2, an error line and a hint", tc.args, code, out, errOut)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"lock", "frob"}, "raftlock: usage: lock: unknown command \"frob\"\nrun 'raftlock help lock' for usage\n"},
		{[]string{"lock"}, "raftlock: usage: lock: missing command: one of get, list, watch, revoke, request-release\nrun 'raftlock help lock' for usage\n"},
		{[]string{"help", "frob"}, "raftlock: usage: unknown command \"frob\"\nrun 'raftlock help' for usage\n"},
		{[]string{"acl", "token"}, "raftlock: usage: acl token: missing command: one of create, list, delete\nrun 'raftlock help acl token' for usage\n"},
		{[]string{"acl", "token", "frob"}, "raftlock: usage: acl token: unknown command \"frob\"\nrun 'raftlock help acl token' for usage\n"},
		{[]string{"-o", "yaml", "status"}, "raftlock: usage: invalid value \"yaml\" for flag -o: want text or json\nrun 'raftlock help' for usage\n"},
		{[]string{"status", "--output", "xml"}, "raftlock: usage: status: invalid value \"xml\" for flag -output: want text or json\nrun 'raftlock help status' for usage\n"},
		{[]string{"exec", "-o", "json", "x", "--", "true"}, "raftlock: usage: exec: flag provided but not defined: -o\nrun 'raftlock help exec' for usage\n"},
		{[]string{"lock", "get"}, "raftlock: usage: lock get: missing argument\nrun 'raftlock help lock get' for usage\n"},
		{[]string{"--addr", "nonsense", "exec", "x", "--", "true"}, "raftlock: usage: --addr: raftlock client: address \"nonsense\": address nonsense: missing port in address\nrun 'raftlock help' for usage\n"},
	} {
		if code, out, errOut := runCLI(t, tc.args...); code != 2 || out != "" || errOut != tc.want {
			t.Errorf("%q: exit %d, %q %q; want 2, %q", tc.args, code, out, errOut, tc.want)
		}
	}
	t.Setenv("RAFTLOCK_TIMEOUT", "soon")
	if code, _, errOut := runCLI(t, "status"); code != 2 || !strings.HasPrefix(errOut, `raftlock: usage: RAFTLOCK_TIMEOUT="soon": not a duration`) {
		t.Errorf("bad RAFTLOCK_TIMEOUT: exit %d, %q", code, errOut)
	}
}

// --version and "version": the module's version, the commit and the Go
// version (the version and the commit masked: they change with the build).
func TestVersionGolden(t *testing.T) {
	code, out, errOut := runCLI(t, "--version")
	if code2, out2, _ := runCLI(t, "version"); code2 != code || out2 != out {
		t.Errorf("version: %d %q; --version: %d %q", code2, out2, code, out)
	}
	out = regexp.MustCompile(`(?m)^raftlock \S+$`).ReplaceAllString(out, "raftlock VERSION")
	out = regexp.MustCompile(`(?m)^commit: .*$`).ReplaceAllString(out, "commit: COMMIT")
	out = regexp.MustCompile(`(?m)^go: go\S+$`).ReplaceAllString(out, "go: GOVERSION")
	golden(t, "version", transcript([]string{"--version"}, code, out, errOut))
}

// A cluster none of whose addresses answers (a closed port) fails in about
// a second with unreachable, naming the addresses; exec exits 125 with it.
func TestUnreachableFailsFast(t *testing.T) {
	addr := closedAddr(t)
	mask := func(s string) string { return strings.ReplaceAll(s, addr, "127.0.0.1:PORT") }
	args := []string{"--addr", addr, "status"}
	start := time.Now()
	code, out, errOut := runCLI(t, args...)
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("unreachable after %v, want about 1s", took)
	}
	golden(t, "unreachable", mask(transcript(args, code, out, errOut)))

	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"--addr", addr, "exec", "jobs/x", "--", "true"}, exitNoLock},
		{[]string{"--addr", addr, "lock", "watch", "jobs/x"}, exitError},
		{[]string{"--addr", addr, "elect", "e/x", "v"}, exitError},
		{[]string{"lock", "get", "x", "--addr", addr + "," + addr}, exitError},
	} {
		code, _, errOut := runCLI(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, "raftlock: unreachable: no node answered at "+addr) {
			t.Errorf("%q: exit %d, stderr %q; want %d, unreachable", tc.args, code, errOut, tc.code)
		}
	}
}

func closedAddr(t *testing.T) string {
	t.Helper()
	ts := httptest.NewServer(nil)
	addr := strings.TrimPrefix(ts.URL, "http://")
	ts.Close()
	return addr
}

// -o json, --output json, RAFTLOCK_OUTPUT=json and the deprecated --json
// print the same, before or after the command; so do the global flags.
func TestOutputFlags(t *testing.T) {
	rl := cluster(t)
	_, want, _ := rl("--json", "status")
	for _, args := range [][]string{{"-o", "json", "status"}, {"status", "-o", "json"}, {"--output=json", "status"},
		{"status", "--json"}, {"status", "--addr", os.Getenv("RAFTLOCK_ADDR"), "--timeout", "5s", "-o", "json"}} {
		if code, out, errOut := rl(args...); code != 0 || out != want {
			t.Errorf("%q: %d %q %q; want %q", args, code, out, errOut, want)
		}
	}
	t.Setenv("RAFTLOCK_OUTPUT", "json")
	if code, out, _ := rl("status"); code != 0 || out != want {
		t.Errorf("RAFTLOCK_OUTPUT=json: %d %q", code, out)
	}
	if code, out, _ := rl("-o", "text", "status"); code != 0 || !strings.HasPrefix(out, "leader: n1\n") {
		t.Errorf("-o text over RAFTLOCK_OUTPUT=json: %d %q", code, out)
	}
}

// output is a file a CLI running in the background writes (its stdout or
// stderr) and the test reads meanwhile.
type output struct{ *os.File }

func newOutput(t *testing.T) output {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return output{f}
}

// String is what was written so far.
func (o output) String() string {
	b, _ := os.ReadFile(o.Name())
	return string(b)
}

// bgRun is a run of the CLI in the background.
type bgRun struct {
	stop context.CancelFunc // interrupts it
	done chan struct{}      // closed when it has exited, with code
	code int
}

// wait waits up to 10 s for the run to exit and returns its status.
func (r *bgRun) wait(t *testing.T, what string) int {
	t.Helper()
	select {
	case <-r.done:
		return r.code
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the CLI did not exit within 10s", what)
		return 0
	}
}

// background runs the CLI (c) with args until it exits, is stopped, or
// the test ends.
func background(t *testing.T, c *cli, args ...string) *bgRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &bgRun{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.code = c.main(ctx, args)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(10 * time.Second):
			t.Error("the CLI did not end")
		}
	})
	return r
}

// await waits until f is true of buf's contents.
func await(t *testing.T, what string, buf output, f func(string) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !f(buf.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s; output so far:\n%s", what, buf.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lock watch: a timestamp (local time, milliseconds) on every line, and a
// lock in its lock-delay is never called free.
func TestLockWatchGolden(t *testing.T) {
	t0 := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	now := t0
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	f := newFake(apitest.WithClock(clock))
	ts := httptest.NewServer(httpapi.NewServer(f))
	defer ts.Close()
	t.Setenv("RAFTLOCK_ADDR", strings.TrimPrefix(ts.URL, "http://"))
	ctx := context.Background()
	info, err := f.OpenSession(ctx, api.OpenRequest{Name: "demo", TTL: 15 * time.Second, LockDelay: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Acquire(ctx, api.AcquireRequest{Name: "jobs/x", Session: info.ID, Holder: "h1", Value: "10.0.0.7:8080"}); err != nil {
		t.Fatal(err)
	}

	out, errOut := newOutput(t), newOutput(t)
	c := newCLI(out, errOut)
	c.loc = time.FixedZone("CET", 3600)
	tick := t0.Add(123 * time.Millisecond)
	c.now = func() time.Time { tick = tick.Add(time.Second); return tick } // one goroutine prints
	args := []string{"lock", "watch", "jobs/x"}
	r := background(t, c, args...)
	lines := func(n int) func(string) bool { return func(s string) bool { return strings.Count(s, "\n") >= n } }
	await(t, "the held lock", out, lines(1))
	f.Expire(info.ID)
	await(t, "the lock-delay", out, lines(2))
	mu.Lock()
	now = now.Add(11 * time.Second)
	mu.Unlock()
	f.Sweep()
	await(t, "the free lock", out, lines(3))
	r.stop()
	code := r.wait(t, "lock watch")
	golden(t, "lock-watch", transcript(args, code, out.String(), errOut.String()))
	if strings.Contains(out.String(), "free, lock-delay") || strings.Contains(out.String(), "free; lock-delay") {
		t.Errorf("a lock in its lock-delay called free:\n%s", out.String())
	}

	// -o json: the API's lock state with "at".
	jout := newOutput(t)
	c = newCLI(jout, errOut)
	r = background(t, c, "lock", "watch", "-o", "json", "jobs/x")
	await(t, "a JSON line", jout, lines(1))
	r.stop()
	r.wait(t, "lock watch -o json")
	var st struct {
		At   string `json:"at"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal([]byte(strings.SplitN(jout.String(), "\n", 2)[0]), &st); err != nil || st.Name != "jobs/x" {
		t.Fatalf("lock watch -o json: %q: %v", jout.String(), err)
	}
	if _, err := time.Parse(timeFormat, st.At); err != nil {
		t.Errorf("lock watch -o json: at %q: %v", st.At, err)
	}
}

// exec's errors: CMD not found (127, command_not_found), not executable
// (126, not_executable), a busy lock (125, lock_busy with the cluster's
// own message).
func TestExecErrors(t *testing.T) {
	rl := cluster(t)
	dir := t.TempDir()
	notExec := filepath.Join(dir, "script.sh")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cmd  string
		code int
		want string
	}{
		{"raftlock-no-such-command", exitNotFound, "raftlock: command_not_found: exec: raftlock-no-such-command: not found in $PATH\n"},
		{"/nonexistent/cmd", exitNotFound, "raftlock: command_not_found: exec: /nonexistent/cmd: no such file\n"},
		{notExec, exitNoExec, "raftlock: not_executable: exec: " + notExec + ": cannot be run: permission denied\n"},
	} {
		if code, _, errOut := rl("exec", "jobs/x", "--", tc.cmd); code != tc.code || errOut != tc.want {
			t.Errorf("exec %s: exit %d, %q; want %d, %q", tc.cmd, code, errOut, tc.code, tc.want)
		}
	}

	_, sid, _ := rl("session", "open")
	if code, _, _ := rl("acquire", "--session", strings.TrimSpace(sid), "jobs/busy"); code != 0 {
		t.Fatal("acquire failed")
	}
	// The cluster's own message, as the Go client gets it.
	cl, err := client.NewClient([]string{os.Getenv("RAFTLOCK_ADDR")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = cl.Acquire(context.Background(), api.AcquireRequest{Name: "jobs/busy", Session: strings.TrimSpace(sid), Holder: "another"})
	var e *api.Error
	if !errors.As(err, &e) || e.Code != api.CodeLockBusy {
		t.Fatalf("acquire of a busy lock: %v", err)
	}
	busy := "raftlock: lock_busy: " + e.Message + "\n"
	if code, _, errOut := rl("exec", "--wait", "0s", "jobs/busy", "--", "true"); code != exitNoLock || errOut != busy {
		t.Errorf("exec on a busy lock: exit %d, %q; want %d, %q", code, errOut, exitNoLock, busy)
	}
	if code, _, errOut := rl("acquire", "--session", strings.TrimSpace(sid), "jobs/busy"); code != exitError || errOut != busy {
		t.Errorf("acquire of a busy lock: exit %d, %q; want 1, %q", code, errOut, busy)
	}
}

// A session closed under exec (not expired) is reported as closed; exec
// stops CMD and exits 124. elect, likewise, exits 1 with lock_lost. Both
// name the session by its handle, never its id (issue 27 item 9: stderr
// goes to logs).
func TestSessionClosedUnderExecAndElect(t *testing.T) {
	f, rl := fakeCluster(t)
	sidFile := filepath.Join(t.TempDir(), "sid")
	out, errOut := newOutput(t), newOutput(t)
	r := background(t, newCLI(out, errOut), "exec", "--ttl", "1s", "--lock-delay", "1s", "--kill-grace", "100ms", "jobs/x", "--",
		"sh", "-c", `echo "$RAFTLOCK_SESSION" > "$1.tmp" && mv "$1.tmp" "$1" && exec sleep 30`, "sh", sidFile)
	var sid string
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b, err := os.ReadFile(sidFile); err == nil {
			sid = strings.TrimSpace(string(b))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("exec's child did not start: %s", errOut.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if code, _, _ := rl("session", "close", sid); code != 0 {
		t.Fatal("session close failed")
	}
	code := r.wait(t, "exec whose session was closed")
	want := "raftlock: lock_lost: lock jobs/x is lost: session handle:" + api.SessionHandle(sid) + " closed (the cluster reported it gone while its lease still ran); stopping sh (SIGTERM, SIGKILL after 100ms)\n"
	if code != exitLockLost || errOut.String() != want {
		t.Errorf("exec whose session was closed: exit %d, %q; want %d, %q", code, errOut.String(), exitLockLost, want)
	}

	eout, eerr := newOutput(t), newOutput(t)
	r = background(t, newCLI(eout, eerr), "elect", "--ttl", "1s", "-o", "json", "e/x", "v1")
	await(t, "elected", eout, func(s string) bool { return strings.Contains(s, "\n") })
	var l leaderReply
	if err := json.Unmarshal([]byte(eout.String()), &l); err != nil {
		t.Fatal(err)
	}
	// elect prints its session's handle, never its id: the test finds the
	// id in the fake's log of acquires.
	var esid string
	for _, c := range f.Log("Acquire") {
		if req := c.Arg.(api.AcquireRequest); req.Name == "e/x" && api.SessionHandle(req.Session) == l.SessionHandle {
			esid = req.Session
		}
	}
	if esid == "" {
		t.Fatalf("elected %+v: no acquire of its session in the log", l)
	}
	if code, _, _ := rl("session", "close", esid); code != 0 {
		t.Fatal("session close failed")
	}
	code = r.wait(t, "elect whose session was closed")
	want = "raftlock: lock_lost: leadership of e/x lost: session handle:" + api.SessionHandle(esid) + " closed (the cluster reported it gone while its lease still ran)\n"
	if code != exitError || !strings.HasSuffix(eerr.String(), want) {
		t.Errorf("elect whose session was closed: exit %d, %q; want 1, ...%q", code, eerr.String(), want)
	}
}

// A duration flag without a unit (or otherwise unparsable) says what one
// looks like, in every command and in the global flags.
func TestDurationFlagErrorSaysLike5s(t *testing.T) {
	for _, args := range [][]string{
		{"session", "open", "--ttl", "5"},
		{"--timeout", "soon", "status"},
		{"exec", "--ttl", "5", "jobs/a", "--", "true"},
	} {
		code, _, errOut := runCLI(t, args...)
		if code != 2 || !strings.Contains(errOut, "not a duration: write it like 5s, 500ms or 1m30s") || strings.Contains(errOut, "parse error") {
			t.Errorf("raftlock %q: exit %d, %q", args, code, errOut)
		}
	}
}

// A mistyped command suggests the nearest one, at the top level and in a
// group; a word near nothing suggests nothing.
func TestMistypedCommandSuggestsTheNearest(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"stauts"}, `unknown command "stauts"; did you mean "status"?`},
		{[]string{"aquire"}, `unknown command "aquire"; did you mean "acquire"?`},
		{[]string{"lock", "lsit"}, `unknown command "lsit"; did you mean "list"?`},
		{[]string{"frobnicate"}, `unknown command "frobnicate"` + "\n"},
	} {
		code, _, errOut := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("raftlock %q: exit %d, %q; want 2 with %q", c.args, code, errOut, c.want)
		}
	}
}

// lock watch --prefix P: a reset line with the locks under P, then a line
// per change under P (none outside it); -o json the API's answer with
// "at"; NAME and --prefix together, or neither, is a usage error (exit 2).
func TestLockWatchPrefix(t *testing.T) {
	f := newFake()
	ts := httptest.NewServer(httpapi.NewServer(f))
	defer ts.Close()
	t.Setenv("RAFTLOCK_ADDR", strings.TrimPrefix(ts.URL, "http://"))
	ctx := context.Background()
	info, err := f.OpenSession(ctx, api.OpenRequest{Name: "demo", TTL: 15 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	acquire := func(name string) {
		t.Helper()
		if _, err := f.Acquire(ctx, api.AcquireRequest{Name: name, Session: info.ID, Holder: "h1"}); err != nil {
			t.Fatal(err)
		}
	}
	acquire("jobs/x")
	acquire("other")

	out, errOut := newOutput(t), newOutput(t)
	r := background(t, newCLI(out, errOut), "lock", "watch", "--prefix", "jobs/")
	await(t, "the reset and jobs/x", out, func(s string) bool {
		return strings.Contains(s, `reset: 1 lock(s) under "jobs/"`) && strings.Contains(s, "lock jobs/x: exclusive, 1 holder(s)")
	})
	acquire("elsewhere")
	acquire("jobs/y")
	await(t, "jobs/y", out, func(s string) bool { return strings.Contains(s, "lock jobs/y: exclusive") })
	r.stop()
	if code := r.wait(t, "lock watch --prefix"); code != 0 {
		t.Fatalf("lock watch --prefix ended %d: %s", code, errOut.String())
	}
	if s := out.String(); strings.Contains(s, "other") || strings.Contains(s, "elsewhere") || strings.Count(s, "\n") != 3 {
		t.Fatalf("lock watch --prefix jobs/ printed:\n%s\nwant a reset line, jobs/x, jobs/y", s)
	}

	jout := newOutput(t)
	r = background(t, newCLI(jout, errOut), "lock", "watch", "-o", "json", "--prefix", "jobs/")
	await(t, "a JSON line", jout, func(s string) bool { return strings.Contains(s, "\n") })
	r.stop()
	r.wait(t, "lock watch --prefix -o json")
	var got struct {
		At    string `json:"at"`
		Reset bool   `json:"reset"`
		Index uint64 `json:"index"`
		Locks []struct {
			Name string `json:"name"`
		} `json:"locks"`
	}
	if err := json.Unmarshal([]byte(strings.SplitN(jout.String(), "\n", 2)[0]), &got); err != nil || !got.Reset || len(got.Locks) != 2 || got.At == "" {
		t.Fatalf("lock watch --prefix -o json: %q (%v); want a reset with jobs/x and jobs/y", jout.String(), err)
	}

	rl := cluster(t)
	for _, args := range [][]string{{"lock", "watch"}, {"lock", "watch", "--prefix", "a/", "a/b"}} {
		if code, _, stderr := rl(args...); code != 2 || !strings.Contains(stderr, "either NAME or --prefix") {
			t.Errorf("%v: exit %d, %s; want 2, a usage error", args, code, stderr)
		}
	}
}
