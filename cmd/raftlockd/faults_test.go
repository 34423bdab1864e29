//go:build !raftlock_faults

package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestDefaultBuildHasNoUnsafeFault pins that the fault switches of the
// checker's "can it fail" runs are not in the default build: --unsafe-fault
// is an unknown flag there.
func TestDefaultBuildHasNoUnsafeFault(t *testing.T) {
	var stderr bytes.Buffer
	if code := run([]string{"--dev", "--unsafe-fault", "skip-lock-delay"}, &stderr); code != 2 {
		t.Fatalf("run(--unsafe-fault) = %d, want 2 (stderr %q)", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "flag provided but not defined: -unsafe-fault") {
		t.Fatalf("stderr %q, want the unknown flag named", stderr.String())
	}
}
