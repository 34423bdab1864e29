//go:build !raftlock_faults

package main

import (
	"flag"

	"github.com/raftlock/raftlock/node"
	"github.com/raftlock/raftlock/transport/httpapi"
)

// addFaultFlags adds nothing: the default build has no --unsafe-fault
// (build with -tags raftlock_faults for it).
func addFaultFlags(*flag.FlagSet, *node.Faults) {}

// faultServerOptions: none in the default build.
func faultServerOptions(node.Faults) []httpapi.ServerOption { return nil }
