package fenceproxy

import (
	"fmt"
	"strings"

	"github.com/raftlock/raftlock/sequencer"
)

// LockSet is the set of lock names a proxy guards: some names, and every
// name that starts with one of some prefixes. The zero value guards none.
type LockSet struct {
	names    map[string]bool
	prefixes []string
}

// NewLockSet returns the set of names and of the names starting with a
// prefix. Every name must be a valid lock name, every prefix non-empty.
func NewLockSet(names, prefixes []string) (*LockSet, error) {
	ls := &LockSet{names: make(map[string]bool, len(names))}
	for _, n := range names {
		if err := sequencer.CheckName(n); err != nil {
			return nil, fmt.Errorf("fence proxy: guarded lock %q: %w", n, err)
		}
		ls.names[n] = true
	}
	for _, p := range prefixes {
		if err := sequencer.CheckText("lock prefix", p, 1, sequencer.MaxNameBytes); err != nil {
			return nil, fmt.Errorf("fence proxy: guarded prefix %q: %w", p, err)
		}
		ls.prefixes = append(ls.prefixes, p)
	}
	return ls, nil
}

// Guards reports whether name is in the set.
func (ls *LockSet) Guards(name string) bool {
	if ls.names[name] {
		return true
	}
	for _, p := range ls.prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// Bounded reports whether the set is a finite list of names (no prefix),
// and how many.
func (ls *LockSet) Bounded() (int, bool) {
	return len(ls.names), len(ls.prefixes) == 0
}
