//go:build linux

package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/raftlock/raftlock/cmd/internal/proccluster"
	"github.com/raftlock/raftlock/session"
)

// The settings of the guard's end-to-end tests: exec's lease, its
// lock-delay (the least --kill-grace 1s allows) and kill-grace.
const (
	guardTTL       = 2 * time.Second
	guardLockDelay = 2 * time.Second
)

// guardedExec is an exec holding a lock (or a slot) whose CMD runs
// groupScript: CMD and a grandchild in its process group.
type guardedExec struct {
	proc              *cliProc
	child, grandchild int
	childEnd, gEnd    <-chan time.Time
}

// startGuardedExec starts exec with extra flags on lock name and waits
// for CMD and its grandchild to run.
func startGuardedExec(t *testing.T, cli, addrs, name string, extra ...string) *guardedExec {
	t.Helper()
	dir := t.TempDir()
	pidFile, gpidFile := filepath.Join(dir, "pid"), filepath.Join(dir, "gpid")
	args := append([]string{"exec", "--ttl", guardTTL.String(), "--lock-delay", guardLockDelay.String(), "--kill-grace", "1s"}, extra...)
	// CMD writes its pid to $2, groupScript its grandchild's to $1.
	args = append(args, name, "--", "sh", "-c", `echo $$ > "$2.tmp" && mv "$2.tmp" "$2"; `+groupScript, "sh", gpidFile, pidFile)
	e := &guardedExec{proc: startCLI(t, cli, addrs, args...)}
	e.child, e.grandchild = awaitPID(t, pidFile), awaitPID(t, gpidFile)
	// Registered after startCLI's cleanup, so run before it: on today's
	// code CMD outlives exec and would hold its stdout open.
	e.childEnd, e.gEnd = exitOf(t, e.child), exitOf(t, e.grandchild)
	return e
}

// awaitWaiter waits until name has n waiters queued.
func awaitWaiter(t *testing.T, ctx context.Context, c *proccluster.Cluster, name string, n int) {
	t.Helper()
	proccluster.Eventually(t, 20*time.Second, "the waiter to queue", func() error {
		st, err := c.Client().LockState(ctx, name)
		if err != nil || st.Waiters != n {
			return fmt.Errorf("%+v, %v", st, err)
		}
		return nil
	})
}

// lockIn starts taking name (a slot of permits, if above 0) in the
// background; the channel gets the moment it is granted.
func lockIn(t *testing.T, ctx context.Context, s *session.Session, name string, permits uint64) <-chan time.Time {
	t.Helper()
	granted := make(chan time.Time, 1)
	var opts []session.LockOption
	if permits > 0 {
		opts = append(opts, session.Permits(permits))
	}
	go func() {
		if _, err := s.Lock(ctx, name, opts...); err == nil {
			granted <- time.Now()
		}
	}()
	return granted
}

// deadBeforeGrant checks that CMD and its grandchild ended before the
// grant, and returns the moments they ended and of the grant.
func (e *guardedExec) deadBeforeGrant(t *testing.T, ctx context.Context, granted <-chan time.Time) (child, grandchild, grant time.Time) {
	t.Helper()
	var childDead, gDead bool
	for !childDead || !gDead {
		select {
		case child = <-e.childEnd:
			childDead = true
		case grandchild = <-e.gEnd:
			gDead = true
		case <-granted:
			t.Fatalf("the lock was granted to another session while exec's CMD (pid %d, ended: %v) or its grandchild (pid %d, ended: %v) still ran",
				e.child, childDead, e.grandchild, gDead)
		case <-ctx.Done():
			t.Fatal("CMD and its grandchild never ended")
		}
	}
	select {
	case grant = <-granted:
	case <-ctx.Done():
		t.Fatal("the waiter was never granted the lock")
	}
	return child, grandchild, grant
}

// TestExecKilledLeavesNoChildRunningAtTheNextGrant pins issue 39 item 4:
// after a SIGKILL of exec, its CMD and a grandchild in CMD's process group
// are dead before the lock (or the semaphore slot) is granted to anyone
// else, and that grant comes after the lock-delay as usual.
func TestExecKilledLeavesNoChildRunningAtTheNextGrant(t *testing.T) {
	daemon, cli := binaries(t)
	c := proccluster.Start(t, daemon, 3)
	ctx := ctxFor(t, 3*time.Minute)
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		permits uint64
		extra   []string
	}{
		{"plain lock", 0, nil},
		{"semaphore slot", 2, []string{"-n", "2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "jobs/killed-" + strings.ReplaceAll(tc.name, " ", "-")
			e := startGuardedExec(t, cli, c.AddrList(), name, tc.extra...)
			s, err := session.Open(ctx, c.Client(), session.TTL(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(context.Background())
			if tc.permits > 0 {
				// The semaphore's other slot is held: the waiter needs exec's.
				other, err := session.Open(ctx, c.Client(), session.TTL(10*time.Second))
				if err != nil {
					t.Fatal(err)
				}
				defer other.Close(context.Background())
				if _, err := other.TryLock(ctx, name, session.Permits(tc.permits)); err != nil {
					t.Fatal(err)
				}
			}
			granted := lockIn(t, ctx, s, name, tc.permits)
			awaitWaiter(t, ctx, c, name, 1)

			killed := time.Now()
			if err := e.proc.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			child, grandchild, grant := e.deadBeforeGrant(t, ctx, granted)
			// The cluster expires the session no earlier than ttl after
			// the last keepalive it received (before the kill, less than
			// ttl/3 + an answer's time before it), then keeps the lock
			// for the lock-delay: the guard changes nothing there.
			if grant.Sub(killed) < guardLockDelay {
				t.Fatalf("the lock was granted again %v after exec's SIGKILL, before its lock-delay %v", grant.Sub(killed), guardLockDelay)
			}
			t.Logf("after kill -9 of exec: CMD dead in %v, its grandchild in %v, the lock granted again in %v",
				child.Sub(killed).Round(time.Microsecond), grandchild.Sub(killed).Round(time.Microsecond), grant.Sub(killed).Round(time.Millisecond))
		})
	}
}

// TestExecFrozenPastItsLeaseHasItsChildKilledBeforeTheNextGrant pins the
// guard's deadline: exec SIGSTOPped (it cannot run its own timers) past
// its lease has CMD and its grandchild killed before the lock is granted
// again, and, continued, exits 124 (lock_lost) saying why.
func TestExecFrozenPastItsLeaseHasItsChildKilledBeforeTheNextGrant(t *testing.T) {
	daemon, cli := binaries(t)
	c := proccluster.Start(t, daemon, 3)
	ctx := ctxFor(t, 3*time.Minute)
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	const name = "jobs/frozen"
	e := startGuardedExec(t, cli, c.AddrList(), name)
	s, err := session.Open(ctx, c.Client(), session.TTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	granted := lockIn(t, ctx, s, name, 0)
	awaitWaiter(t, ctx, c, name, 1)

	frozen := time.Now()
	if err := e.proc.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	child, grandchild, grant := e.deadBeforeGrant(t, ctx, granted)
	lost := session.LostAfter(guardTTL, guardLockDelay)
	t.Logf("after SIGSTOP of exec: CMD dead in %v, its grandchild in %v (the guard's deadline: last acknowledged keepalive's send + %v), the lock granted again in %v",
		child.Sub(frozen).Round(time.Millisecond), grandchild.Sub(frozen).Round(time.Millisecond), lost-reapBudget, grant.Sub(frozen).Round(time.Millisecond))

	if err := e.proc.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if code := e.proc.exitCode(t, 30*time.Second); code != exitLockLost {
		t.Fatalf("exec continued after its CMD was killed exited %d, want %d", code, exitLockLost)
	}
	msg := e.proc.stderr.String()
	if !strings.Contains(msg, "raftlock: lock_lost: ") || !strings.Contains(msg, "exec was stopped or starved past its lease, so its guard sent sh's process group SIGKILL") {
		t.Fatalf("exec continued after its CMD was killed said %q; want lock_lost and that its guard killed CMD", msg)
	}
}
