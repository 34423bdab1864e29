package bench

import "slices"

// From returns the samples added after the first n (those of a window
// that began when Len was n), as a new Latencies.
func (l *Latencies) From(n int) *Latencies {
	l.mu.Lock()
	defer l.mu.Unlock()
	n = max(0, min(n, len(l.d)))
	return &Latencies{d: slices.Clone(l.d[n:])}
}
