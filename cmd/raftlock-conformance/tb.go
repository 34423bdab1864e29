package main

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
)

// runTB is the testing.TB that proccluster needs, for a program: its temp
// dirs live under one directory removed at the end, cleanups run at the
// end, and Fatal ends the calling goroutine after recording the failure
// (the suite runs each use of proccluster on a goroutine of its own and
// reports the failure). Methods proccluster does not call are the embedded
// nil TB's, and panic.
type runTB struct {
	testing.TB
	dir string

	mu       sync.Mutex
	cleanups []func()
	failed   bool
	log      []string
	n        int
}

func newRunTB() (*runTB, error) {
	dir, err := os.MkdirTemp("", "raftlock-conformance-*")
	if err != nil {
		return nil, err
	}
	return &runTB{dir: dir}, nil
}

func (t *runTB) Helper()          {}
func (t *runTB) Name() string     { return "raftlock-conformance" }
func (t *runTB) Cleanup(f func()) { t.mu.Lock(); t.cleanups = append(t.cleanups, f); t.mu.Unlock() }
func (t *runTB) Failed() bool     { t.mu.Lock(); defer t.mu.Unlock(); return t.failed }
func (t *runTB) Logf(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.log = append(t.log, fmt.Sprintf(format, args...))
}
func (t *runTB) Errorf(format string, args ...any) {
	t.Logf(format, args...)
	t.mu.Lock()
	t.failed = true
	t.mu.Unlock()
}
func (t *runTB) Fatalf(format string, args ...any) { t.Errorf(format, args...); runtime.Goexit() }
func (t *runTB) Fatal(args ...any)                 { t.Fatalf("%s", fmt.Sprint(args...)) }
func (t *runTB) Skipf(format string, args ...any)  { t.Fatalf("skipped: "+format, args...) }

// TempDir returns a new directory under the run's.
func (t *runTB) TempDir() string {
	t.mu.Lock()
	t.n++
	n := t.n
	t.mu.Unlock()
	d := fmt.Sprintf("%s/%03d", t.dir, n)
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

// Messages returns what was logged, failures included.
func (t *runTB) Messages() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.log...)
}

// Finish runs the cleanups, last first, and removes the temp dirs.
func (t *runTB) Finish() {
	t.mu.Lock()
	cs := t.cleanups
	t.cleanups = nil
	t.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
	os.RemoveAll(t.dir)
}

// guard runs f on a goroutine of its own, so that a Fatal in proccluster
// ends only f, and reports whether f returned normally.
func (t *runTB) guard(f func()) (ok bool) {
	done := make(chan bool)
	go func() {
		normal := false
		defer func() { done <- normal }()
		f()
		normal = true
	}()
	return <-done
}
