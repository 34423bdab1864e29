//go:build !raftlock_faults

package main

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// TestDefaultBuildHasNoUnsafeSwitches pins that the checker's own broken
// modes exist only with -tags raftlock_faults: the default build has no
// --unsafe-client or --unsafe-resource-fence flag, refuses a Config that
// asks for either, and its client process refuses an unsafe client.
func TestDefaultBuildHasNoUnsafeSwitches(t *testing.T) {
	for _, flag := range []string{"--unsafe-client", "--unsafe-resource-fence"} {
		_, err := parseFlags([]string{flag, "x"}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "flag provided but not defined") {
			t.Errorf("parseFlags(%s): %v, want an unknown flag", flag, err)
		}
	}
	for _, cfg := range []Config{{UnsafeClient: "trust-late-grant"}, {UnsafeResourceFence: "no-tenure"}} {
		c := defaultConfig()
		c.UnsafeClient, c.UnsafeResourceFence = cfg.UnsafeClient, cfg.UnsafeResourceFence
		if err := c.validate(); !errors.Is(err, errNoUnsafe) {
			t.Errorf("validate(%+v): %v, want errNoUnsafe", cfg, err)
		}
	}
	if _, err := unsafeSessionOptions("trust-late-grant"); !errors.Is(err, errNoUnsafe) {
		t.Errorf("unsafeSessionOptions: %v, want errNoUnsafe", err)
	}
}
