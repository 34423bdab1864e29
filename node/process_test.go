package node

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/raftlock/raftlock/sequencer"
	"github.com/raftlock/raftlock/session"
	"github.com/raftlock/raftlock/transport/client"
)

// The test binary doubles as a client process: with RAFTLOCK_TEST_CLIENT
// set it runs pausedClient instead of the tests, so that a test can
// SIGSTOP a real client process.
func TestMain(m *testing.M) {
	if os.Getenv("RAFTLOCK_TEST_CLIENT") == "paused-holder" {
		if err := pausedClient(os.Getenv("RAFTLOCK_TEST_ADDRS"), os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "client:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const (
	pausedLock = "paused/lock"
	pausedTTL  = 2 * time.Second
	pausedLD   = time.Second
)

// pausedClient takes pausedLock, prints "held <sequencer>", then waits for
// Lost and prints "lost <session state>".
func pausedClient(addrs string, out io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := client.NewClient(strings.Split(addrs, ","))
	if err != nil {
		return err
	}
	s, err := session.Open(ctx, cl, session.TTL(pausedTTL), session.LockDelay(pausedLD), session.GracePeriod(5*time.Second))
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	l, err := s.Lock(ctx, pausedLock)
	if err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	fmt.Fprintf(out, "held %s\n", l.Sequencer())
	select {
	case <-l.Lost():
		fmt.Fprintf(out, "lost %s\n", s.State())
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Issue 3, test 2: a client process paused (SIGSTOP) for longer than its
// TTL sees Lost() closed when it resumes, and its sequencer is rejected by
// a Fence that has seen the new holder's token.
func TestPausedClientLosesLockAndIsFenced(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a client process")
	}
	c := newHTTPCluster(t)
	c.leader()
	ctx := ctxT(t)

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "RAFTLOCK_TEST_CLIENT=paused-holder", "RAFTLOCK_TEST_ADDRS="+strings.Join(c.httpAddrs, ","))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func(what string) string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("%s: client exited", what)
			}
			return l
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: no line from the client within 30s", what)
		}
		return ""
	}
	held, ok := strings.CutPrefix(next("held"), "held ")
	if !ok {
		t.Fatalf("client said %q", held)
	}
	oldSeq, err := sequencer.Parse(held)
	if err != nil {
		t.Fatal(err)
	}
	fence := sequencer.NewFence()
	if err := fence.Check(oldSeq); err != nil {
		t.Fatalf("fence refuses the first holder: %v", err)
	}

	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	client := c.client(t)
	s := openSession(t, ctx, client, session.TTL(5*time.Second))
	// Blocks until the paused client's session expires and its lock-delay
	// ends.
	l2, err := s.Lock(ctx, pausedLock)
	if err != nil {
		t.Fatal(err)
	}
	// The lease of its last keepalive, sent at most ttl/3 before the
	// pause (the client's cadence), plus the lock-delay: no grant to
	// anyone else before then. (The bound is the rule's, not a timing
	// expectation: the lease counts from that keepalive, not the pause.)
	if since := time.Since(paused); since < pausedTTL-pausedTTL/3+pausedLD {
		t.Fatalf("new holder %v after the pause, before the lease of the paused client's last keepalive (TTL %v, sent every TTL/3) + lock-delay %v ran out", since, pausedTTL, pausedLD)
	}
	if err := fence.Check(l2.Sequencer()); err != nil {
		t.Fatalf("fence refuses the new holder: %v", err)
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// Its lease plus lock-delay ran out during the pause: Lost closes as
	// soon as it runs, in jeopardy or, if a keepalive answer came first,
	// expired.
	if got := next("lost"); got != "lost jeopardy" && got != "lost expired" {
		t.Fatalf("resumed client said %q, want \"lost jeopardy\" or \"lost expired\"", got)
	}
	if err := fence.Check(oldSeq); !errors.Is(err, sequencer.ErrStale) {
		t.Fatalf("fence accepted the paused client's sequencer %s after %s: %v", oldSeq, l2.Sequencer(), err)
	}
	chk, err := client.CheckSequencer(ctx, oldSeq.String())
	if err != nil || chk.Valid || chk.CurrentToken != l2.Token() {
		t.Fatalf("cluster check of the old sequencer: %+v, %v", chk, err)
	}
	for range lines { // read to EOF before Wait
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("client: %v", err)
	}
}
