//go:build raftlock_faults

package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/raftlock/raftlock/node"
	"github.com/raftlock/raftlock/transport/httpapi"
)

// addFaultFlags adds --unsafe-fault, which exists only in a build with
// -tags raftlock_faults (the fault checker's "can it fail" runs).
func addFaultFlags(fs *flag.FlagSet, f *node.Faults) {
	fs.Func("unsafe-fault", "TESTING ONLY: break a guarantee on purpose (skip-lock-delay, local-reads, revoke-without-notice, semaphore-extra-slot, watch-drops-changes, revoke-slot-early; comma-separated)", func(v string) error {
		for _, name := range strings.Split(v, ",") {
			switch strings.TrimSpace(name) {
			case "skip-lock-delay":
				f.SkipLockDelay = true
			case "local-reads":
				f.LocalReads = true
			case "revoke-without-notice":
				f.RevokeWithoutNotice = true
			case "semaphore-extra-slot":
				f.ExtraSlot = true
			case "watch-drops-changes":
				f.WatchDropsChanges = true
			case "revoke-slot-early":
				f.RevokeSlotEarly = true
			default:
				return fmt.Errorf("unknown fault %q (want skip-lock-delay, local-reads, revoke-without-notice, semaphore-extra-slot, watch-drops-changes or revoke-slot-early)", name)
			}
		}
		return nil
	})
}

// faultServerOptions are the HTTP server's options for the enabled faults.
func faultServerOptions(f node.Faults) []httpapi.ServerOption {
	if f.LocalReads {
		return []httpapi.ServerOption{httpapi.WithUnsafeLocalReads()}
	}
	return nil
}
