package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/raftlock/raftlock/cmd/internal/proccluster"
)

// unitExecStart returns deploy/systemd/raftlockd.service's ExecStart= as
// systemd runs it: its continuation lines joined, ${VAR} and $VAR from the
// example environment file (raftlockd.env; $VAR split at spaces), %S as
// /var/lib and %d as the credentials directory.
func unitExecStart(t *testing.T) []string {
	t.Helper()
	dir := filepath.Join(deployRoot(t), "deploy", "systemd")
	unit, err := os.ReadFile(filepath.Join(dir, "raftlockd.service"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	envFile, err := os.ReadFile(filepath.Join(dir, "raftlockd.env"))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(envFile))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("raftlockd.env: %q is not KEY=VALUE", line)
		}
		env[k] = v
	}
	joined := strings.ReplaceAll(string(unit), "\\\n", " ")
	m := regexp.MustCompile(`(?m)^ExecStart=(.*)$`).FindStringSubmatch(joined)
	if m == nil {
		t.Fatal("no ExecStart= in raftlockd.service")
	}
	var args []string
	for _, w := range strings.Fields(m[1]) {
		if strings.HasPrefix(w, "$") && !strings.HasPrefix(w, "${") {
			args = append(args, strings.Fields(env[w[1:]])...)
			continue
		}
		w = regexp.MustCompile(`\$\{([A-Z_]+)\}`).ReplaceAllStringFunc(w, func(ref string) string {
			v, ok := env[ref[2:len(ref)-1]]
			if !ok {
				t.Errorf("ExecStart uses %s, which raftlockd.env does not set", ref)
			}
			return v
		})
		w = strings.ReplaceAll(w, "%S", "/var/lib")
		w = strings.ReplaceAll(w, "%d", "/run/credentials/raftlockd.service")
		args = append(args, w)
	}
	return args
}

// The unit's command line, with the example environment file, is one
// raftlockd accepts; systemd-analyze verify finds nothing to say about the
// unit, and systemd-analyze security rates it "OK" or better (the figure is
// printed). Skipped where systemd-analyze is missing.
func TestSystemdUnitVerifiesAndIsHardened(t *testing.T) {
	args := unitExecStart(t)
	if args[0] != "/usr/local/bin/raftlockd" {
		t.Errorf("ExecStart runs %s", args[0])
	}
	var stderr bytes.Buffer
	o, err := parse(args[1:], &stderr)
	if err != nil {
		t.Fatalf("raftlockd refuses the unit's %q: %v %s", args, err, stderr.String())
	}
	if o.dataDir != "/var/lib/raftlock" || o.metricsAddr == "" || !o.tls() || !o.acl {
		t.Errorf("the unit runs --data-dir %q --metrics-addr %q, TLS %v, ACL %v", o.dataDir, o.metricsAddr, o.tls(), o.acl)
	}
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("no systemd-analyze here")
	}
	if testing.Short() {
		t.Skip("builds raftlockd for systemd-analyze verify")
	}
	// verify checks that ExecStart's binary exists: point it at one.
	unit, _ := os.ReadFile(filepath.Join(deployRoot(t), "deploy", "systemd", "raftlockd.service"))
	path := filepath.Join(t.TempDir(), "raftlockd.service")
	if err := os.WriteFile(path, bytes.ReplaceAll(unit, []byte("/usr/local/bin/raftlockd"), []byte(proccluster.BuildDaemon(t))), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("systemd-analyze", "verify", path).CombinedOutput(); err != nil || len(out) != 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err := exec.Command("systemd-analyze", "security", "--offline=yes", path).CombinedOutput()
	m := regexp.MustCompile(`Overall exposure level for raftlockd.service: ([0-9.]+) (\S+)`).FindSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	level, _ := strconv.ParseFloat(string(m[1]), 64)
	t.Logf("systemd-analyze security: exposure %s %s", m[1], m[2])
	if string(m[2]) != "OK" || level > 2 {
		t.Errorf("systemd-analyze security rates the unit %s %s, want OK at 2.0 or below", m[1], m[2])
	}
}
