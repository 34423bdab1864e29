package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Result is the outcome of one scenario run. Metrics holds the
// scenario-specific figures by name (see the Metric* constants); a figure
// that could not be measured is absent.
type Result struct {
	System   string  `json:"system"`
	Scenario string  `json:"scenario"`
	Clients  int     `json:"clients"`
	Seconds  float64 `json:"seconds"`
	// Ops counts the operations of Rate: pairs (a, d), handoffs (b),
	// session opens (c).
	Ops   int64   `json:"ops"`
	Rate  float64 `json:"rate"`
	Unit  string  `json:"unit"`
	P50ms float64 `json:"p50_ms"`
	P99ms float64 `json:"p99_ms"`
	// Errors counts failed operations (retried by the driver).
	Errors  int64              `json:"errors"`
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// FailoverMs lists the kill-to-next-grant times of (d), one per round.
	FailoverMs []float64 `json:"failover_ms,omitempty"`
	// NewLeaderMs lists, per round of (d), the time from the kill until the
	// cluster first named a leader of a later term (polled every ~10 ms).
	NewLeaderMs []float64 `json:"new_leader_ms,omitempty"`
	Label       string    `json:"label,omitempty"`
	// Notes are warnings about the run (machine saturated, leader changed).
	Notes []string `json:"notes,omitempty"`
}

// Names of Result.Metrics.
const (
	MetricLeaderCPU       = "leader_cpu_pct"   // leader process, % of one core
	MetricServersCPU      = "servers_cpu_pct"  // all --pids processes, % of one core
	MetricClientCPU       = "client_cpu_pct"   // this benchmark process, % of one core
	MetricMachineBusy     = "machine_busy_pct" // whole machine, % of all cores
	MetricSessions        = "sessions"
	MetricHeldLocks       = "held_locks"
	MetricSpurious        = "spurious_expiries" // server expired a session the client kept alive
	MetricLapsed          = "lapsed"            // the client itself let a lease lapse (client overloaded)
	MetricLateKeepAlives  = "late_keepalives"   // sent more than a second after due
	MetricKeepAlivesPerS  = "keepalives_per_s"
	MetricKeepAliveP99ms  = "keepalive_p99_ms"
	MetricBytesPerSession = "bytes_per_session" // leader RSS delta / sessions
	MetricBytesPerLock    = "bytes_per_lock"    // leader RSS delta / held locks
	MetricLeaderRSSMB     = "leader_rss_mb"
	MetricFailoverMeanMs  = "failover_mean_ms"
	MetricFailoverP50Ms   = "failover_p50_ms"
	MetricFailoverMaxMs   = "failover_max_ms"
	MetricNewLeaderMeanMs = "new_leader_mean_ms" // kill to a leader of a later term named
)

// metricOrder is the order of metrics in the text line.
var metricOrder = []string{
	MetricSessions, MetricHeldLocks, MetricSpurious, MetricLapsed, MetricLateKeepAlives,
	MetricSessionTimeS, MetricSpuriousInWindow, MetricLapsedInWindow,
	MetricRefusedAtLeaseEnd, MetricRefusedAtLeaseEndInWindow, MetricKeepAlivesPerS, MetricKeepAliveP50ms, MetricKeepAliveP99ms,
	MetricBytesPerSession, MetricBytesPerLock, MetricLeaderRSSMB, MetricLeaderCores, MetricLeaderCPUPerSession,
	MetricFailoverMeanMs, MetricFailoverP50Ms, MetricFailoverMaxMs, MetricNewLeaderMeanMs,
	MetricLeaderCPU, MetricServersCPU, MetricClientCPU, MetricMachineBusy,
	MetricClientCPUPerOp, MetricServersCPUPerOp, MetricLeaderIdleCores, MetricLeaderCPUPerKeepAlive,
}

// SetMetric records a figure.
func (r *Result) SetMetric(name string, v float64) {
	if r.Metrics == nil {
		r.Metrics = map[string]float64{}
	}
	r.Metrics[name] = v
}

// Line formats the result as one aligned line of text.
func (r *Result) Line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-8s %-11s clients %-5d %9.1f %-10s p50 %8.2fms p99 %8.2fms  n %-8d err %-4d",
		r.System, r.Scenario, r.Clients, r.Rate, r.Unit, r.P50ms, r.P99ms, r.Ops, r.Errors)
	for _, k := range metricOrder {
		if v, ok := r.Metrics[k]; ok {
			fmt.Fprintf(&b, " %s=%s", k, formatMetric(v))
		}
	}
	if len(r.FailoverMs) > 0 {
		parts := make([]string, len(r.FailoverMs))
		for i, f := range r.FailoverMs {
			parts[i] = fmt.Sprintf("%.0f", f)
		}
		fmt.Fprintf(&b, " failovers_ms=%s", strings.Join(parts, ","))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, " [%s]", n)
	}
	return b.String()
}

func formatMetric(v float64) string {
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d", int64(v))
	}
	return fmt.Sprintf("%.1f", v)
}

// Print writes the result: the text line to stdout, or with asJSON a JSON
// line to stdout and the text line to stderr.
func (r *Result) Print(stdout, stderr io.Writer, asJSON bool) error {
	if !asJSON {
		_, err := fmt.Fprintln(stdout, r.Line())
		return err
	}
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	if _, err := fmt.Fprintln(stderr, r.Line()); err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, string(data))
	return err
}
