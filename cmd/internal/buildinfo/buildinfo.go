// Package buildinfo is the version both commands print with --version.
//
// A release sets it at build time (scripts/release.sh):
//
//	go build -ldflags "-X github.com/raftlock/raftlock/cmd/internal/buildinfo.version=0.1.0" ./cmd/raftlockd
//
// A plain go build or go run sets nothing: the version is then the
// module's (go install module@v0.1.0) or else DevVersion, and the VCS
// revision recorded by the Go toolchain, if any, says what was built.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// DevVersion is the version of a build that was given none: a build from a
// work tree (go build, go run, go test).
const DevVersion = "0.0.0-dev"

// version is set by the linker (-ldflags -X); empty in any other build.
var version string

// Version is the version this binary was built as: the one given at build
// time, else the module's version, else DevVersion.
func Version() string {
	bi, _ := debug.ReadBuildInfo()
	return resolve(version, bi)
}

// Text is what --version prints for the program name prog, from the
// linker's version and the build's information (runtime/debug):
//
//	raftlockd 0.1.0
//	commit: 0123abcd... (2026-01-02T15:04:05Z)
//	go: go1.26.8
//
// A commit is "unknown" when the build recorded none (go run, go test,
// -buildvcs=false, as releases are built so that they are reproducible);
// "+dirty" marks a work tree with uncommitted changes.
func Text(prog string) string {
	bi, _ := debug.ReadBuildInfo()
	return Format(prog, version, bi)
}

// Format is Text with the linker's version and the build information
// given: set is the -X version ("" if none).
func Format(prog, set string, bi *debug.BuildInfo) string {
	commit, goVersion := "unknown", runtime.Version()
	var when string
	if bi != nil {
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
	fmt.Fprintf(&b, "%s %s\ncommit: %s", prog, resolve(set, bi), commit)
	if when != "" {
		fmt.Fprintf(&b, " (%s)", when)
	}
	fmt.Fprintf(&b, "\ngo: %s\n", goVersion)
	return b.String()
}

// resolve picks the version: set at build time, else the module's
// (without its "v"), else DevVersion. "(devel)" is the toolchain's word for
// a build from a work tree.
func resolve(set string, bi *debug.BuildInfo) string {
	if set != "" {
		return set
	}
	if bi != nil && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return strings.TrimPrefix(bi.Main.Version, "v")
	}
	return DevVersion
}
