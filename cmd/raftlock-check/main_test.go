package main

import (
	"os"
	"strings"
	"testing"
)

// clientEnv makes the test binary run as a client process: the checker's
// integration tests start their clients from this binary.
const clientEnv = "RAFTLOCK_CHECK_TEST_CLIENT=1"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == execWriterCommand {
		os.Exit(execWriterMain(os.Stderr)) // an exec holder's CMD (exec_writer.go)
	}
	if k, v, _ := strings.Cut(clientEnv, "="); os.Getenv(k) == v {
		os.Exit(clientMain(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// testWriter writes progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
