package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/cmd/internal/proccluster"
	"github.com/raftlock/raftlock/node"
)

func TestParsePeers(t *testing.T) {
	peers, err := parsePeers("n1=127.0.0.1:7101, n2=127.0.0.1:7102,n3=127.0.0.1:7103")
	if err != nil || len(peers) != 3 || peers[1].ID != "n2" || peers[1].RaftAddr != "127.0.0.1:7102" {
		t.Fatalf("parsePeers = %+v, %v", peers, err)
	}
	for _, bad := range []string{"n1", "=127.0.0.1:1", "n1=", "n1=nohostport", "n1=127.0.0.1:1,n1=127.0.0.1:2"} {
		if _, err := parsePeers(bad); err == nil {
			t.Errorf("parsePeers(%q) accepted", bad)
		}
	}
}

// Bad flags exit 2 with a message naming the problem, before touching disk.
func TestRunRejectsBadFlags(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--id", "n1"}, "required"},
		{[]string{"--log-level", "loud", "--dev"}, "--log-level"},
		{[]string{"--dev", "extra"}, "unexpected arguments"},
		{[]string{"--id", "n1", "--data-dir", dir, "--raft-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--peers", "n1"}, "--peers"},
		{[]string{"--bogus"}, "bogus"},
	} {
		var stderr bytes.Buffer
		if code := run(tc.args, &stderr); code != 2 {
			t.Errorf("run(%q) = %d, want 2 (stderr %q)", tc.args, code, stderr.String())
		}
		if !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("run(%q): stderr %q does not mention %q", tc.args, stderr.String(), tc.want)
		}
	}
}

// A node whose data dir is empty and whose peers do not include it refuses
// to start.
func TestRunRefusesPeersWithoutSelf(t *testing.T) {
	var stderr bytes.Buffer
	dir := t.TempDir()
	code := run([]string{"--id", "n9", "--data-dir", dir, "--raft-addr", "127.0.0.1:0",
		"--http-addr", "127.0.0.1:0", "--peers", "n1=127.0.0.1:7101"}, &stderr)
	want := "raftlockd: --id n9 is not one of the --peers ids (n1): start every member with the same --peers and an --id from it " +
		"(Kubernetes: the pod name; the StatefulSet's name and replicas must match the --peers list)\n"
	if code != 2 || stderr.String() != want {
		t.Fatalf("run = %d, stderr %q; want 2, %q", code, stderr.String(), want)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the data dir was touched: %v", entries)
	}
}

// A data dir this user cannot write, and a TLS file that is not there,
// each stop the daemon with one line naming the fix, before the data dir
// is touched.
func TestRunRefusesUnwritableDataDirAndMissingTLSFiles(t *testing.T) {
	if os.Geteuid() == 0 {
		// root writes anywhere: run the daemon as nobody (setpriv) on a
		// directory of root's.
		if _, err := exec.LookPath("setpriv"); err != nil {
			t.Log("root without setpriv: the unwritable data dir is not checked")
		} else if !testing.Short() {
			bin := proccluster.BuildDaemon(t)
			if err := os.Chmod(filepath.Dir(bin), 0o755); err != nil {
				t.Fatal(err)
			}
			ro := t.TempDir()
			if err := os.Chmod(ro, 0o755); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", bin,
				"--id", "n1", "--data-dir", ro, "--raft-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
				"--peers", "n1=127.0.0.1:7101").CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "not writable: permission denied: give uid 65534") ||
				strings.Count(string(out), "\n") != 1 {
				t.Errorf("unwritable data dir: %v, %q", err, out)
			}
		}
	} else {
		ro := t.TempDir()
		if err := os.Chmod(ro, 0o500); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(ro, 0o700) })
		var stderr bytes.Buffer
		code := run([]string{"--id", "n1", "--data-dir", filepath.Join(ro, "n1"), "--raft-addr", "127.0.0.1:0",
			"--http-addr", "127.0.0.1:0", "--peers", "n1=127.0.0.1:7101"}, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), "is not writable") || !strings.Contains(stderr.String(), "securityContext.fsGroup") ||
			strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("unwritable data dir: exit %d, %q", code, stderr.String())
		}
	}
	dir := filepath.Join(t.TempDir(), "n1")
	var stderr bytes.Buffer
	code := run([]string{"--id", "n1", "--data-dir", dir, "--raft-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
		"--tls-cert", filepath.Join(t.TempDir(), "node.pem"), "--tls-key", "k.pem", "--tls-ca", "ca.pem"}, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "--tls-cert") || !strings.Contains(stderr.String(), "no such file or directory: give the file") ||
		!strings.Contains(stderr.String(), "TLS Secret") || strings.Count(stderr.String(), "\n") != 1 {
		t.Errorf("missing certificate: exit %d, %q", code, stderr.String())
	}
	if _, err := os.Stat(dir); err == nil {
		t.Error("the data dir was made")
	}
}

// Every duration flag is checked before anything starts: a bad value exits
// 2 with one line naming the flag, the value and the allowed range (or the
// Raft relationship it breaks).
func TestDurationFlagsOutOfRangeAreRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--failover-grace=-10s"}, "raftlockd: --failover-grace -10s out of range [0s, 5m0s]\n"},
		{[]string{"--failover-grace", "-1ns"}, "raftlockd: --failover-grace -1ns out of range [0s, 5m0s]\n"},
		{[]string{"--failover-grace", "5m0.001s"}, "raftlockd: --failover-grace 5m0.001s out of range [0s, 5m0s]\n"},
		{[]string{"--raft-heartbeat-timeout", "0s"}, "raftlockd: --raft-heartbeat-timeout 0s out of range [5ms, 1m0s]\n"},
		{[]string{"--raft-election-timeout", "-1s"}, "raftlockd: --raft-election-timeout -1s out of range [5ms, 1m0s]\n"},
		{[]string{"--raft-leader-lease-timeout", "4ms"}, "raftlockd: --raft-leader-lease-timeout 4ms out of range [5ms, 1m0s]\n"},
		{[]string{"--raft-heartbeat-timeout", "2m", "--raft-election-timeout", "2m"}, "raftlockd: --raft-heartbeat-timeout 2m0s out of range [5ms, 1m0s]\n"},
		{[]string{"--raft-leader-lease-timeout", "600ms"},
			"raftlockd: --raft-leader-lease-timeout 600ms must not exceed --raft-heartbeat-timeout 500ms\n"},
		{[]string{"--raft-election-timeout", "400ms"},
			"raftlockd: --raft-election-timeout 400ms must be at least --raft-heartbeat-timeout 500ms\n"},
	} {
		// --dev with no data dir would create one only after the flags
		// passed; a non-dev command line must fail before touching disk.
		for _, base := range [][]string{{"--dev"}, {"--id", "n1", "--data-dir", filepath.Join(t.TempDir(), "d"),
			"--raft-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"}} {
			args := append(append([]string(nil), base...), tc.args...)
			var stderr bytes.Buffer
			if code := run(args, &stderr); code != 2 {
				t.Errorf("run(%q) = %d, want 2", args, code)
			}
			if stderr.String() != tc.want {
				t.Errorf("run(%q): stderr %q, want exactly %q", args, stderr.String(), tc.want)
			}
			if len(base) > 1 {
				if _, err := os.Stat(base[3]); !os.IsNotExist(err) {
					t.Errorf("run(%q) touched the data dir (%v)", args, err)
				}
			}
		}
	}
}

// A duration the flag package cannot parse is reported once (by the flag
// package, with the usage), not a second time by raftlockd.
func TestUnparsableDurationFlagIsReportedOnce(t *testing.T) {
	var stderr bytes.Buffer
	if code := run([]string{"--dev", "--failover-grace", "soon"}, &stderr); code != 2 {
		t.Fatalf("run = %d, want 2", code)
	}
	if n := strings.Count(stderr.String(), "soon"); n != 1 {
		t.Fatalf("the bad value is reported %d times, want once:\n%s", n, stderr.String())
	}
	if !strings.Contains(stderr.String(), `invalid value "soon" for flag -failover-grace: not a duration: write it like 5s, 500ms or 1m30s`) {
		t.Fatalf("stderr does not name the flag and say what a duration looks like:\n%s", stderr.String())
	}
}

// The bounds themselves are accepted: failover grace 0s and 5m, Raft
// timeouts 5ms and 1m, with the leader lease equal to the heartbeat and the
// election equal to it.
func TestDurationFlagBoundariesAreAccepted(t *testing.T) {
	for _, args := range [][]string{
		{"--failover-grace", "0s"},
		{"--failover-grace", "5m"},
		{"--raft-heartbeat-timeout", "5ms", "--raft-election-timeout", "5ms", "--raft-leader-lease-timeout", "5ms"},
		{"--raft-heartbeat-timeout", "1m", "--raft-election-timeout", "1m", "--raft-leader-lease-timeout", "1m"},
		{"--raft-heartbeat-timeout", "1s", "--raft-election-timeout", "1m", "--raft-leader-lease-timeout", "5ms"},
	} {
		if _, err := parse(append([]string{"--dev"}, args...), io.Discard); err != nil {
			t.Errorf("parse(%q): %v", args, err)
		}
	}
}

// --failover-grace 0s means no extra grace: it reaches the node as
// node.NoFailoverGrace, not as the zero that node.Config reads as the 5s
// default. Other values pass through; the flag's default is the node's.
func TestFailoverGraceZeroReachesNodeAsNone(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{[]string{"--failover-grace", "0s"}, node.NoFailoverGrace},
		{[]string{"--failover-grace=0"}, node.NoFailoverGrace},
		{nil, node.DefaultFailoverGrace},
		{[]string{"--failover-grace", "2s"}, 2 * time.Second},
	} {
		o, err := parse(append([]string{"--dev"}, tc.args...), io.Discard)
		if err != nil {
			t.Fatalf("parse(%q): %v", tc.args, err)
		}
		cfg := nodeConfig(serverSpec{id: "n1"}, o, "127.0.0.1:0", hclog.NewNullLogger())
		if cfg.FailoverGrace != tc.want {
			t.Errorf("%q: node.Config.FailoverGrace = %v, want %v", tc.args, cfg.FailoverGrace, tc.want)
		}
	}
}

// A limit flag below 1 is refused before anything starts (exit 2, one line
// naming the flag); the flags reach the node's config, defaults included.
func TestLimitFlagsBelowOneAreRefusedAndReachTheNode(t *testing.T) {
	for _, tc := range []struct{ flag, want string }{
		{"--max-sessions", "raftlockd: --max-sessions 0 out of range [1, ∞)\n"},
		{"--max-locks", "raftlockd: --max-locks 0 out of range [1, ∞)\n"},
		{"--max-waiters-per-lock", "raftlockd: --max-waiters-per-lock 0 out of range [1, ∞)\n"},
		{"--max-locks-per-session", "raftlockd: --max-locks-per-session 0 out of range [1, ∞)\n"},
		{"--max-sessions-per-token", "raftlockd: --max-sessions-per-token 0 out of range [1, ∞)\n"},
	} {
		var stderr bytes.Buffer
		if code := run([]string{"--dev", tc.flag, "0"}, &stderr); code != 2 || stderr.String() != tc.want {
			t.Errorf("run(--dev %s 0) = %d, stderr %q; want 2, %q", tc.flag, code, stderr.String(), tc.want)
		}
	}
	o, err := parse([]string{"--dev", "--max-locks", "7"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := api.DefaultLimits()
	want.Locks = 7
	if got := nodeConfig(serverSpec{}, o, "", nil).Limits; got != want {
		t.Fatalf("node limits %+v, want %+v", got, want)
	}
}

// ACLs are off unless --acl, which turns them on in the node's Config.
func TestACLFlagTurnsOnNodeACL(t *testing.T) {
	for args, want := range map[string]bool{"--dev": false, "--dev --acl": true} {
		o, err := parse(strings.Fields(args), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if got := nodeConfig(serverSpec{}, o, "", nil).ACL; got != want {
			t.Errorf("%s: Config.ACL = %v, want %v", args, got, want)
		}
	}
}

// raftlockd --version prints the version (0.0.0-dev in a test binary, which
// is given none at build time) and exits 0, starting nothing.
func TestVersionFlagPrintsVersionAndStartsNothing(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := runIO([]string{"--version"}, &stdout, &stderr); code != 0 || stderr.Len() != 0 {
		t.Fatalf("--version: exit %d, stderr %q", code, stderr.String())
	}
	if !strings.HasPrefix(stdout.String(), "raftlockd 0.0.0-dev\ncommit: ") {
		t.Errorf("--version printed %q", stdout.String())
	}
}
