package main

import (
	"context"
	"flag"

	"github.com/raftlock/raftlock/cmd/internal/buildinfo"
)

// version runs "raftlock version" (also "raftlock --version").
func (c *cli) version(*flag.FlagSet) runFunc {
	return func(context.Context, []string) error { return c.printf("%s", versionText()) }
}

// versionText is what "raftlock version" prints (buildinfo.Text).
func versionText() string { return buildinfo.Text("raftlock") }
