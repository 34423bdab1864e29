package proccluster

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// recordingTB is a testing.TB whose Errorf records the failure in place
// of failing the test: the test of the harness reads what it reported.
type recordingTB struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recordingTB) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.errs) > 0 || r.TB.Failed()
}

func (r *recordingTB) reported() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errs...)
}

// A node that does not answer GET /v1/health within the start bound (here
// every node of a new cluster whose --peers name a fourth peer that never
// answers, so that none bootstraps) fails the test with a message naming
// the file that holds its log and its goroutines, printed on SIGQUIT:
// the stack says where it waits.
func TestNodeHungAtStartFailsTheTestNamingItsGoroutineDump(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs raftlockd")
	}
	t.Setenv(ArtifactsEnv, t.TempDir())
	bin := BuildDaemon(t)
	rec := &recordingTB{TB: t}
	var raft, peers []string
	for i := 1; i <= 4; i++ {
		raft = append(raft, FreeAddr(t))
		peers = append(peers, fmt.Sprintf("n%d=%s", i, raft[i-1]))
	}
	// These flags come after the harness's own, and win.
	startBounded(rec, bin, 3, "", nil, func(i int) []string {
		return []string{"--raft-addr", raft[i], "--peers", strings.Join(peers, ",")}
	}, 3*time.Second)
	deadline := time.Now().Add(time.Minute)
	for len(rec.reported()) < 3 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond) // polling the watchdogs of other processes
	}
	errs := rec.reported()
	if len(errs) != 3 {
		t.Fatalf("the harness reported %d failures, want one per node: %q", len(errs), errs)
	}
	file := regexp.MustCompile(`hung at start; its goroutines \(SIGQUIT\) and its log are in (\S+)$`)
	for _, e := range errs {
		m := file.FindStringSubmatch(e)
		if m == nil {
			t.Fatalf("failure %q does not name the file with the node's goroutines", e)
		}
		data, err := os.ReadFile(m[1])
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), "goroutine ") || !strings.Contains(string(data), "(*Node).probePeers") {
			t.Fatalf("%s does not hold the goroutines, waiting in the bootstrap probe:\n%s", m[1], data)
		}
	}
}
