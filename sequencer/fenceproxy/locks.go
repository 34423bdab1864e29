package fenceproxy

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/raftlock/raftlock/sequencer"
)

// LockSet is the set of lock names a proxy guards: some names, every name
// that starts with one of some prefixes, and the locks of some request
// paths (routes). The zero value guards none.
type LockSet struct {
	names    map[string]bool
	prefixes []string
	// routes map a path prefix to the one lock whose sequencer a request
	// under it must carry, longest prefix first.
	routes []route
}

type route struct{ path, lock string }

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

// NewRoutes returns the set of the locks of some request paths: a request
// whose path is a key, or lies under it, must carry a sequencer of that
// key's lock (the longest key wins); a request under no key is refused.
// Keys are clean absolute paths ("/stock/42"; "/" is every path).
func NewRoutes(routes map[string]string) (*LockSet, error) {
	if len(routes) == 0 {
		return nil, fmt.Errorf("fence proxy: no routes")
	}
	ls := &LockSet{names: make(map[string]bool)}
	for p, lock := range routes {
		if !strings.HasPrefix(p, "/") || path.Clean(p) != p {
			return nil, fmt.Errorf("fence proxy: route %q: want a clean absolute path, like /stock/42", p)
		}
		if err := sequencer.CheckName(lock); err != nil {
			return nil, fmt.Errorf("fence proxy: route %s: lock %q: %w", p, lock, err)
		}
		ls.names[lock] = true
		ls.routes = append(ls.routes, route{path: p, lock: lock})
	}
	sort.Slice(ls.routes, func(i, j int) bool { return len(ls.routes[i].path) > len(ls.routes[j].path) })
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

// Admits reports whether a request for urlPath may carry a sequencer of
// lock name, and if not, why. With routes, urlPath (decoded) must be clean
// and lie under a route whose lock is name, and rawPath (the request's
// URL.RawPath) must be empty, so that the backend cannot read another path
// into it; without routes, name must be in the set.
func (ls *LockSet) Admits(urlPath, rawPath, name string) (bool, string) {
	if len(ls.routes) == 0 {
		if ls.Guards(name) {
			return true, ""
		}
		return false, fmt.Sprintf("lock %q is not one this proxy guards", name)
	}
	if rawPath != "" || !strings.HasPrefix(urlPath, "/") || (path.Clean(urlPath) != urlPath && path.Clean(urlPath)+"/" != urlPath) {
		return false, fmt.Sprintf("path %q is not clean (no dot segments, doubled or encoded slashes): it is not matched to a lock", urlPath)
	}
	for _, r := range ls.routes {
		if urlPath == r.path || r.path == "/" || strings.HasPrefix(urlPath, r.path+"/") {
			if r.lock == name {
				return true, ""
			}
			return false, fmt.Sprintf("path %q is guarded by lock %q, not %q", urlPath, r.lock, name)
		}
	}
	return false, fmt.Sprintf("path %q is under no route of this proxy", urlPath)
}
