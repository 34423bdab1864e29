//go:build !raftlock_faults

package main

import (
	"flag"
	"io"
	"time"
)

// execUnsafe holds exec's switches that break its promise on purpose:
// none in the default build (build with -tags raftlock_faults for
// --unsafe-no-guard, exec_unsafe_on.go).
type execUnsafe struct{}

// addFlags adds nothing in the default build.
func (*execUnsafe) addFlags(*flag.FlagSet) {}

// startGuard starts CMD under its guard (exec_guard.go).
func (*execUnsafe) startGuard(argv, env []string, stdin io.Reader, stdout, stderr io.Writer, deadline time.Time) (*guardConn, error) {
	return startGuard(argv, env, stdin, stdout, stderr, deadline)
}
