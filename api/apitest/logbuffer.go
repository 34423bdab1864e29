package apitest

import (
	"bytes"
	"strings"
	"sync"
)

// LogBuffer collects log output for a test: safe for concurrent writers
// (every node of a cluster, every handler) and readers. The zero value is
// ready to use.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Lines returns the non-empty lines written so far.
func (b *LogBuffer) Lines() []string {
	return strings.FieldsFunc(b.String(), func(r rune) bool { return r == '\n' })
}
