package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestParsePeers(t *testing.T) {
	peers, err := parsePeers("n1=127.0.0.1:7101, n2=127.0.0.1:7102,n3=127.0.0.1:7103")
	if err != nil || len(peers) != 3 || peers[1].ID != "n2" || peers[1].RaftAddr != "127.0.0.1:7102" {
		t.Fatalf("parsePeers = %+v, %v", peers, err)
	}
	for _, bad := range []string{"n1", "=127.0.0.1:1", "n1=", "n1=nohostport", "n1=127.0.0.1:1,n1=127.0.0.1:2"} {
		if _, err := parsePeers(bad); err == nil {
			t.Errorf("parsePeers(%q) accepted", bad)
		}
	}
}

// Bad flags exit 2 with a message naming the problem, before touching disk.
func TestRunRejectsBadFlags(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--id", "n1"}, "required"},
		{[]string{"--log-level", "loud", "--dev"}, "--log-level"},
		{[]string{"--dev", "extra"}, "unexpected arguments"},
		{[]string{"--id", "n1", "--data-dir", dir, "--raft-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--peers", "n1"}, "--peers"},
		{[]string{"--bogus"}, "bogus"},
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

// A node whose data dir is empty and whose peers do not include it refuses
// to start.
func TestRunRefusesPeersWithoutSelf(t *testing.T) {
	var stderr bytes.Buffer
	code := run([]string{"--id", "n9", "--data-dir", t.TempDir(), "--raft-addr", "127.0.0.1:0",
		"--http-addr", "127.0.0.1:0", "--peers", "n1=127.0.0.1:7101"}, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "do not include") {
		t.Fatalf("run = %d, stderr %q", code, stderr.String())
	}
}
