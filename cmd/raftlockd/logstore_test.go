package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/cmd/internal/proccluster"
)

func TestLogStoreFlagsOutsideTheirValuesAreRefused(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--dev", "--log-store", "sqlite"}, "--log-store"},
		{[]string{"--data-dir", dir, "--migrate-log-store", "sqlite"}, "--migrate-log-store"},
		{[]string{"--migrate-log-store", "wal"}, "--data-dir"},
		{[]string{"--dev", "--migrate-log-store", "wal"}, "--dev"},
		{[]string{"--data-dir", dir, "--log-store", "boltdb", "--migrate-log-store", "wal"}, "contradicts"},
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

// A follower's data dir made with --log-store boltdb refuses to start
// with --log-store wal (exit 1, naming the fix); raftlockd
// --migrate-log-store wal moves it, and the node then starts (without
// --log-store) on the WAL and agrees with the leader; moved back to
// boltdb, the same.
func TestADataDirKeepsItsLogStoreUntilMigrated(t *testing.T) {
	bin := proccluster.BuildDaemon(t)
	c := proccluster.Start(t, bin, 3, "--log-store", "boltdb")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ld, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f := (ld + 1) % 3
	dir := c.Flag(f, "--data-dir")
	cl := c.Client()
	s, err := cl.OpenSession(ctx, api.OpenRequest{Name: "ls", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	work := func(name string) {
		t.Helper()
		if _, err := cl.Acquire(ctx, api.AcquireRequest{Name: name, Session: s.ID, Holder: "h"}); err != nil {
			t.Fatal(err)
		}
	}
	work("ls/1")
	base := c.Args(f)
	withStore := func(store string) []string {
		var out []string
		for i := 0; i < len(base); i++ {
			if base[i] == "--log-store" {
				i++
				continue
			}
			out = append(out, base[i])
		}
		if store != "" {
			out = append(out, "--log-store", store)
		}
		return out
	}
	stop := func() {
		t.Helper()
		if code, err := c.Stop(f, 30*time.Second); err != nil || code != 0 {
			t.Fatalf("stop: exit %d, %v", code, err)
		}
	}
	migrate := func(to string) {
		t.Helper()
		// To wal with raftlockd migrate-log-store, back to boltdb with
		// its deprecated spelling, which still works.
		args := []string{"migrate-log-store", "--data-dir", dir, "--to", to}
		if to == "boltdb" {
			args = []string{"--data-dir", dir, "--migrate-log-store", to}
		}
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "moved from") {
			t.Fatalf("--migrate-log-store %s: %v\n%s", to, err, out)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "log-store")); err != nil || strings.TrimSpace(string(b)) != to {
			t.Fatalf("log-store after the migration: %q, %v", b, err)
		}
	}
	startAgrees := func(what string) {
		t.Helper()
		c.SetArgs(f, withStore(""))
		c.Restart(f)
		work("ls/" + what)
		if err := sameDigest(ctx, c, ld, f); err != nil {
			t.Fatalf("%s: %v\n%s", what, err, c.Nodes[f].Log())
		}
		if cd, exited := c.Exited(f); exited {
			t.Fatalf("%s: the node exited %d:\n%s", what, cd, c.Nodes[f].Log())
		}
	}

	stop()
	from := len(c.Nodes[f].Log())
	c.SetArgs(f, withStore("wal"))
	c.Restart(f)
	code, err := c.Wait(f, time.Minute)
	if err != nil || code != 1 {
		t.Fatalf("start with --log-store wal on a boltdb data dir: exit %d, %v; want 1\n%s", code, err, c.Nodes[f].Log())
	}
	log := c.Nodes[f].Log()[from:]
	for _, want := range []string{"holds a boltdb log store", "--log-store boltdb", "--migrate-log-store wal"} {
		if !strings.Contains(log, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, log)
		}
	}
	migrate("wal")
	startAgrees("on-wal")
	if _, err := os.Stat(filepath.Join(dir, "wal")); err != nil {
		t.Fatalf("no wal/ after the migration: %v", err)
	}
	stop()
	migrate("boltdb")
	startAgrees("on-boltdb")
	if _, err := os.Stat(filepath.Join(dir, "wal")); !os.IsNotExist(err) {
		t.Fatalf("wal/ is left after the migration back: %v", err)
	}
}
