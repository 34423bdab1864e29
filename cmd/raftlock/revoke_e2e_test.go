package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/cmd/internal/proccluster"
	"github.com/raftlock/raftlock/sequencer"
	"github.com/raftlock/raftlock/session"
	"github.com/raftlock/raftlock/transport/client"
)

// stampChildEnv makes the test binary a child of exec that writes its pid
// to $1's ".pid" file, then the time (Unix nanoseconds) to $1 every 10 ms,
// ignoring SIGTERM, until killed (TestMain).
const stampChildEnv = "RAFTLOCK_TEST_STAMP_CHILD"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == guardCommand {
		os.Exit(guardMain(os.Args[2:])) // exec's guard, when exec runs in the test binary
	}
	if path := os.Getenv(stampChildEnv); path != "" {
		stampChild(path)
		return
	}
	os.Exit(m.Run())
}

func stampChild(path string) {
	signal.Ignore(syscall.SIGTERM)
	if err := os.WriteFile(path+".pid", []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		os.Exit(3)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		os.Exit(3)
	}
	for {
		fmt.Fprintf(f, "%d\n", time.Now().UnixNano())
		time.Sleep(10 * time.Millisecond)
	}
}

// envInt reads a positive count from the environment, else def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// TestRevokedHolderLosesLockBeforeNextGrant is the proof of the
// revocation's promise (issue 32: TTL 3 s, lock-delay 10 s): holders of
// RAFTLOCK_REVOKE_LOCKS locks (default 100) through the Go client and of
// RAFTLOCK_REVOKE_EXECS locks (default 5) through `raftlock exec`, each
// with a client waiting, are all revoked at once, RAFTLOCK_REVOKE_RUNS
// times (default 1). Every revoked Go holder's Lost() closes, with the
// revocation's reason, before its waiter is granted the lock; every exec's
// child (which ignores SIGTERM) has written its last timestamp and is dead
// when its waiter is granted, and exec exits 124 naming the reason. It
// logs the smallest margins.
func TestRevokedHolderLosesLockBeforeNextGrant(t *testing.T) {
	daemon, cli := binaries(t)
	runs := envInt("RAFTLOCK_REVOKE_RUNS", 1)
	nGo := envInt("RAFTLOCK_REVOKE_LOCKS", 100)
	nExec := envInt("RAFTLOCK_REVOKE_EXECS", 5)
	c := proccluster.Start(t, daemon, 3)
	ctx := ctxFor(t, time.Duration(runs)*2*time.Minute+time.Minute)
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	const ttl, delay = 3 * time.Second, 10 * time.Second
	cl := c.Client()
	awaitVersion5(ctx, t, cl)
	minGo, minExec := time.Duration(1<<62), time.Duration(1<<62)
	revocations := 0
	for run := 0; run < runs; run++ {
		r := revokeRun(t, ctx, c, cl, cli, run, nGo, nExec, ttl, delay)
		revocations += r.revoked
		minGo, minExec = min(minGo, r.minGo), min(minExec, r.minExec)
		t.Logf("run %d: %d revocations; smallest margin Lost() → next grant %v, exec child's last write → next grant %v",
			run, r.revoked, r.minGo.Round(time.Millisecond), r.minExec.Round(time.Millisecond))
	}
	t.Logf("%d runs, %d revocations (%d Go, %d exec): smallest margin Lost() → next grant %v; exec child's last write → next grant %v",
		runs, revocations, runs*nGo, runs*nExec, minGo.Round(time.Millisecond), minExec.Round(time.Millisecond))
}

// awaitVersion5 waits until every member has recorded that it reads
// command version 5 (what revocations and release requests need).
func awaitVersion5(ctx context.Context, t *testing.T, cl *client.Client) {
	t.Helper()
	proccluster.Eventually(t, time.Minute, "every member reads command version 5", func() error {
		info, err := cl.Cluster(ctx)
		if err != nil {
			return err
		}
		for _, m := range info.Members {
			if m.Commands < 5 {
				return fmt.Errorf("member %s reads command version %d", m.ID, m.Commands)
			}
		}
		return nil
	})
}

// closeSessionWithin closes s, giving up after d.
func closeSessionWithin(s *session.Session, d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_ = s.Close(ctx)
}

type revokeResult struct {
	revoked        int
	minGo, minExec time.Duration
}

func revokeRun(t *testing.T, ctx context.Context, c *proccluster.Cluster, cl *client.Client, cli string, run, nGo, nExec int,
	ttl, delay time.Duration) revokeResult {
	t.Helper()
	res := revokeResult{minGo: 1 << 62, minExec: 1 << 62}
	reason := fmt.Sprintf("run %d: stuck", run)
	name := func(kind string, i int) string { return fmt.Sprintf("revoke/%d/%s/%d", run, kind, i) }

	// The holders: Go sessions, and exec processes with their children.
	type goHolder struct {
		s      *session.Session
		l      *session.Lock
		lostAt chan time.Time
	}
	holders := make([]goHolder, nGo)
	for i := range holders {
		s, err := session.Open(ctx, cl, session.TTL(ttl), session.LockDelay(delay), session.Name("holder"))
		if err != nil {
			t.Fatal(err)
		}
		defer closeSessionWithin(s, 5*time.Second)
		l, err := s.TryLock(ctx, name("go", i))
		if err != nil {
			t.Fatal(err)
		}
		h := goHolder{s: s, l: l, lostAt: make(chan time.Time, 1)}
		go func() {
			<-l.Lost()
			h.lostAt <- time.Now()
		}()
		holders[i] = h
	}
	dir := t.TempDir()
	execs := make([]*cliProc, nExec)
	stamps := make([]string, nExec)
	pids := make([]int, nExec)
	for i := range execs {
		stamps[i] = filepath.Join(dir, fmt.Sprintf("stamps-%d", i))
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		execs[i] = startCLI(t, cli, c.AddrList(), "exec", "--ttl", ttl.String(), "--lock-delay", delay.String(), name("exec", i), "--",
			"env", stampChildEnv+"="+stamps[i], self)
		pids[i] = awaitPID(t, stamps[i]+".pid")
	}

	// A waiter for every lock.
	all := make([]string, 0, nGo+nExec)
	for i := 0; i < nGo; i++ {
		all = append(all, name("go", i))
	}
	for i := 0; i < nExec; i++ {
		all = append(all, name("exec", i))
	}
	grantAt := make(map[string]time.Time, len(all))
	var mu sync.Mutex
	var wg sync.WaitGroup
	errc := make(chan error, len(all))
	for _, lock := range all {
		w, err := session.Open(ctx, cl, session.TTL(10*time.Second), session.Name("waiter"))
		if err != nil {
			t.Fatal(err)
		}
		defer closeSessionWithin(w, 5*time.Second)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := w.Lock(ctx, lock); err != nil {
				errc <- fmt.Errorf("waiter of %s: %w", lock, err)
				return
			}
			now := time.Now()
			mu.Lock()
			grantAt[lock] = now
			mu.Unlock()
		}()
	}
	proccluster.Eventually(t, 30*time.Second, "every waiter to queue", func() error {
		for _, lock := range all {
			st, err := cl.LockState(ctx, lock)
			if err != nil {
				return err
			}
			if st.Waiters != 1 || len(st.Holders) != 1 {
				return fmt.Errorf("%s: %d holders, %d waiters", lock, len(st.Holders), st.Waiters)
			}
		}
		return nil
	})

	// Revoke every grant at once, by the holder id the lock shows.
	start := time.Now()
	var rwg sync.WaitGroup
	for _, lock := range all {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			st, err := cl.LockState(ctx, lock)
			if err != nil || len(st.Holders) != 1 {
				errc <- fmt.Errorf("%s before the revocation: %+v, %v", lock, st, err)
				return
			}
			rv, err := cl.RevokeGrant(ctx, api.RevokeRequest{Name: lock, Holder: st.Holders[0].Holder, Reason: reason})
			if err != nil {
				errc <- fmt.Errorf("revoke %s: %w", lock, err)
				return
			}
			if rv.Unavailable != ttl+delay {
				errc <- fmt.Errorf("revoke %s: unavailable for %v, want ttl + lock-delay %v", lock, rv.Unavailable, ttl+delay)
			}
			// The revoked grant's sequencer is invalid at once.
			seq := sequencer.Sequencer{Name: lock, Mode: sequencer.Exclusive, Token: st.Holders[0].Token}
			if chk, err := cl.CheckSequencer(ctx, seq.String()); err != nil || chk.Valid {
				errc <- fmt.Errorf("%s: the revoked grant's sequencer checks %+v, %v; want invalid", lock, chk, err)
			}
		}()
	}
	rwg.Wait()
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	for i, h := range holders {
		lock := name("go", i)
		var lost time.Time
		select {
		case lost = <-h.lostAt:
		default:
			t.Fatalf("%s was granted to its waiter %v after the revocation while the revoked holder's Lost() was still open",
				lock, grantAt[lock].Sub(start))
		}
		if margin := grantAt[lock].Sub(lost); margin <= 0 {
			t.Fatalf("%s: Lost() closed %v after the next grant", lock, -margin)
		} else {
			res.minGo = min(res.minGo, margin)
		}
		var re *session.RevokedError
		if !errors.As(h.l.Err(), &re) || re.Reason != reason {
			t.Fatalf("%s: Err() = %v, want the revocation and its reason", lock, h.l.Err())
		}
		if !h.s.Safe() {
			t.Fatalf("%s: the revoked holder's session is %v, want still safe (only the grant ends)", lock, h.s.State())
		}
		res.revoked++
	}
	for i, p := range execs {
		lock := name("exec", i)
		g := grantAt[lock]
		if err := syscall.Kill(pids[i], 0); !errors.Is(err, syscall.ESRCH) {
			t.Fatalf("%s: exec's child %d still runs when the lock is granted to another session (kill 0: %v)", lock, pids[i], err)
		}
		data, err := os.ReadFile(stamps[i])
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Fields(string(data))
		last, err := strconv.ParseInt(lines[len(lines)-1], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		margin := time.Duration(g.UnixNano() - last)
		if margin <= 0 {
			t.Fatalf("%s: exec's child wrote %v after the next grant", lock, -margin)
		}
		res.minExec = min(res.minExec, margin)
		if code := p.exitCode(t, 30*time.Second); code != exitLockLost {
			t.Fatalf("%s: revoked exec exited %d, want %d", lock, code, exitLockLost)
		}
		if msg := p.stderr.String(); !strings.Contains(msg, "revoked by an operator: "+reason) {
			t.Fatalf("%s: exec's stderr does not give the revocation's reason: %q", lock, msg)
		}
		res.revoked++
	}
	return res
}

// TestOperatorCommandsRevokeListCloseAndRequest drives the operator's CLI
// commands against real processes: session list shows the exec holder by
// handle and name, lock request-release reaches exec (a release_requested
// line; CMD keeps running), lock revoke ends exec's grant (exit 124, the
// reason on stderr), session close HANDLE ends another session (its next
// keepalive: session_not_found), and --max-hold out of range is a usage
// error.
func TestOperatorCommandsRevokeListCloseAndRequest(t *testing.T) {
	daemon, cli := binaries(t)
	c := proccluster.Start(t, daemon, 3)
	ctx := ctxFor(t, 2*time.Minute)
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	cl := c.Client()
	awaitVersion5(ctx, t, cl)
	run := func(args ...string) (string, int) {
		t.Helper()
		p := startCLI(t, cli, c.AddrList(), args...)
		var out []string
		for l := range p.lines {
			out = append(out, l)
		}
		return strings.Join(out, "\n"), p.exitCode(t, 30*time.Second)
	}
	holder := startCLI(t, cli, c.AddrList(), "exec", "--ttl", "2s", "--lock-delay", "2s", "--kill-grace", "1s", "jobs/cli", "--", "sleep", "60")
	var st api.LockState
	proccluster.Eventually(t, 20*time.Second, "exec to hold the lock", func() error {
		var err error
		if st, err = cl.LockState(ctx, "jobs/cli"); err != nil || len(st.Holders) != 1 {
			return fmt.Errorf("%+v %v", st, err)
		}
		return nil
	})
	h := st.Holders[0]
	if out, code := run("session", "list"); code != 0 || !strings.Contains(out, h.SessionHandle) {
		t.Fatalf("session list (exit %d) does not show the holder's handle %s:\n%s", code, h.SessionHandle, out)
	}
	other, err := session.Open(ctx, cl, session.TTL(5*time.Second), session.Name("other"))
	if err != nil {
		t.Fatal(err)
	}
	defer closeSessionWithin(other, 5*time.Second)
	if out, code := run("lock", "request-release", "jobs/cli", "--session", other.ID()); code != 0 {
		t.Fatalf("lock request-release: exit %d: %s", code, out)
	}
	time.Sleep(2 * time.Second) // a keepalive of exec's (ttl/3) carries the request; exec must keep CMD running
	if out, code := run("lock", "revoke", "jobs/cli", "--holder", h.Holder, "--reason", "cli test"); code != 0 || !strings.Contains(out, "revoked jobs/cli") {
		t.Fatalf("lock revoke: exit %d: %s", code, out)
	}
	if code := holder.exitCode(t, 30*time.Second); code != exitLockLost {
		t.Fatalf("revoked exec exited %d, want %d", code, exitLockLost)
	}
	msg := holder.stderr.String()
	if !strings.Contains(msg, "release_requested: lock jobs/cli") || !strings.Contains(msg, "revoked by an operator: cli test") {
		t.Fatalf("exec's stderr lacks the release request or the revocation:\n%s", msg)
	}
	if out, code := run("session", "close", other.Handle(), "--reason", "cli test"); code != 0 || !strings.Contains(out, "closed session "+other.Handle()) {
		t.Fatalf("session close HANDLE: exit %d: %s", code, out)
	}
	if _, err := cl.KeepAlive(ctx, other.ID()); api.CodeOf(err) != api.CodeSessionNotFound {
		t.Fatalf("the closed session's keepalive: %v, want session_not_found", err)
	}
	if _, code := run("acquire", "--session", other.ID(), "--max-hold", "500ms", "jobs/x"); code != 2 {
		t.Fatalf("acquire --max-hold 500ms exited %d, want 2 (out of range)", code)
	}
}
