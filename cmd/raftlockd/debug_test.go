package main

import (
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// TestDebugServesPprof: --debug-addr serves the profiling index on its own
// listener.
func TestDebugServesPprof(t *testing.T) {
	srv, addr, err := startDebug("127.0.0.1:0", hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	resp, err := http.Get("http://" + addr + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine") {
		t.Fatalf("GET /debug/pprof/: %d %.200s", resp.StatusCode, body)
	}
	if _, _, err := startDebug("127.0.0.1:-1", hclog.NewNullLogger()); err == nil {
		t.Fatal("a bad --debug-addr was accepted")
	}
}

// TestDebugAddrIsLoopbackOnlyAndHidesTheCommandLine pins issue 27 item 9:
// a non-loopback --debug-addr is refused unless --debug-allow-remote, and
// /debug/pprof/cmdline (which showed --join-token's secret) is not served.
func TestDebugAddrIsLoopbackOnlyAndHidesTheCommandLine(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:6060", ":6060", "10.1.2.3:6060"} {
		if _, err := parse([]string{"--dev", "--debug-addr", addr}, io.Discard); err == nil || !strings.Contains(err.Error(), "--debug-allow-remote") {
			t.Errorf("--debug-addr %s: %v, want a refusal naming --debug-allow-remote", addr, err)
		}
		if _, err := parse([]string{"--dev", "--debug-addr", addr, "--debug-allow-remote"}, io.Discard); err != nil {
			t.Errorf("--debug-addr %s --debug-allow-remote: %v", addr, err)
		}
	}
	if _, err := parse([]string{"--dev", "--debug-addr", "127.0.0.1:6060"}, io.Discard); err != nil {
		t.Errorf("loopback --debug-addr: %v", err)
	}
	srv, addr, err := startDebug("127.0.0.1:0", hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	resp, err := http.Get("http://" + addr + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusNotFound || strings.Contains(string(body), os.Args[0]) {
		t.Fatalf("GET /debug/pprof/cmdline: %d %.200q, want 404 without the command line", resp.StatusCode, body)
	}
}
