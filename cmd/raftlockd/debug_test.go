package main

import (
	"io"
	"net/http"
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
