package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/raftlock/raftlock/cmd/internal/proccluster"
	"github.com/raftlock/raftlock/sequencer"
	"github.com/raftlock/raftlock/session"
)

// e2e holds what the end-to-end tests share: the built binaries.
var e2e struct {
	once           sync.Once
	daemon, client string
}

// binaries builds raftlockd and raftlock once per test binary.
func binaries(t *testing.T) (daemon, client string) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: builds and runs raftlockd and raftlock processes")
	}
	e2e.once.Do(func() {
		dir, err := os.MkdirTemp("", "raftlock-e2e-")
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range []struct{ pkg, out string }{
			{"github.com/raftlock/raftlock/cmd/raftlockd", "raftlockd"},
			{"github.com/raftlock/raftlock/cmd/raftlock", "raftlock"},
		} {
			bin := filepath.Join(dir, b.out)
			if out, err := exec.Command("go", "build", "-o", bin, b.pkg).CombinedOutput(); err != nil {
				t.Fatalf("go build %s: %v\n%s", b.pkg, err, out)
			}
		}
		e2e.daemon, e2e.client = filepath.Join(dir, "raftlockd"), filepath.Join(dir, "raftlock")
	})
	if e2e.daemon == "" {
		t.Fatal("build failed earlier")
	}
	return e2e.daemon, e2e.client
}

// cliProc is a running raftlock process whose stdout lines are collected.
type cliProc struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr *strings.Builder
	done   chan struct{}
	err    error
}

func startCLI(t *testing.T, bin, addrs string, args ...string) *cliProc {
	t.Helper()
	p := &cliProc{lines: make(chan string, 64), stderr: &strings.Builder{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, append([]string{"--addr", addrs}, args...)...)
	var mu sync.Mutex
	p.cmd.Stderr = writerFunc(func(b []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return p.stderr.Write(b)
	})
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			mu.Lock()
			t.Logf("raftlock %v stderr:\n%s", args, p.stderr.String())
			mu.Unlock()
		}
	})
	return p
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// line returns the process's next stdout line.
func (p *cliProc) line(t *testing.T, what string, timeout time.Duration) string {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			<-p.done
			t.Fatalf("%s: process exited (%v)", what, p.err)
		}
		return l
	case <-time.After(timeout):
		t.Fatalf("%s: no output within %v", what, timeout)
	}
	return ""
}

// exitCode waits for the process to end and returns its exit status.
func (p *cliProc) exitCode(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("process still running after %v", timeout)
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		t.Fatalf("wait: %v", p.err)
	}
	return 0
}

// awaitPID waits until the child running under exec has written its pid
// to path, and returns it.
func awaitPID(t *testing.T, path string) int {
	t.Helper()
	var pid int
	proccluster.Eventually(t, 20*time.Second, "child running", func() error {
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(data)))
		return err
	})
	return pid
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Issue 3, test 3: kill -9 the elected `raftlock elect` process; another
// campaigner is elected once the dead one's session expired and its
// lock-delay passed, and Observe reports both leaders in order with
// increasing tokens.
func TestElectionFailoverOfProcesses(t *testing.T) {
	daemon, cli := binaries(t)
	c := proccluster.Start(t, daemon, 3)
	ctx := ctxFor(t, 2*time.Minute)
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	const ttl, lockDelay = 2 * time.Second, 1500 * time.Millisecond
	client := c.Client()
	observed, err := session.Observe(ctx, client, "election/primary")
	if err != nil {
		t.Fatal(err)
	}
	flags := []string{"elect", "--ttl", ttl.String(), "--lock-delay", lockDelay.String(), "election/primary"}
	a := startCLI(t, cli, c.AddrList(), append(flags, "10.0.0.1:8080")...)
	first := <-observed
	if first.Value != "10.0.0.1:8080" {
		t.Fatalf("first leader %+v", first)
	}
	if got := a.line(t, "a elected", 10*time.Second); !strings.HasPrefix(got, "elected: election/primary") || !strings.Contains(got, first.Sequencer.String()) {
		t.Fatalf("a printed %q, want its election with %s", got, first.Sequencer)
	}
	b := startCLI(t, cli, c.AddrList(), append(flags, "10.0.0.2:8080")...)
	// b queues behind a.
	proccluster.Eventually(t, 10*time.Second, "b queued", func() error {
		st, err := client.LockState(ctx, "election/primary")
		if err != nil || st.Waiters != 1 {
			return fmt.Errorf("waiters %d, %v", st.Waiters, err)
		}
		return nil
	})

	killed := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var second session.Leader
	select {
	case second = <-observed:
	case <-time.After(30 * time.Second):
		t.Fatal("no second leader within 30s")
	}
	took := time.Since(killed)
	t.Logf("kill -9 of the leader to the next election: %v (ttl %v, lock-delay %v)", took, ttl, lockDelay)
	if second.Value != "10.0.0.2:8080" || second.Token() <= first.Token() {
		t.Fatalf("second leader %+v after %+v: want b with a larger token", second, first)
	}
	// The dead leader's lease ran at least 2/3 of its TTL past the kill
	// (keepalives go every TTL/3), then the lock-delay.
	if min := ttl*2/3 + lockDelay; took < min {
		t.Fatalf("b elected %v after the kill, before the lease and lock-delay (%v) could have run out", took, min)
	}
	if got := b.line(t, "b elected", 10*time.Second); !strings.Contains(got, second.Sequencer.String()) {
		t.Fatalf("b printed %q, want %s", got, second.Sequencer)
	}
	cur, err := session.CurrentLeader(ctx, client, "election/primary")
	if err != nil || cur != second {
		t.Fatalf("raftlock leader: %+v, %v; want %+v", cur, err, second)
	}
	leaderOut, err := exec.Command(cli, "--addr", c.AddrList(), "leader", "election/primary").Output()
	if err != nil || !strings.Contains(string(leaderOut), `"10.0.0.2:8080"`) {
		t.Fatalf("raftlock leader printed %q, %v", leaderOut, err)
	}
	// SIGTERM: b resigns; the election is free at once (no lock-delay).
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := b.exitCode(t, 10*time.Second); code != 0 {
		t.Fatalf("b exited %d after SIGTERM, want 0", code)
	}
	st, err := client.LockState(ctx, "election/primary")
	if err != nil || len(st.Holders) != 0 || !st.DelayUntil.IsZero() {
		t.Fatalf("after resignation: %+v, %v; want free without lock-delay", st, err)
	}
}

// Issue 3, test 4: two concurrent `raftlock exec`s on one lock never run
// their commands at the same time, each child sees RAFTLOCK_SEQUENCER, and
// killing the cluster's leader mid-run does not stop the child.
func TestExecMutualExclusionAcrossLeaderKill(t *testing.T) {
	daemon, cli := binaries(t)
	c := proccluster.Start(t, daemon, 3)
	ctx := ctxFor(t, 2*time.Minute)
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	logFile := filepath.Join(dir, "runs.log")
	// Each run appends "start <who> <unix ns> <sequencer>", works for 3s,
	// then appends "end <who> <unix ns>".
	script := `echo "start $1 $(date +%s%N) $RAFTLOCK_SEQUENCER" >> "$2"; sleep 3; echo "end $1 $(date +%s%N)" >> "$2"`
	run := func(who string) *cliProc {
		return startCLI(t, cli, c.AddrList(), "exec", "--ttl", "3s", "jobs/nightly", "--", "sh", "-c", script, "sh", who, logFile)
	}
	a, b := run("a"), run("b")

	// Kill the leader while the first child runs.
	proccluster.Eventually(t, 20*time.Second, "first child started", func() error {
		data, _ := os.ReadFile(logFile)
		if !strings.Contains(string(data), "start ") {
			return errors.New("no start line yet")
		}
		return nil
	})
	li, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	c.Kill(li)

	for _, p := range []*cliProc{a, b} {
		if code := p.exitCode(t, 60*time.Second); code != 0 {
			t.Fatalf("exec exited %d, want 0 (the child's status)", code)
		}
	}
	data, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	type runRec struct {
		who        string
		start, end int64
		seq        sequencer.Sequencer
	}
	runs := map[string]*runRec{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			t.Fatalf("bad line %q", line)
		}
		r := runs[f[1]]
		if r == nil {
			r = &runRec{who: f[1]}
			runs[f[1]] = r
		}
		ns, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		switch f[0] {
		case "start":
			if len(f) != 4 {
				t.Fatalf("start line %q without RAFTLOCK_SEQUENCER", line)
			}
			if r.seq, err = sequencer.Parse(f[3]); err != nil || r.seq.Name != "jobs/nightly" {
				t.Fatalf("child's RAFTLOCK_SEQUENCER %q: %v", f[3], err)
			}
			r.start = ns
		case "end":
			r.end = ns
		}
	}
	if len(runs) != 2 {
		t.Fatalf("runs %v, want a and b\n%s", runs, data)
	}
	list := []*runRec{runs["a"], runs["b"]}
	sort.Slice(list, func(i, j int) bool { return list[i].start < list[j].start })
	for _, r := range list {
		if r.start == 0 || r.end == 0 {
			t.Fatalf("run %s incomplete: %+v\n%s", r.who, r, data)
		}
	}
	if list[1].start < list[0].end {
		t.Fatalf("runs overlap: %s ran %d..%d, %s started at %d\n%s", list[0].who, list[0].start, list[0].end, list[1].who, list[1].start, data)
	}
	if list[1].seq.Token <= list[0].seq.Token {
		t.Fatalf("second run's token %d not above the first's %d", list[1].seq.Token, list[0].seq.Token)
	}
	if k := killedAt.UnixNano(); k < list[0].start || k > list[0].end {
		t.Fatalf("the leader was killed at %d, outside the first run %d..%d", k, list[0].start, list[0].end)
	}
	t.Logf("first run %v, gap to the second %v (leader killed mid-run)",
		time.Duration(list[0].end-list[0].start), time.Duration(list[1].start-list[0].end))
}

// exec's exit statuses: the child's own status, 125 when the lock is busy
// with --wait 0s, 127 for a missing command; and when the lock is lost
// (the exec process was paused past its TTL) the child is stopped and exec
// exits 124.
func TestExecStatusesAndLockLoss(t *testing.T) {
	daemon, cli := binaries(t)
	c := proccluster.Start(t, daemon, 3)
	ctx := ctxFor(t, 2*time.Minute)
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	addrs := c.AddrList()
	if code := startCLI(t, cli, addrs, "exec", "jobs/x", "--", "sh", "-c", "exit 7").exitCode(t, 30*time.Second); code != 7 {
		t.Fatalf("exec of 'exit 7' exited %d", code)
	}
	if code := startCLI(t, cli, addrs, "exec", "jobs/x", "--", "/nonexistent/cmd").exitCode(t, 30*time.Second); code != exitNotFound {
		t.Fatalf("exec of a missing command exited %d, want %d", code, exitNotFound)
	}

	dir := t.TempDir()
	// Signals sent to exec reach CMD: SIGUSR1 is trapped and CMD goes on,
	// SIGTERM is trapped and CMD exits 9; exec exits with CMD's status and
	// releases the lock.
	trapped, ready := filepath.Join(dir, "trapped"), filepath.Join(dir, "ready")
	sig := startCLI(t, cli, addrs, "exec", "jobs/x", "--", "sh", "-c",
		`trap 'echo USR1 >> "$1"' USR1; trap 'echo TERM >> "$1"; exit 9' TERM; echo up > "$2"; while :; do sleep 0.05; done`,
		"sh", trapped, ready)
	proccluster.Eventually(t, 20*time.Second, "trapping child running", func() error {
		_, err := os.Stat(ready)
		return err
	})
	if err := sig.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	proccluster.Eventually(t, 10*time.Second, "SIGUSR1 forwarded", func() error {
		if data, _ := os.ReadFile(trapped); string(data) != "USR1\n" {
			return fmt.Errorf("trapped %q", data)
		}
		return nil
	})
	if err := sig.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := sig.exitCode(t, 30*time.Second); code != 9 {
		t.Fatalf("exec whose child exits 9 on SIGTERM exited %d", code)
	}
	if data, _ := os.ReadFile(trapped); string(data) != "USR1\nTERM\n" {
		t.Fatalf("signals the child trapped: %q, want USR1 then TERM", data)
	}
	if st, err := c.Client().LockState(ctx, "jobs/x"); err != nil || len(st.Holders) != 0 || !st.DelayUntil.IsZero() {
		t.Fatalf("lock after exec ended: %+v, %v; want free without lock-delay", st, err)
	}

	pidFile := filepath.Join(dir, "child.pid")
	holder := startCLI(t, cli, addrs, "exec", "--ttl", "2s", "--lock-delay", "2s", "--kill-grace", "1s", "jobs/x", "--",
		"sh", "-c", `echo $$ > "$1"; exec sleep 120`, "sh", pidFile)
	childPID := awaitPID(t, pidFile)
	busy := startCLI(t, cli, addrs, "exec", "--wait", "0s", "jobs/x", "--", "true")
	if code := busy.exitCode(t, 30*time.Second); code != exitNoLock {
		t.Fatalf("exec --wait 0s on a held lock exited %d, want %d", code, exitNoLock)
	}

	// Pause the exec process past its TTL: the cluster expires its session
	// and, after the lock-delay, grants the lock to another session.
	if err := holder.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	s, err := session.Open(ctx, c.Client(), session.TTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if _, err := s.Lock(ctx, "jobs/x"); err != nil {
		t.Fatal(err)
	}
	if err := holder.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if code := holder.exitCode(t, 30*time.Second); code != exitLockLost {
		t.Fatalf("exec whose lock was lost exited %d, want %d", code, exitLockLost)
	}
	if err := syscall.Kill(childPID, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("the child %d still runs after the lock was lost (kill 0: %v)", childPID, err)
	}
}

// TestExecChildDeadBeforeLockRegranted pins exec's promise: with its API
// traffic black-holed (DROP, no RST: it keeps running), exec has its child
// dead, SIGKILL sent and reaped, before the cluster grants the lock to
// anyone else, even a child that ignores SIGTERM; settings that leave no
// time for that are refused with the values that work.
func TestExecChildDeadBeforeLockRegranted(t *testing.T) {
	daemon, cli := binaries(t)
	c := proccluster.Start(t, daemon, 3)
	ctx := ctxFor(t, 2*time.Minute)
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}

	// Just below the boundary: --ttl 2s --kill-grace 1s needs a lock-delay
	// of 1.5s + 1% of ttl + lock-delay + 100ms, i.e. 1.7s.
	low := startCLI(t, cli, c.AddrList(), "exec", "--ttl", "2s", "--lock-delay", "1.6s", "--kill-grace", "1s", "jobs/edge", "--", "true")
	if code := low.exitCode(t, 30*time.Second); code != 2 {
		t.Fatalf("exec with a lock-delay too short for its kill-grace exited %d, want 2 (usage)", code)
	}
	if msg := low.stderr.String(); !strings.Contains(msg, "use --lock-delay 1.7s or more") {
		t.Fatalf("refusal does not name the safe lock-delay: %q", msg)
	}
	if code := startCLI(t, cli, c.AddrList(), "exec", "--ttl", "3s", "--lock-delay", "0s", "jobs/edge", "--", "true").exitCode(t, 30*time.Second); code != 2 {
		t.Fatalf("exec --lock-delay 0s (no time to stop the child) exited %d, want 2", code)
	}

	// At the boundary, with the child trapping SIGTERM.
	holes := proccluster.BlackholeAll(t, c.Addrs())
	dir := t.TempDir()
	stamps, pidFile := filepath.Join(dir, "stamps"), filepath.Join(dir, "pid")
	holder := startCLI(t, cli, strings.Join(holes.Addrs(), ","), "exec", "--ttl", "2s", "--lock-delay", "1.7s", "--kill-grace", "1s", "jobs/edge", "--",
		"sh", "-c", `echo $$ > "$2"; trap '' TERM; while :; do date +%s%N >> "$1"; sleep 0.02; done`, "sh", stamps, pidFile)
	childPID := awaitPID(t, pidFile)

	s, err := session.Open(ctx, c.Client(), session.TTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	granted := make(chan int64, 1)
	go func() {
		if _, err := s.Lock(ctx, "jobs/edge"); err == nil {
			granted <- time.Now().UnixNano()
		}
	}()
	proccluster.Eventually(t, 10*time.Second, "the waiter to queue", func() error {
		st, err := c.Client().LockState(ctx, "jobs/edge")
		if err != nil || st.Waiters != 1 {
			return fmt.Errorf("%+v, %v", st, err)
		}
		return nil
	})
	holes.Cut()
	var grantAt int64
	select {
	case grantAt = <-granted:
	case <-ctx.Done():
		t.Fatal("the waiter was never granted the lock")
	}
	if err := syscall.Kill(childPID, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("exec's child %d still runs when the lock is granted to another session (kill 0: %v)", childPID, err)
	}
	data, err := os.ReadFile(stamps)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(data))
	last, err := strconv.ParseInt(lines[len(lines)-1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if last >= grantAt {
		t.Fatalf("the child wrote %v after another session was granted the lock", time.Duration(last-grantAt))
	}
	t.Logf("child's last write %v before the re-grant", time.Duration(grantAt-last).Round(time.Millisecond))
	holes.Heal()
	if code := holder.exitCode(t, 30*time.Second); code != exitLockLost {
		t.Fatalf("exec whose lock was lost exited %d, want %d", code, exitLockLost)
	}
}
