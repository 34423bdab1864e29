package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRestoreAndRecoverFlagsAreCheckedBeforeAnythingStarts pins the
// refusals of --restore, --recover, --min-token and the snapshot flags:
// each exits 2 naming the problem, and a --restore needs --min-token, an
// empty data dir and a whole backup file.
func TestRestoreAndRecoverFlagsAreCheckedBeforeAnythingStarts(t *testing.T) {
	dir := t.TempDir()
	used := filepath.Join(dir, "used")
	if err := os.MkdirAll(used, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(used, "raft.db"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(dir, "foreign")
	if err := os.WriteFile(foreign, []byte("not a backup"), 0o600); err != nil {
		t.Fatal(err)
	}
	node := []string{"--id", "n1", "--raft-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--peers", "n1=127.0.0.1:7101"}
	with := func(extra ...string) []string { return append(append([]string(nil), node...), extra...) }
	for _, tc := range []struct {
		args []string
		want string
	}{
		{with("--data-dir", filepath.Join(dir, "a"), "--restore", foreign), "need --min-token"},
		{with("--data-dir", used, "--restore", foreign, "--min-token", "7"), "holds Raft state"},
		{with("--data-dir", filepath.Join(dir, "b"), "--restore", foreign, "--min-token", "7"), "not a valid raftlock backup"},
		{with("--data-dir", filepath.Join(dir, "c"), "--restore", foreign, "--recover", foreign, "--min-token", "7"), "do not go together"},
		{with("--data-dir", filepath.Join(dir, "d"), "--min-token", "7"), "--min-token is for"},
		{with("--data-dir", filepath.Join(dir, "e"), "--min-token", "-1"), "not a token"},
		{[]string{"--dev", "--restore", foreign, "--min-token", "7"}, "not --dev"},
		{with("--data-dir", filepath.Join(dir, "i"), "--restore", foreign, "--min-token", "18446744073709551615"), "above 4611686018427387904"},
		{[]string{"--recover", foreign, "--min-token", "7"}, "need --data-dir"},
		{with("--data-dir", filepath.Join(dir, "f"), "--snapshot-interval", "1ms"), "--snapshot-interval"},
		{with("--data-dir", filepath.Join(dir, "g"), "--snapshot-threshold", "0"), "--snapshot-threshold"},
		{[]string{"--recover", foreign, "--min-token", "7", "--data-dir", filepath.Join(dir, "h")}, "peers file"},
	} {
		var stderr bytes.Buffer
		if code := run(tc.args, &stderr); code != 2 {
			t.Errorf("run(%q) = %d, want 2 (stderr %q)", tc.args, code, stderr.String())
		}
		if !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("run(%q): stderr %q does not mention %q", tc.args, stderr.String(), tc.want)
		}
	}
}
