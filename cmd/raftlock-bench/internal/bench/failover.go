package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"syscall"
	"time"
)

// failoverTimeout bounds the wait for the first grant after a kill, and
// for a restarted member to come back.
const failoverTimeout = 60 * time.Second

// runFailover is scenario (d): the load of (a) with o.Clients workers;
// o.Rounds times, after o.Settle, the leader's process is killed with
// SIGKILL and the time until the first grant of a later term is measured.
// With o.RestartCmd the killed member is restarted (and waited for) before
// the next round; otherwise it stays down.
func runFailover(ctx context.Context, sys System, o *Options, prefix string) (Result, error) {
	r := Result{Clients: o.Clients, Unit: "pairs/s"}
	pids := maps.Clone(o.PIDs)
	ws, err := OpenWorkers(ctx, o.Clients, func(ctx context.Context, i int) (Worker, error) {
		return sys.NewWorker(ctx, i, fmt.Sprintf("%s/d/%d", prefix, i))
	})
	if err != nil {
		return r, err
	}
	defer CloseWorkers(context.WithoutCancel(ctx), ws)

	grants := make(chan Grant, 4096)
	load := StartLoad(ctx, ws, grants)
	load.Measure()
	start := time.Now()
	stopLoad := func() {
		pairs, errs, lat := load.Stop()
		fillRate(&r, pairs, errs, time.Since(start), lat)
	}
	for round := 1; round <= o.Rounds; round++ {
		d, elected, err := failoverRound(ctx, sys, o, pids, grants)
		if err != nil {
			stopLoad()
			return r, fmt.Errorf("round %d: %w (last pair error: %v)", round, err, load.LastError())
		}
		r.FailoverMs = append(r.FailoverMs, round2(ms(d)))
		if elected > 0 {
			r.NewLeaderMs = append(r.NewLeaderMs, round2(ms(elected)))
		}
	}
	stopLoad()
	r.SetMetric(MetricFailoverMeanMs, round1(mean(r.FailoverMs)))
	r.SetMetric(MetricFailoverP50Ms, round1(median(r.FailoverMs)))
	r.SetMetric(MetricFailoverMaxMs, round1(slices.Max(r.FailoverMs)))
	if len(r.NewLeaderMs) > 0 {
		r.SetMetric(MetricNewLeaderMeanMs, round1(mean(r.NewLeaderMs)))
	}
	return r, nil
}

func mean(v []float64) float64 {
	var sum float64
	for _, f := range v {
		sum += f
	}
	return sum / float64(len(v))
}

// median is the middle value of v (the mean of the two middle ones for an
// even count); v is not modified.
func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// failoverRound lets the load settle, kills the leader and returns the time
// from the kill to the first grant of a later term, and to the moment
// System.Leader first named a leader of a later term (0 if not seen).
func failoverRound(ctx context.Context, sys System, o *Options, pids map[string]int, grants <-chan Grant) (grant, elected time.Duration, err error) {
	// Settle, and make sure the cluster grants at all before killing.
	settled := time.After(o.Settle)
	var granted bool
	for !granted {
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-grants:
			granted = true
		case <-time.After(failoverTimeout):
			return 0, 0, fmt.Errorf("no grant within %v before the kill", failoverTimeout)
		}
	}
	select {
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	case <-settled:
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	id, term, err := sys.Leader(lctx)
	cancel()
	if err != nil {
		return 0, 0, fmt.Errorf("find the leader: %w", err)
	}
	pid, ok := pids[id]
	if !ok {
		return 0, 0, fmt.Errorf("leader %s has no PID in --pids", id)
	}
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return 0, 0, fmt.Errorf("kill -9 %d (leader %s): %w", pid, id, err)
	}
	delete(pids, id)
	wctx, stopWatch := context.WithTimeout(ctx, failoverTimeout)
	defer stopWatch()
	electedc := make(chan time.Duration, 1)
	go func() { electedc <- watchLeader(wctx, sys, term, killed) }()
	d, err := firstGrantAfter(ctx, grants, killed, term)
	if err != nil {
		return 0, 0, fmt.Errorf("after killing leader %s (term %d): %w", id, term, err)
	}
	// The watcher polls: give it a moment to see what the grant proved.
	select {
	case elected = <-electedc:
	case <-time.After(2 * time.Second):
	}
	stopWatch()
	if o.RestartCmd == "" {
		return d, elected, nil
	}
	rctx, cancel := context.WithTimeout(ctx, failoverTimeout)
	defer cancel()
	newPID, err := Restart(rctx, o.RestartCmd, id)
	if err != nil {
		return 0, 0, err
	}
	pids[id] = newPID
	if err := sys.WaitMember(rctx, id); err != nil {
		return 0, 0, fmt.Errorf("restarted member %s (pid %d): %w", id, newPID, err)
	}
	return d, elected, nil
}

// firstGrantAfter waits for a grant returned after killed by a leader of a
// term later than term, and returns its delay after killed.
func firstGrantAfter(ctx context.Context, grants <-chan Grant, killed time.Time, term uint64) (time.Duration, error) {
	timeout := time.NewTimer(failoverTimeout)
	defer timeout.Stop()
	for {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-timeout.C:
			return 0, fmt.Errorf("no grant of a new term within %v", failoverTimeout)
		case g := <-grants:
			if g.At.After(killed) && g.Term > term {
				return g.At.Sub(killed), nil
			}
		}
	}
}

// watchLeader polls sys.Leader until it names a leader of a term later than
// term and returns the time since killed (0 if ctx ends first).
func watchLeader(ctx context.Context, sys System, term uint64, killed time.Time) time.Duration {
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_, t, err := sys.Leader(pctx)
		cancel()
		if err == nil && t > term {
			return time.Since(killed)
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
	return 0
}
