package bench

import "time"

// Names of the figures scenario (c) adds for the sessions report (besides
// MetricSessions, MetricSpurious, MetricKeepAlivesPerS,
// MetricKeepAliveP99ms, MetricLeaderRSSMB, MetricBytesPerSession).
const (
	MetricSessionTimeS   = "session_time_s"   // the keepalive window, seconds
	MetricKeepAliveP50ms = "keepalive_p50_ms" // of the window's keepalives
	MetricLeaderCores    = "leader_cpu_cores" // leader CPU in the window, cores
	// MetricSpuriousInWindow and MetricLapsedInWindow count what
	// MetricSpurious and MetricLapsed count (the whole run: opens, window
	// and closes) in the keepalive window alone.
	MetricSpuriousInWindow = "spurious_in_window"
	MetricLapsedInWindow   = "lapsed_in_window"
	// MetricRefusedAtLeaseEnd counts KeepAliveStats.RefusedAtLeaseEnd
	// (whole run), MetricRefusedAtLeaseEndInWindow in the window alone.
	MetricRefusedAtLeaseEnd         = "refused_at_lease_end"
	MetricRefusedAtLeaseEndInWindow = "refused_at_lease_end_in_window"
	// MetricLeaderCPUPerSession is the leader's CPU per kept-alive
	// session: microseconds of CPU per session per second of the window
	// (leader cores / sessions, in µs/s).
	MetricLeaderCPUPerSession = "leader_cpu_us_per_session_s"
)

// reportKeepAlives records the figures of the keepalive window: its
// length, the keepalive latencies of the window alone (lat: the samples
// added since it began) and the leader's CPU per session (needs
// MetricLeaderCPU, set by the CPU probe).
func reportKeepAlives(r *Result, sessions int, window time.Duration, lat *Latencies) {
	r.SetMetric(MetricSessionTimeS, round1(window.Seconds()))
	if lat != nil && lat.Len() > 0 {
		p := lat.Percentiles(0.5, 0.99)
		r.SetMetric(MetricKeepAliveP50ms, round2(ms(p[0])))
		r.SetMetric(MetricKeepAliveP99ms, round2(ms(p[1])))
	}
	if pct, ok := r.Metrics[MetricLeaderCPU]; ok {
		cores := pct / 100
		r.SetMetric(MetricLeaderCores, round2(cores))
		if sessions > 0 {
			r.SetMetric(MetricLeaderCPUPerSession, round2(cores*1e6/float64(sessions)))
		}
	}
}
