package main

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/raftlock/raftlock/cmd/internal/proccluster"
)

// TestMain lets the test binary be the Go worker ("worker" as its first
// argument), as the command's own binary is.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "worker" {
		if err := runGoWorker(context.Background(), os.Stdin, os.Stdout); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	if daemonDir != "" {
		os.RemoveAll(daemonDir)
	}
	os.Exit(code)
}

var (
	daemonOnce sync.Once
	daemonDir  string
	daemonBin  string
)

// daemon builds raftlockd once for the package's tests.
func daemon(t *testing.T) string {
	daemonOnce.Do(func() {
		dir, err := os.MkdirTemp("", "raftlock-conformance-test-*")
		if err != nil {
			t.Fatal(err)
		}
		daemonDir = dir
		tb := &runTB{dir: dir}
		if !tb.guard(func() { daemonBin = proccluster.Build(tb, "github.com/raftlock/raftlock/cmd/raftlockd", "raftlockd") }) {
			t.Fatalf("build raftlockd: %v", tb.Messages())
		}
	})
	if daemonBin == "" {
		t.Fatal("raftlockd was not built")
	}
	return daemonBin
}

// suiteRun runs the suite with args (the Go worker: this test binary) and
// returns its exit code and output.
func suiteRun(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out, errOut strings.Builder
	args = append([]string{"-raftlockd", daemon(t)}, args...)
	args = append(args, "--", os.Args[0], "worker")
	code := run(args, &out, &errOut)
	t.Logf("suite output:\n%s%s", out.String(), errOut.String())
	return code, out.String()
}

// TestReferenceClientPassesTheQuickCases runs the Go worker through the
// quick cases that measure no timing: the reference must pass them. (The
// timing cases run in CI's conformance step, on a machine not shared with
// the other packages' tests.)
func TestReferenceClientPassesTheQuickCases(t *testing.T) {
	code, out := suiteRun(t, "-run", "fence/|errors/|retry/|watch/|election/")
	if code != 0 || !strings.Contains(out, " 0 failed") {
		t.Fatalf("exit code %d, want 0", code)
	}
}

// TestSuiteFailsALateLostClient: a client that closes lost after the lease
// plus lock-delay instead of before fails the lost case.
func TestSuiteFailsALateLostClient(t *testing.T) {
	code, out := suiteRun(t, "-run", "lost/before-grant-ttl-1s-delay-0s", "-runs", "1", "-parallel", "2", "-broken", "late-lost")
	if code != 1 || !strings.Contains(out, "FAIL  lost/before-grant-ttl-1s-delay-0s") {
		t.Fatalf("exit code %d, want 1 with the lost case failed", code)
	}
}

// TestSuiteFailsANewHolderClient: a client that retries a lost acquire
// with a new holder id fails the retry case.
func TestSuiteFailsANewHolderClient(t *testing.T) {
	code, out := suiteRun(t, "-run", "retry/acquire-answer-lost", "-broken", "new-holder")
	if code != 1 || !strings.Contains(out, "FAIL  retry/acquire-answer-lost-same-token") {
		t.Fatalf("exit code %d, want 1 with the retry case failed", code)
	}
}

// TestSuiteFailsAClientIgnoringRevocations: a client that never reports
// a revoked grant lost fails the revocation case.
func TestSuiteFailsAClientIgnoringRevocations(t *testing.T) {
	code, out := suiteRun(t, "-run", "revoke/", "-runs", "1", "-broken", "ignore-revoked")
	if code != 1 || !strings.Contains(out, "FAIL  revoke/holder-told-before-next-grant") {
		t.Fatalf("exit code %d, want 1 with the revocation case failed", code)
	}
}

// TestSuiteFailsALateGrantClient: a client that takes a grant answer as
// held however late it comes fails the late-grant case.
func TestSuiteFailsALateGrantClient(t *testing.T) {
	code, out := suiteRun(t, "-run", "revoke/late-grant", "-broken", "late-grant")
	if code != 1 || !strings.Contains(out, "FAIL  revoke/late-grant-after-revocation") {
		t.Fatalf("exit code %d, want 1 with the late-grant case failed", code)
	}
}

// TestSuiteFailsAClientIgnoringSlotRevocations: a client that never
// reports a semaphore slot's revoked grant lost (a plain lock's it does)
// fails the semaphore revocation case.
func TestSuiteFailsAClientIgnoringSlotRevocations(t *testing.T) {
	code, out := suiteRun(t, "-run", "revoke/(semaphore|holder-told)", "-runs", "1", "-broken", "ignore-slot-revoked")
	if code != 1 || !strings.Contains(out, "FAIL  revoke/semaphore-slot-holder-told-before-next-grant") ||
		!strings.Contains(out, "PASS  revoke/holder-told-before-next-grant") {
		t.Fatalf("exit code %d, want 1 with the semaphore case failed and the plain one passed", code)
	}
}

// TestSuiteFailsAFenceWithoutTheTenureRule: a fence that applies the mode
// and slot rules but not the tenure rule admits an old grant after a later
// tenure's, and fails the tenure case.
func TestSuiteFailsAFenceWithoutTheTenureRule(t *testing.T) {
	code, out := suiteRun(t, "-run", "fence/tenure-change", "-broken", "ignore-tenure")
	if code != 1 || !strings.Contains(out, "FAIL  fence/tenure-change") || !strings.Contains(out, "admitted an earlier tenure's grant") {
		t.Fatalf("exit code %d, want 1 with the tenure case failed on a verdict", code)
	}
}

// TestProxyRecordsRequestsWithoutSessionIDs: the request lines the proxy
// keeps (for the keepalive cadence) never hold a session id.
func TestProxyRecordsRequestsWithoutSessionIDs(t *testing.T) {
	for in, want := range map[string]string{
		"POST /v1/sessions/0123abcd/keepalive HTTP/1.1": "POST /v1/sessions/*/keepalive HTTP/1.1",
		"DELETE /v1/sessions/0123abcd HTTP/1.1":         "DELETE /v1/sessions/* HTTP/1.1",
		"POST /v1/sessions HTTP/1.1":                    "POST /v1/sessions HTTP/1.1",
		"POST /v1/acquire HTTP/1.1":                     "POST /v1/acquire HTTP/1.1",
	} {
		if got := redact(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
}
