package main

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// version runs "raftlock version" (also "raftlock --version").
func (c *cli) version(*flag.FlagSet) runFunc {
	return func(context.Context, []string) error { return c.printf("%s", versionText()) }
}

// versionText is what "raftlock version" prints, from the build's
// information (runtime/debug.ReadBuildInfo).
func versionText() string {
	bi, _ := debug.ReadBuildInfo()
	return formatVersion(bi)
}

// formatVersion prints the module's version, the VCS commit (with +dirty
// if the tree had uncommitted changes) and time, and the Go version:
//
//	raftlock v1.2.0
//	commit: 0123abcd... (2026-01-02T15:04:05Z)
//	go: go1.26.8
//
// "(devel)" is a build from a work tree; a commit is "unknown" when the
// build recorded none (go run, go test, -buildvcs=false).
func formatVersion(bi *debug.BuildInfo) string {
	version, commit, goVersion := "(devel)", "unknown", runtime.Version()
	var when string
	if bi != nil {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		if bi.GoVersion != "" {
			goVersion = bi.GoVersion
		}
		var rev string
		var dirty bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			case "vcs.time":
				when = s.Value
			}
		}
		if rev != "" {
			commit = rev
			if dirty {
				commit += "+dirty"
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "raftlock %s\ncommit: %s", version, commit)
	if when != "" {
		fmt.Fprintf(&b, " (%s)", when)
	}
	fmt.Fprintf(&b, "\ngo: %s\n", goVersion)
	return b.String()
}
