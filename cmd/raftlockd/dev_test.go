package main

import (
	"errors"
	"fmt"
	"net"
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

// devPorts are the fixed ports of raftlockd --dev: HTTP 7001-7003, Raft
// 7101-7103.
var devPorts = []int{7001, 7002, 7003, 7101, 7102, 7103}

// requireFreePorts skips the test unless every port can be listened on at
// 127.0.0.1 (something else, e.g. a developer's own raftlockd --dev, may
// hold them).
func requireFreePorts(t *testing.T, ports ...int) {
	t.Helper()
	for _, p := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Skipf("needs the fixed port 127.0.0.1:%d, which is taken (%v); stop whatever holds it (a raftlockd --dev, or one of README.md's clusters?) to run this test", p, err)
		}
		ln.Close()
	}
}

// devDataDirs lists the raftlock-dev-* directories in tmp.
func devDataDirs(t *testing.T, tmp string) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(tmp, "raftlock-dev-*"))
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// devHealthy reports nil once all three --dev nodes answer /v1/health and
// name a leader.
func devHealthy() error {
	for _, addr := range []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"} {
		var h struct {
			OK     bool
			Leader string
		}
		if err := call(addr, "GET", "/v1/health", nil, &h); err != nil {
			return err
		}
		if !h.OK || h.Leader == "" {
			return fmt.Errorf("%s: no leader yet (%+v)", addr, h)
		}
	}
	return nil
}

// devProc is a raftlockd --dev process.
type devProc struct {
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed when it has exited, then err is set
	err     error
}

// startDev starts bin --dev with TMPDIR=tmp and its output in a file. The
// process is killed when the test ends.
func startDev(t *testing.T, bin, tmp string, args ...string) *devProc {
	t.Helper()
	p := &devProc{logPath: filepath.Join(t.TempDir(), "raftlockd.log"), exited: make(chan struct{})}
	logf, err := os.Create(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	p.cmd = exec.Command(bin, append([]string{"--dev", "--log-level", "warn"}, args...)...)
	p.cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// wait waits up to d for the process to exit and returns its exit error.
func (p *devProc) wait(t *testing.T, d time.Duration, what string) error {
	t.Helper()
	select {
	case <-p.exited:
		return p.err
	case <-time.After(d):
		t.Fatalf("raftlockd --dev did not exit within %v of %s\n%s", d, what, p.log())
		return nil
	}
}

func (p *devProc) log() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// raftlockd --dev removes the temporary data dir it created when it is
// stopped: by Ctrl-C (SIGINT), SIGTERM, or SIGHUP (its terminal closed).
func TestDevRemovesItsDataDirOnExit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs raftlockd --dev")
	}
	requireFreePorts(t, devPorts...)
	bin := proccluster.BuildDaemon(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			tmp := t.TempDir()
			p := startDev(t, bin, tmp)
			proccluster.Eventually(t, 30*time.Second, "dev cluster with a leader", devHealthy)
			dirs := devDataDirs(t, tmp)
			if len(dirs) != 1 {
				t.Fatalf("data dirs in TMPDIR while running: %q, want one raftlock-dev-*", dirs)
			}
			if !strings.Contains(p.log(), dirs[0]) {
				t.Errorf("the start message does not name the data dir %s:\n%s", dirs[0], p.log())
			}
			if _, err := os.Stat(filepath.Join(dirs[0], "n1")); err != nil {
				t.Fatalf("node data dir: %v", err)
			}
			before := len(p.log())
			t0 := time.Now()
			if err := p.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if err := p.wait(t, 30*time.Second, sig.String()); err != nil {
				t.Fatalf("raftlockd --dev after %v: %v\n%s", sig, err, p.log())
			}
			// Quickly and quietly: under a second, and (at --log-level
			// warn) not a line once asked to stop.
			if took := time.Since(t0); took > time.Second {
				t.Errorf("raftlockd --dev took %v to stop after %v", took, sig)
			}
			if after := p.log()[before:]; after != "" {
				t.Errorf("raftlockd --dev logged at WARN or ERROR while stopping after %v:\n%s", sig, after)
			}
			if dirs := devDataDirs(t, tmp); len(dirs) != 0 {
				t.Fatalf("after %v the data dir is still there: %q\n%s", sig, dirs, p.log())
			}
		})
	}
}

// go run ./cmd/raftlockd --dev & ... kill PID: the signal kills go run,
// which does not pass it on; the --dev process, re-parented, stops by
// itself within a second and removes its data dir.
func TestDevStopsWhenItsParentExits(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs raftlockd --dev")
	}
	requireFreePorts(t, devPorts...)
	bin := proccluster.BuildDaemon(t)
	tmp := t.TempDir()
	// sh stands for go run: it starts raftlockd --dev and waits for it.
	parent := exec.Command("sh", "-c", `"$0" --dev --log-level warn & echo $!; wait`, bin)
	parent.Env = append(os.Environ(), "TMPDIR="+tmp)
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Fscan(out, &pid); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	proccluster.Eventually(t, 30*time.Second, "dev cluster with a leader", devHealthy)
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	t0 := time.Now()
	proccluster.Eventually(t, 5*time.Second, "raftlockd --dev gone", func() error {
		// Gone, or a zombie its new parent has not reaped yet.
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err == nil && !strings.Contains(string(st), ") Z ") {
			return fmt.Errorf("pid %d still runs", pid)
		}
		return nil
	})
	if took := time.Since(t0); took > time.Second {
		t.Errorf("raftlockd --dev stopped %v after its parent died", took)
	}
	if dirs := devDataDirs(t, tmp); len(dirs) != 0 {
		t.Errorf("its data dir is still there: %q", dirs)
	}
}

// A --dev run that cannot start (a port taken) exits 1, says which port
// and why, and leaves no data dir behind; with --data-dir the directory is
// the user's and stays.
func TestDevFailedStartRemovesItsDataDir(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs raftlockd --dev")
	}
	requireFreePorts(t, devPorts...)
	bin := proccluster.BuildDaemon(t)
	for _, tc := range []struct {
		name    string
		port    int // held by the test
		dataDir bool
	}{
		{"third node's HTTP port", 7003, false}, // two nodes started, then shut down
		{"first node's Raft port", 7101, false},
		{"with --data-dir", 7003, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := "127.0.0.1:" + strconv.Itoa(tc.port)
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				t.Skipf("%s: %v", addr, err)
			}
			defer ln.Close()
			tmp := t.TempDir()
			var args []string
			userDir := filepath.Join(t.TempDir(), "mine")
			if tc.dataDir {
				args = []string{"--data-dir", userDir}
			}
			p := startDev(t, bin, tmp, args...)
			err = p.wait(t, 30*time.Second, "its start")
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("raftlockd --dev with %s taken: %v, want exit status 1\n%s", addr, err, p.log())
			}
			log := p.log()
			for _, want := range []string{addr, "address already in use", "is another raftlockd --dev running?"} {
				if !strings.Contains(log, want) {
					t.Errorf("stderr does not say %q:\n%s", want, log)
				}
			}
			if dirs := devDataDirs(t, tmp); len(dirs) != 0 {
				t.Errorf("after the failed start the data dir is still there: %q", dirs)
			}
			if tc.dataDir {
				if _, err := os.Stat(userDir); err != nil {
					t.Errorf("--data-dir %s was removed: %v", userDir, err)
				}
			}
		})
	}
}

// A script that starts raftlockd --dev and takes a semaphore slot as soon
// as the cluster names a leader succeeds: the new leader waits for its
// members to record which command versions they read (or answers
// no_leader, which the CLI retries) rather than refusing permits.
func TestDevServesSemaphoresOnceItHasALeader(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs raftlockd --dev")
	}
	requireFreePorts(t, devPorts...)
	bin := proccluster.BuildDaemon(t)
	cli := proccluster.Build(t, "github.com/raftlock/raftlock/cmd/raftlock", "raftlock")
	p := startDev(t, bin, t.TempDir())
	proccluster.Eventually(t, 30*time.Second, "dev cluster with a leader", devHealthy)
	script := `s=$("$0" session open) && "$0" acquire --session "$s" --permits 2 pool`
	out, err := exec.Command("sh", "-c", script, cli).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "slot: 0 of 2") {
		t.Fatalf("session open && acquire --permits 2 right after the leader: %v\n%s\nraftlockd:\n%s", err, out, p.log())
	}
}
