package bench

import (
	"context"
	"fmt"
	"time"
)

// runSessions is scenario (c): o.SessionCount sessions opened and kept
// alive for o.SessionTime, o.HeldLocks of them holding a lock each. The
// rate is session opens per second and the latencies are those of the
// opens; the metrics carry the keepalive figures, spurious expiries, CPU
// of the keepalive window, and the leader's memory per session and per
// held lock (RSS deltas: rough, the Go heap and page cache move in steps).
func runSessions(ctx context.Context, sys System, o *Options, lockPrefix string) (Result, error) {
	r := Result{Clients: o.Workers, Unit: "opens/s"}
	r.SetMetric(MetricSessions, float64(o.SessionCount))
	r.SetMetric(MetricHeldLocks, float64(o.HeldLocks))
	id, pid := leaderPID(ctx, sys, o)
	rss := func() int64 {
		if pid == 0 {
			return 0
		}
		v, err := ProcRSS(pid)
		if err != nil {
			return 0
		}
		return v
	}
	rss0 := rss()
	idleCores, idleOK := idleLeaderCores(ctx, pid, o.IdleBaseline)

	sl := sys.NewSessionLoad(o, lockPrefix)
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
		defer cancel()
		_ = sl.Close(cctx)
	}()
	lat := &Latencies{}
	start := time.Now()
	errs, err := sl.Open(ctx, o.SessionCount, lat)
	openTime := time.Since(start)
	fillRate(&r, int64(lat.Len()), errs, openTime, lat)
	if err != nil {
		return r, fmt.Errorf("open %d sessions: %w", o.SessionCount, err)
	}
	rss1 := rss()
	if err := sl.Hold(ctx, o.HeldLocks); err != nil {
		return r, fmt.Errorf("hold %d locks: %w", o.HeldLocks, err)
	}
	rss2 := rss()

	probe := StartCPUProbe(pid, o.PIDs)
	before := sl.Stats()
	wstart := time.Now()
	if err := sleepCtx(ctx, o.SessionTime); err != nil {
		return r, err
	}
	window := time.Since(wstart)
	probe.Finish(&r)
	during := sl.Stats()
	rss3 := rss()

	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	if err := sl.Close(cctx); err != nil {
		r.Notes = append(r.Notes, fmt.Sprintf("closing the sessions: %v", err))
	}
	after := sl.Stats()
	r.SetMetric(MetricSpurious, float64(after.Spurious))
	r.SetMetric(MetricLapsed, float64(after.Lapsed))
	r.SetMetric(MetricLateKeepAlives, float64(after.Late))
	r.SetMetric(MetricKeepAlivesPerS, round1(float64(during.Acked-before.Acked)/window.Seconds()))
	var windowLat *Latencies
	if during.Latency != nil {
		skip := 0
		if before.Latency != nil {
			skip = before.Latency.Len()
		}
		windowLat = during.Latency.From(skip)
	}
	reportKeepAlives(&r, o.SessionCount, window, windowLat)
	r.SetMetric(MetricSpuriousInWindow, float64(during.Spurious-before.Spurious))
	r.SetMetric(MetricRefusedAtLeaseEnd, float64(after.RefusedAtLeaseEnd))
	r.SetMetric(MetricRefusedAtLeaseEndInWindow, float64(during.RefusedAtLeaseEnd-before.RefusedAtLeaseEnd))
	r.SetMetric(MetricLapsedInWindow, float64(during.Lapsed-before.Lapsed))
	reportKeepAliveCost(&r, idleCores, idleOK)
	if pid != 0 && rss0 > 0 {
		// The RSS of a Go server also holds garbage of earlier load that
		// a GC may free meanwhile; a delta that went down says so.
		if rss1 > rss0 {
			r.SetMetric(MetricBytesPerSession, float64((rss1-rss0)/int64(o.SessionCount)))
		}
		if o.HeldLocks > 0 && rss2 > rss1 {
			r.SetMetric(MetricBytesPerLock, float64((rss2-rss1)/int64(o.HeldLocks)))
		}
		if rss1 <= rss0 || (o.HeldLocks > 0 && rss2 <= rss1) {
			r.Notes = append(r.Notes, fmt.Sprintf("leader RSS did not grow (%d, %d, %d MB): memory figures left out; "+
				"run this scenario on a freshly started cluster", rss0>>20, rss1>>20, rss2>>20))
		}
		r.SetMetric(MetricLeaderRSSMB, round1(float64(rss3)/(1<<20)))
	}
	if id2, _ := leaderPID(ctx, sys, o); id != "" && id2 != id {
		r.Notes = append(r.Notes, fmt.Sprintf("leader changed from %s to %s: CPU and memory figures are not the leader's", id, id2))
	}
	if after.Late > 0 {
		r.Notes = append(r.Notes, "keepalives sent late: the client was a bottleneck")
	}
	if after.Lapsed > 0 {
		r.Notes = append(r.Notes, "leases ran out on the client side: keepalives sent late or not acknowledged within the TTL")
	}
	return r, nil
}
