//go:build linux

package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// exitOf returns a channel that gets the moment process pid ends (it
// exits or is killed; a zombie counts as ended), read through a pidfd, so
// that tests await a death instead of polling for it. The process is sent
// SIGKILL when the test ends, which also ends the wait.
func exitOf(t *testing.T, pid int) <-chan time.Time {
	t.Helper()
	done := make(chan time.Time, 1)
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, syscall.ESRCH) {
		done <- time.Now()
		return done
	}
	if err != nil {
		t.Fatalf("pidfd_open %d: %v", pid, err)
	}
	t.Cleanup(func() { _ = unix.PidfdSendSignal(fd, syscall.SIGKILL, nil, 0) })
	go func() {
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, -1); err == nil || !errors.Is(err, syscall.EINTR) {
				done <- time.Now()
				return
			}
		}
	}()
	return done
}

// awaitExit waits for an exitOf channel, failing the test (instead of
// hanging it) if the process still runs after a minute.
func awaitExit(t *testing.T, what string, exited <-chan time.Time) time.Time {
	t.Helper()
	select {
	case at := <-exited:
		return at
	case <-time.After(time.Minute):
		t.Fatalf("%s still runs after a minute", what)
	}
	return time.Time{}
}

// groupScript is a CMD that starts a grandchild in its group (sleep, its
// pid written to $1) and then sleeps itself.
const groupScript = `sleep 1000 & echo $! > "$1.tmp" && mv "$1.tmp" "$1"; exec sleep 1000`

// guardProc is a guard started the way exec starts it, from the test
// binary (TestMain dispatches guardCommand).
type guardProc struct {
	cmd     *exec.Cmd
	ctl     *os.File
	reports *bufio.Reader
	pid     int // CMD's
}

func startGuardProc(t *testing.T, deadline int64, argv ...string) *guardProc {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	g := &guardProc{cmd: exec.Command(self, append([]string{guardCommand}, argv...)...), ctl: ctlW, reports: bufio.NewReader(repR)}
	g.cmd.ExtraFiles = []*os.File{ctlR, repW}
	g.cmd.Stderr = os.Stderr
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ctlR.Close()
	repW.Close()
	t.Cleanup(func() {
		ctlW.Close()
		_ = g.cmd.Process.Kill()
		_ = g.cmd.Wait()
		repR.Close()
	})
	g.order(t, guardMsg{kind: "deadline", deadline: deadline})
	f := strings.Fields(g.report(t))
	if len(f) != 2 || f[0] != "started" {
		t.Fatalf("guard's first report %q, want started PID", f)
	}
	if g.pid, err = strconv.Atoi(f[1]); err != nil {
		t.Fatal(err)
	}
	return g
}

func (g *guardProc) order(t *testing.T, m guardMsg) {
	t.Helper()
	if _, err := g.ctl.WriteString(m.String() + "\n"); err != nil {
		t.Fatal(err)
	}
}

func (g *guardProc) report(t *testing.T) string {
	t.Helper()
	line, err := g.reports.ReadString('\n')
	if err != nil {
		t.Fatalf("guard's report: %q, %v", line, err)
	}
	return strings.TrimSpace(line)
}

// TestGuardProcessKillsCMDsGroupWhenExecsPipeCloses: the guard, a real
// process, SIGKILLs CMD and the grandchild in its group as soon as exec's
// end of the pipe closes (exec died), and reports why.
func TestGuardProcessKillsCMDsGroupWhenExecsPipeCloses(t *testing.T) {
	gpidFile := filepath.Join(t.TempDir(), "gpid")
	g := startGuardProc(t, monoNow()+int64(time.Hour), "sh", "-c", groupScript, "sh", gpidFile)
	child, grandchild := exitOf(t, g.pid), exitOf(t, awaitPID(t, gpidFile))
	g.order(t, guardMsg{kind: "deadline", deadline: monoNow() + int64(2*time.Hour)})
	g.ctl.Close()
	awaitExit(t, "CMD", child)
	awaitExit(t, "CMD's grandchild", grandchild)
	if got := g.report(t); got != "exited 137 "+whyExecGone {
		t.Fatalf("guard's report %q, want \"exited 137 %s\"", got, whyExecGone)
	}
}

// TestGuardProcessKillsCMDsGroupAtAnUnrenewedDeadline: with its pipe open
// but no renewal, the guard SIGKILLs CMD's group at the deadline.
func TestGuardProcessKillsCMDsGroupAtAnUnrenewedDeadline(t *testing.T) {
	gpidFile := filepath.Join(t.TempDir(), "gpid")
	g := startGuardProc(t, monoNow()+int64(time.Hour), "sh", "-c", groupScript, "sh", gpidFile)
	child, grandchild := exitOf(t, g.pid), exitOf(t, awaitPID(t, gpidFile))
	g.order(t, guardMsg{kind: "deadline", deadline: monoNow() + int64(100*time.Millisecond)})
	awaitExit(t, "CMD", child)
	awaitExit(t, "CMD's grandchild", grandchild)
	if got := g.report(t); got != "exited 137 "+whyDeadline {
		t.Fatalf("guard's report %q, want \"exited 137 %s\"", got, whyDeadline)
	}
}

// TestGuardProcessForwardsSignalsAndReportsCMDsStatus: a signal order
// reaches CMD, and CMD's own end is reported with its status.
func TestGuardProcessForwardsSignalsAndReportsCMDsStatus(t *testing.T) {
	ready := filepath.Join(t.TempDir(), "ready")
	g := startGuardProc(t, monoNow()+int64(time.Hour), "sh", "-c",
		`trap 'exit 9' TERM; echo $$ > "$1.tmp" && mv "$1.tmp" "$1"; while :; do sleep 0.05; done`, "sh", ready)
	awaitPID(t, ready) // the trap is set
	g.order(t, guardMsg{kind: "signal", sig: syscall.SIGTERM})
	if got := g.report(t); got != "exited 9 "+whyNone {
		t.Fatalf("guard's report %q, want \"exited 9 %s\"", got, whyNone)
	}
}

// TestGuardedCMDDiesWithAKilledGuard: PR_SET_PDEATHSIG, set from the
// guard's locked thread, kills CMD itself when the guard is SIGKILLed
// (with exec, say). Its grandchildren are not covered (the docs say so).
func TestGuardedCMDDiesWithAKilledGuard(t *testing.T) {
	g := startGuardProc(t, monoNow()+int64(time.Hour), "sleep", "1000")
	child := exitOf(t, g.pid)
	if err := g.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	awaitExit(t, "CMD of a SIGKILLed guard", child)
}

// TestGuardProcessKillsOrphansThatLeftCMDsGroup: the guard is the
// subreaper of CMD's tree, so a daemon that left CMD's process group
// (setsid) dies with it too: one whose parent exited at once (a double
// fork, re-parented to the guard while CMD runs) and one whose parent
// is CMD (re-parented when the group's SIGKILL ends CMD).
func TestGuardProcessKillsOrphansThatLeftCMDsGroup(t *testing.T) {
	dir := t.TempDir()
	underCMD, doubleForked := filepath.Join(dir, "under-cmd"), filepath.Join(dir, "double-forked")
	g := startGuardProc(t, monoNow()+int64(time.Hour), "sh", "-c",
		`setsid sleep 1000 & echo $! > "$1.tmp" && mv "$1.tmp" "$1"; (setsid sleep 1000 & echo $! > "$2.tmp" && mv "$2.tmp" "$2"); exec sleep 1000`,
		"sh", underCMD, doubleForked)
	child := exitOf(t, g.pid)
	daemon1, daemon2 := exitOf(t, awaitPID(t, underCMD)), exitOf(t, awaitPID(t, doubleForked))
	g.ctl.Close()
	awaitExit(t, "CMD", child)
	awaitExit(t, "a setsid daemon whose parent is CMD", daemon1)
	awaitExit(t, "a double-forked setsid daemon", daemon2)
	if got := g.report(t); got != "exited 137 "+whyExecGone {
		t.Fatalf("guard's report %q, want \"exited 137 %s\"", got, whyExecGone)
	}
}

// TestExecWhoseGuardDiesKillsCMDsGroupAndExits125: if the guard alone is
// SIGKILLed, CMD dies with it (PR_SET_PDEATHSIG), exec sends the rest of
// CMD's group SIGKILL itself, and exits 125 (guard_died).
func TestExecWhoseGuardDiesKillsCMDsGroupAndExits125(t *testing.T) {
	_, _ = fakeCluster(t)
	dir := t.TempDir()
	pidFile, ppidFile, gpidFile := filepath.Join(dir, "pid"), filepath.Join(dir, "ppid"), filepath.Join(dir, "gpid")
	out, errOut := newOutput(t), newOutput(t)
	c := newCLI(out, errOut)
	// The guard is killed once exec knows CMD's pid from it: a guard
	// killed before it could report the start leaves CMD's children out
	// of exec's reach (DESIGN.md, "exec's guard").
	known := make(chan int, 1)
	c.guardStarted = func(pid int) { known <- pid }
	rl := background(t, c, "exec", "--ttl", "5s", "--lock-delay", "5s", "--kill-grace", "1s", "jobs/guarded", "--", "sh", "-c",
		`echo $$ > "$3.tmp" && mv "$3.tmp" "$3"; echo $PPID > "$2.tmp" && mv "$2.tmp" "$2"; `+groupScript, "sh", gpidFile, ppidFile, pidFile)
	child, grandchild := exitOf(t, awaitPID(t, pidFile)), exitOf(t, awaitPID(t, gpidFile))
	guard := awaitPID(t, ppidFile)
	select {
	case <-known:
	case <-time.After(time.Minute):
		t.Fatal("exec never learnt CMD's pid from its guard")
	}
	if err := syscall.Kill(guard, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	awaitExit(t, "CMD of a SIGKILLed guard", child)
	awaitExit(t, "CMD's grandchild, after its guard died", grandchild)
	code := rl.wait(t, "exec whose guard died")
	const want = "raftlock: guard_died: exec: CMD's guard died before CMD ended; CMD's process group was sent SIGKILL\n"
	if code != exitNoLock || errOut.String() != want {
		t.Fatalf("exec whose guard died: exit %d, %q; want %d, %q", code, errOut.String(), exitNoLock, want)
	}
}
