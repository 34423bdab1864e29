package buildinfo

import (
	"runtime/debug"
	"testing"
)

// The version given at build time wins; else the module's; else
// 0.0.0-dev. The commit comes from the toolchain's VCS stamp.
func TestVersionIsSetAtBuildTimeElseModuleElseDev(t *testing.T) {
	stamped := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.time", Value: "2026-01-02T15:04:05Z"}, {Key: "vcs.modified", Value: "true"}}}
	for _, c := range []struct {
		name, set string
		bi        *debug.BuildInfo
		want      string
	}{
		{"linker", "0.1.0", stamped, "raftlockd 0.1.0\ncommit: 0123abcd+dirty (2026-01-02T15:04:05Z)\ngo: go1.26.8\n"},
		{"module", "", stamped, "raftlockd 1.2.3\ncommit: 0123abcd+dirty (2026-01-02T15:04:05Z)\ngo: go1.26.8\n"},
		{"work tree", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, "raftlockd 0.0.0-dev\ncommit: unknown\ngo: go1.26.8\n"},
		{"nothing", "", &debug.BuildInfo{GoVersion: "go1.26.8"}, "raftlockd 0.0.0-dev\ncommit: unknown\ngo: go1.26.8\n"},
	} {
		if got := Format("raftlockd", c.set, c.bi); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
