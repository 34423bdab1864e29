package bench

import (
	"slices"
	"sync"
	"time"
)

// Latencies collects durations from many goroutines. Each goroutine should
// own one Latencies (no locking on the hot path) and the owners are merged
// at the end; Merge and the methods reading all samples lock.
type Latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

// Add records one sample.
func (l *Latencies) Add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// Merge adds every sample of o.
func (l *Latencies) Merge(o *Latencies) {
	o.mu.Lock()
	src := slices.Clone(o.d)
	o.mu.Unlock()
	l.mu.Lock()
	l.d = append(l.d, src...)
	l.mu.Unlock()
}

// Len returns the number of samples.
func (l *Latencies) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.d)
}

// Percentiles returns the p-quantiles (0 < p <= 1) of the samples, by the
// nearest-rank method; zeros when there is no sample.
func (l *Latencies) Percentiles(ps ...float64) []time.Duration {
	l.mu.Lock()
	s := slices.Clone(l.d)
	l.mu.Unlock()
	slices.Sort(s)
	out := make([]time.Duration, len(ps))
	for i, p := range ps {
		out[i] = quantile(s, p)
	}
	return out
}

// quantile returns the nearest-rank p-quantile of sorted s.
func quantile(s []time.Duration, p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	rank := int(p*float64(len(s))+0.999999) - 1
	rank = max(0, min(rank, len(s)-1))
	return s[rank]
}

// ms converts a duration to fractional milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
