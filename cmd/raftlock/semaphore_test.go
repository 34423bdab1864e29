package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// acquire --permits takes slots and says which; lock get and lock list
// show the slots; a mismatch is the cluster's invalid_argument; bad
// permits are a usage error; exec -n runs CMD with its slot and the
// slot's sequencer, and fails to get a slot when all are held.
func TestSemaphoreCommands(t *testing.T) {
	rl := cluster(t)
	_, sid, _ := rl("session", "open")
	sid = strings.TrimSpace(sid)
	for i, want := range []string{"slot: 0 of 2\n", "slot: 1 of 2\n"} {
		code, out, errOut := rl("acquire", "--session", sid, "--permits", "2", "pool")
		if code != 0 || !strings.HasSuffix(out, want) || !strings.Contains(out, "sequencer: rl1:p"+want[6:7]+"/2:") {
			t.Fatalf("acquire %d: %d %q %q", i, code, out, errOut)
		}
	}
	code, out, _ := rl("lock", "get", "pool")
	if code != 0 || !strings.Contains(out, "lock pool: semaphore, 2/2 slots held\n") ||
		!strings.Contains(out, "  slot 0: session ") || !strings.Contains(out, "  slot 1: session ") {
		t.Fatalf("lock get: %d\n%s", code, out)
	}
	if code, out, _ := rl("lock", "list"); code != 0 || !strings.Contains(out, "semaphore 2/2") {
		t.Fatalf("lock list: %d\n%s", code, out)
	}
	if code, _, errOut := rl("acquire", "--session", sid, "--permits", "3", "pool"); code != exitError ||
		!strings.HasPrefix(errOut, "raftlock: invalid_argument: ") || !strings.Contains(errOut, "permits 2") {
		t.Fatalf("acquire with other permits: %d %q", code, errOut)
	}
	for _, args := range [][]string{
		{"acquire", "--session", sid, "--permits", "300", "pool"},
		{"acquire", "--session", sid, "--shared", "--permits", "2", "pool"},
		{"exec", "-n", "300", "pool", "--", "true"},
	} {
		if code, _, errOut := rl(args...); code != 2 || !strings.Contains(errOut, "permits") {
			t.Fatalf("%v: %d %q, want a usage error about permits", args, code, errOut)
		}
	}
	// Every slot held: exec -n tries and cannot get one.
	if code, _, errOut := rl("exec", "--wait", "0s", "-n", "2", "pool", "--", "true"); code != exitNoLock || !strings.Contains(errOut, "lock_busy") {
		t.Fatalf("exec -n on a full semaphore: %d %q", code, errOut)
	}
	envFile := filepath.Join(t.TempDir(), "env")
	if code, _, errOut := rl("exec", "-n", "3", "other", "--", "sh", "-c", `echo "$RAFTLOCK_SLOT $RAFTLOCK_SEQUENCER" > "$0"`, envFile); code != 0 {
		t.Fatalf("exec -n 3: %d %q", code, errOut)
	}
	data, err := os.ReadFile(envFile)
	if err != nil || !strings.HasPrefix(string(data), "0 rl1:p0/3:") || !strings.HasSuffix(string(data), ":other\n") {
		t.Fatalf("CMD saw %q, %v", data, err)
	}
}
