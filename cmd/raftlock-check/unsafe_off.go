//go:build !raftlock_faults

package main

import (
	"errors"
	"flag"

	"github.com/raftlock/raftlock/session"
)

// errNoUnsafe: the default build has no deliberate bugs of its own.
var errNoUnsafe = errors.New("--unsafe-client and --unsafe-resource-fence exist only in a checker built with -tags raftlock_faults")

// addUnsafeFlags adds nothing: --unsafe-client and --unsafe-resource-fence
// exist only in a build with -tags raftlock_faults (unsafe_on.go).
func addUnsafeFlags(*flag.FlagSet, *Config) {}

// checkUnsafe refuses a Config that asks for a deliberate bug of the
// checker's own processes.
func checkUnsafe(c Config) error {
	if c.UnsafeClient != "" || c.UnsafeResourceFence != "" {
		return errNoUnsafe
	}
	return nil
}

// unsafeSessionOptions: none in the default build; a client asked for one
// (a client process of another build than its checker's) refuses to run.
func unsafeSessionOptions(name string) ([]session.Option, error) {
	if name != "" {
		return nil, errNoUnsafe
	}
	return nil, nil
}

// newUnsafeFence: none in the default build.
func newUnsafeFence(string) (stringFence, error) { return nil, errNoUnsafe }
