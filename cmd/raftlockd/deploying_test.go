package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// deployingPorts are the fixed ports docs/DEPLOYING.md's blocks use.
var deployingPorts = []int{7001, 7101, 9101}

// TestDeployingGuide runs docs/DEPLOYING.md's marked blocks (the markers of
// README's runner, readme_test.go) in order, in one bash process, in a copy
// of the repository: a release archive and its sums, the Kubernetes
// certificates, the systemd unit's checks, a node's health and metrics
// listener, the alert rules' tests. Then it stops what they left running
// and checks that .gitignore covers what they made. The blocks that need a
// cluster (kubectl, helm) are not marked.
func TestDeployingGuide(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs docs/DEPLOYING.md's commands")
	}
	for _, tool := range []string{"bash", "curl", "git", "go", "tar", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("docs/DEPLOYING.md's commands need %s: %v", tool, err)
		}
	}
	requireFreePorts(t, deployingPorts...)
	text, err := os.ReadFile("../../docs/DEPLOYING.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := parseReadme(string(text))
	if err != nil {
		t.Fatal(strings.ReplaceAll(err.Error(), "README.md", "docs/DEPLOYING.md"))
	}
	if len(blocks) < 5 {
		t.Fatalf("docs/DEPLOYING.md marks %d blocks, want at least 5", len(blocks))
	}
	for _, b := range blocks {
		if b.stopDev {
			t.Fatalf("docs/DEPLOYING.md:%d: stop-dev: the guide runs without a dev cluster", b.line)
		}
	}
	work := filepath.Join(t.TempDir(), "raftlock")
	files := copyRepo(t, repoRoot(t), work)
	start := time.Now()
	// The copy is no git checkout: release.sh takes the archives' date
	// from SOURCE_DATE_EPOCH instead of the commit's.
	run := runDocBlocks(t, work, t.TempDir(), "docs/DEPLOYING.md", blocks, 3*time.Minute,
		readmeEnv("CI_DEV_PGID=0", "TMPDIR="+t.TempDir(), "SOURCE_DATE_EPOCH=1798761600"))
	t.Logf("docs/DEPLOYING.md's blocks ran in %v (pgid %s)", time.Since(start).Round(time.Millisecond), strconv.Itoa(run.cmd.Process.Pid))
	stopGroup(run.cmd.Process.Pid, syscall.SIGTERM, 10*time.Second)
	checkIgnored(t, work, files)
}
