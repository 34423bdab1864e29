package bench

import (
	"context"
	"time"
)

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
	// MetricLeaderIdleCores is the idle leader's CPU (cores) measured
	// before the opens (--idle-baseline), and MetricLeaderCPUPerKeepAlive
	// the leader's CPU per keepalive served in the window, in µs: (leader
	// cores − idle cores) × 10⁶ / keepalives per second; without a
	// baseline the idle share is not taken off.
	MetricLeaderIdleCores       = "leader_idle_cpu_cores"
	MetricLeaderCPUPerKeepAlive = "leader_cpu_us_per_keepalive"
)

// idleLeaderCores measures the leader's CPU over d (0: not measured).
func idleLeaderCores(ctx context.Context, pid int, d time.Duration) (float64, bool) {
	if pid == 0 || d <= 0 {
		return 0, false
	}
	c0, err := ProcCPU(pid)
	if err != nil {
		return 0, false
	}
	start := time.Now()
	if sleepCtx(ctx, d) != nil {
		return 0, false
	}
	c1, err := ProcCPU(pid)
	if err != nil {
		return 0, false
	}
	return float64(c1-c0) / float64(time.Since(start)), true
}

// reportKeepAliveCost records the leader's CPU per keepalive (needs
// MetricLeaderCPU and MetricKeepAlivesPerS), the idle baseline taken off
// when measured.
func reportKeepAliveCost(r *Result, idleCores float64, idleOK bool) {
	pct, ok1 := r.Metrics[MetricLeaderCPU]
	cores := pct / 100
	rate, ok2 := r.Metrics[MetricKeepAlivesPerS]
	if idleOK {
		r.SetMetric(MetricLeaderIdleCores, float64(int64(idleCores*1e4+0.5))/1e4)
		cores -= idleCores
	}
	if ok1 && ok2 && rate > 0 {
		r.SetMetric(MetricLeaderCPUPerKeepAlive, round1(max(cores, 0)*1e6/rate))
	}
}

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
