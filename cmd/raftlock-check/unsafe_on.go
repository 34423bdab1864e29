//go:build raftlock_faults

package main

import (
	"flag"
	"fmt"

	"github.com/raftlock/raftlock/session"
)

// The deliberate bugs of the checker's own processes, for its "can it
// fail" tests (broken_run_test.go). They exist only in a checker built
// with -tags raftlock_faults.
const (
	// unsafeTrustLateGrant: the Go client trusts a grant however late its
	// answer came (session.UnsafeTrustLateGrants).
	unsafeTrustLateGrant = "trust-late-grant"
	// unsafeNoTenure: the in-memory resource's fence applies the mode
	// rules alone, without the tenure rule (noTenureFence).
	unsafeNoTenure = "no-tenure"
)

// addUnsafeFlags adds --unsafe-client and --unsafe-resource-fence.
func addUnsafeFlags(fs *flag.FlagSet, cfg *Config) {
	fs.StringVar(&cfg.UnsafeClient, "unsafe-client", "", "TESTING THE CHECKER: break the Go client on purpose ("+unsafeTrustLateGrant+": trust a grant however late its answer came)")
	fs.StringVar(&cfg.UnsafeResourceFence, "unsafe-resource-fence", "", "TESTING THE CHECKER: break the in-memory resource's fence on purpose ("+unsafeNoTenure+": no tenure rule, a stale sequencer of another kind or permits is admitted)")
}

// checkUnsafe refuses unknown names.
func checkUnsafe(c Config) error {
	if _, err := unsafeSessionOptions(c.UnsafeClient); err != nil {
		return err
	}
	if c.UnsafeResourceFence != "" {
		if _, err := newUnsafeFence(c.UnsafeResourceFence); err != nil {
			return err
		}
		if c.ResourcePostgres != "" {
			return fmt.Errorf("--unsafe-resource-fence: the in-memory resource's, not with --resource-postgres")
		}
	}
	return nil
}

// unsafeSessionOptions are the session options of the Go client's bug
// name ("" none).
func unsafeSessionOptions(name string) ([]session.Option, error) {
	switch name {
	case "":
		return nil, nil
	case unsafeTrustLateGrant:
		return []session.Option{session.UnsafeTrustLateGrants()}, nil
	}
	return nil, fmt.Errorf("--unsafe-client %q: want %s", name, unsafeTrustLateGrant)
}

// newUnsafeFence returns the broken fence name names.
func newUnsafeFence(name string) (stringFence, error) {
	if name != unsafeNoTenure {
		return nil, fmt.Errorf("--unsafe-resource-fence %q: want %s", name, unsafeNoTenure)
	}
	return newNoTenureFence(), nil
}
