package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Run runs the scenario of o against sys.
func Run(ctx context.Context, sys System, o *Options) (Result, error) {
	// Lock names are unique per run, so that a run never meets the locks
	// of an earlier, interrupted one.
	prefix := o.Lock + "/" + strconv.FormatInt(time.Now().UnixNano(), 36)
	var (
		r   Result
		err error
	)
	if x, ok := sys.(ExternalSystem); ok && x.Driver() != nil {
		r, err = runExternal(ctx, x, o, prefix)
		r.System, r.Scenario, r.Label = sys.Name(), o.Scenario, o.Label
		if err != nil {
			return r, fmt.Errorf("%s %s: %w", sys.Name(), o.Scenario, err)
		}
		return r, nil
	}
	switch o.Scenario {
	case Uncontended:
		r, err = runPairs(ctx, sys, o, func(i int) string { return fmt.Sprintf("%s/a/%d", prefix, i) })
		r.Unit = "pairs/s"
	case Contended:
		r, err = runPairs(ctx, sys, o, func(int) string { return prefix + "/b" })
		r.Unit = "handoffs/s"
	case Sessions:
		r, err = runSessions(ctx, sys, o, prefix+"/c")
	case Failover:
		r, err = runFailover(ctx, sys, o, prefix)
	default:
		return Result{}, fmt.Errorf("unknown scenario %q", o.Scenario)
	}
	r.System, r.Scenario, r.Label = sys.Name(), o.Scenario, o.Label
	if err != nil {
		return r, fmt.Errorf("%s %s: %w", sys.Name(), o.Scenario, err)
	}
	return r, nil
}

// leaderPID returns the leader's id and PID (0 when --pids does not name
// it, or the leader is unknown).
func leaderPID(ctx context.Context, sys System, o *Options) (string, int) {
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	id, _, err := sys.Leader(lctx)
	if err != nil {
		return "", 0
	}
	return id, o.PIDs[id]
}

// runPairs is scenarios (a) and (b): o.Clients workers doing pairs on the
// locks lockOf names, measured for o.Duration after o.Warmup.
func runPairs(ctx context.Context, sys System, o *Options, lockOf func(i int) string) (Result, error) {
	r := Result{Clients: o.Clients}
	ws, err := OpenWorkers(ctx, o.Clients, func(ctx context.Context, i int) (Worker, error) {
		return sys.NewWorker(ctx, i, lockOf(i))
	})
	if err != nil {
		return r, err
	}
	defer CloseWorkers(context.WithoutCancel(ctx), ws)
	id, pid := leaderPID(ctx, sys, o)

	load := StartLoad(ctx, ws, nil)
	if err := sleepCtx(ctx, o.Warmup); err != nil {
		load.Stop()
		return r, err
	}
	probe := StartCPUProbe(pid, o.PIDs)
	start := time.Now()
	load.Measure()
	err = sleepCtx(ctx, o.Duration)
	pairs, errs, lat := load.Stop()
	elapsed := time.Since(start)
	probe.Finish(&r)
	if err != nil {
		return r, err
	}
	fillRate(&r, pairs, errs, elapsed, lat)
	perOp(&r)
	if id2, _ := leaderPID(ctx, sys, o); id != "" && id2 != id {
		r.Notes = append(r.Notes, fmt.Sprintf("leader changed from %s to %s during the run", id, id2))
	}
	if pairs == 0 {
		return r, fmt.Errorf("no pair completed in %v (last error: %v)", elapsed, load.LastError())
	}
	return r, nil
}

// fillRate sets the rate and latency figures of r.
func fillRate(r *Result, ops, errs int64, elapsed time.Duration, lat *Latencies) {
	r.Seconds = round2(elapsed.Seconds())
	r.Ops, r.Errors = ops, errs
	if elapsed > 0 {
		r.Rate = round1(float64(ops) / elapsed.Seconds())
	}
	p := lat.Percentiles(0.5, 0.99)
	r.P50ms, r.P99ms = round2(ms(p[0])), round2(ms(p[1]))
}

func round2(v float64) float64 { return float64(int64(v*100+0.5)) / 100 }

// sleepCtx sleeps d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
