package bench

import (
	"testing"
	"time"
)

// The window's keepalive latencies are the samples added after it began,
// not those of the opens before it.
func TestLatenciesFromKeepsOnlyTheWindowsSamples(t *testing.T) {
	var l Latencies
	l.Add(time.Second) // before the window
	for i := 1; i <= 100; i++ {
		l.Add(time.Duration(i) * time.Millisecond)
	}
	w := l.From(1)
	if w.Len() != 100 {
		t.Fatalf("window has %d samples, want 100", w.Len())
	}
	if p := w.Percentiles(0.99); p[0] != 99*time.Millisecond {
		t.Fatalf("window p99 = %v, want 99ms (the earlier 1s sample left out)", p[0])
	}
	if l.From(500).Len() != 0 || l.From(-1).Len() != 101 {
		t.Fatal("From out of range")
	}
}

// The sessions report gives the leader's CPU in cores and per session
// (µs of CPU per session per second), and the window's p50/p99.
func TestSessionsReportGivesCPUPerSession(t *testing.T) {
	var r Result
	r.SetMetric(MetricLeaderCPU, 50) // half a core
	var l Latencies
	for i := 1; i <= 100; i++ {
		l.Add(time.Duration(i) * time.Millisecond)
	}
	reportKeepAlives(&r, 100_000, 60*time.Second, &l)
	want := map[string]float64{MetricSessionTimeS: 60, MetricLeaderCores: 0.5, MetricLeaderCPUPerSession: 5,
		MetricKeepAliveP50ms: 50, MetricKeepAliveP99ms: 99}
	for k, v := range want {
		if r.Metrics[k] != v {
			t.Errorf("%s = %v, want %v", k, r.Metrics[k], v)
		}
	}
}
