package main

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/raftlock/raftlock/transport/client"
)

// Run runs the checker: it starts the cluster and the clients, injects
// faults for cfg.Duration, heals everything, stops the clients and the
// cluster, and checks the history. Progress lines go to progress. Every
// process it starts is stopped and every iptables rule removed before it
// returns, also when ctx ends early (the report then covers what ran).
func Run(ctx context.Context, cfg Config, progress io.Writer) (rep *Report, err error) {
	if cfg.Permits > 0 || cfg.MixedKinds {
		cfg.NaiveShare = 0 // the naive waiter takes plain exclusive locks only
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	began := time.Now()
	dir, tempDir, err := outDir(cfg.Out)
	if err != nil {
		return nil, err
	}
	runLog, err := os.Create(filepath.Join(dir, "run.log"))
	if err != nil {
		return nil, fmt.Errorf("run log: %w", err)
	}
	defer runLog.Close()
	progress = io.MultiWriter(progress, runLog)
	start := monoNow()
	logf := func(format string, args ...any) {
		fmt.Fprintf(progress, "[%7.1fs] %s\n", float64(monoNow()-start)/1e9, fmt.Sprintf(format, args...))
	}

	bin := cfg.Raftlockd
	if bin == "" {
		logf("building raftlockd")
		if bin, err = buildDaemon(ctx, dir, cfg.UnsafeFault != ""); err != nil {
			return nil, err
		}
	}
	if cfg.ExecClients > 0 && cfg.Raftlock == "" {
		logf("building raftlock (the CLI, for the exec holders)")
		if cfg.Raftlock, err = buildCLI(ctx, dir, cfg.UnsafeExecNoGuard); err != nil {
			return nil, err
		}
	}
	if cfg.WorkerClients > 0 && len(cfg.Worker) == 0 {
		logf("building the Go worker (raftlock-conformance)")
		if cfg.Worker, err = buildWorker(ctx, dir); err != nil {
			return nil, err
		}
	}
	var warnings []string
	var fw *firewall
	for _, k := range cfg.Faults {
		if isPartition(k) && fw == nil {
			if fw, err = newFirewall(ctx); err != nil {
				warnings = append(warnings, fmt.Sprintf("partitions disabled: %v", err))
				fw = nil
				break
			}
			defer fw.close()
		}
	}

	extra := []string{"--log-level", cfg.LogLevel}
	if cfg.UnsafeFault != "" {
		extra = append(extra, "--unsafe-fault", cfg.UnsafeFault)
	}
	extra = append(extra, cfg.NodeFlags...)
	cl, err := newCluster(bin, filepath.Join(dir, "nodes"), cfg.Nodes, extra)
	if err != nil {
		return nil, err
	}
	if slices.ContainsFunc(cfg.Faults, isDiskFault) {
		err := canMountDisks()
		if err == nil {
			err = cl.mountDisks(filepath.Join(dir, "disks"))
		}
		switch {
		case err == nil:
			// Unmounted once the nodes are stopped (the deferred stopAll
			// below runs first).
			defer cl.unmountDisks()
		case cfg.DisksIfAble:
			warnings = append(warnings, fmt.Sprintf("the disk faults left out of --faults all: %v", err))
			cfg.Faults = slices.DeleteFunc(slices.Clone(cfg.Faults), isDiskFault)
		default:
			return nil, err
		}
	}
	cl.stream = cfg.ClientProto == protoStream
	if cfg.TLS {
		if err := cl.enableTLS(filepath.Join(dir, "tls")); err != nil {
			return nil, err
		}
	}
	if cfg.ACL {
		cl.enableACL()
	}
	defer cl.stopAll(5 * time.Second)
	if err := cl.startAll(); err != nil {
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	err = cl.waitSettled(sctx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("cluster did not start (logs in %s): %w", dir, err)
	}
	logf("cluster of %d nodes up: %s", cfg.Nodes, strings.Join(cl.apiAddrs(), " "))

	var tokens []clientToken
	if cfg.ACL {
		actx, cancel := context.WithTimeout(ctx, time.Minute)
		tokens, err = cl.setupACL(actx, cfg.Clients+cfg.ExecClients)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("cluster with ACLs (logs in %s): %w", dir, err)
		}
	}
	hist, track := newHistoryLog(), newTracker()
	hist.permits, hist.mixed = cfg.Permits, cfg.MixedKinds
	mem, err := newResource(cfg.UnsafeResourceFence)
	if err != nil {
		return nil, err
	}
	if cfg.UnsafeResourceFence != "" {
		logf("protected resource: in memory, its fence BROKEN (--unsafe-resource-fence %s: testing the checker)", cfg.UnsafeResourceFence)
	}
	var res fencedResource = mem
	if cfg.ResourcePostgres != "" {
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		pg, err := newPGResource(rctx, cfg.ResourcePostgres, cfg.UnfencedWriter)
		cancel()
		if err != nil {
			return nil, err
		}
		res = pg
		logf("protected resource: PostgreSQL, writes fenced by the SQL fence%s", map[bool]string{true: " (UNFENCED: testing the checker)"}[cfg.UnfencedWriter])
	}
	var locks []string
	for i := 0; i < cfg.Locks; i++ {
		locks = append(locks, fmt.Sprintf("%slock%d", lockPrefix, i))
	}
	var spares []string
	for _, n := range cl.spares {
		spares = append(spares, cl.apiAddr(n))
	}
	tokens, execTokens := tokens[:min(len(tokens), cfg.Clients)], tokens[min(len(tokens), cfg.Clients):]
	cs, err := startClients(cfg, cl.apiAddrs(), spares, cl.certs, tokens, locks, dir, hist, res, track)
	if err != nil {
		return nil, err
	}
	stopped := false
	defer func() {
		if !stopped {
			cs.kill()
		}
	}()
	logf("%d clients started", cfg.Clients)
	var xs *execHolders
	if cfg.ExecClients > 0 {
		if xs, err = startRunExecs(ctx, cfg, cl, execTokens, dir, hist, res); err != nil {
			return nil, err
		}
		defer xs.stop(0) // a no-op once stopped
		logf("%d exec holders started", cfg.ExecClients)
	}
	// The prefix watcher (check 9), with every address a member may have.
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watchDone := runPrefixWatcher(watchCtx, append(cl.apiAddrs(), spares...), []client.ClientOption{
		client.WithTLS(cl.clientTLS), client.WithToken(cl.admin), client.WithRequestTimeout(5 * time.Second)}, hist, logf)

	in := &injector{cfg: cfg, cl: cl, fw: fw, cs: cs, track: track, hist: hist,
		rng: rand.New(rand.NewSource(cfg.Seed)), progress: progress, start: start,
		counts: map[string]int{}, skipped: map[string]int{}, tokens: tokens, execs: xs}
	runCtx, stopRun := context.WithTimeout(ctx, cfg.Duration)
	defer stopRun()
	if cfg.StopOnViolation {
		go watchChecks(runCtx, stopRun, hist, start, cfg.Clients)
	}
	in.loop(runCtx)

	logf("healing and stopping")
	hctx, cancel := waitCtx(time.Minute)
	defer cancel()
	if fw != nil {
		if err := fw.heal(hctx); err != nil {
			warnings = append(warnings, err.Error())
		}
	}
	cl.resumeAll()
	if err := cl.startAll(); err != nil {
		warnings = append(warnings, err.Error())
	}
	if err := cl.waitSettled(hctx); err != nil {
		warnings = append(warnings, fmt.Sprintf("at the end: %v", err))
	}
	cs.broadcast(message{T: msgVerify})
	sleep(hctx, 2*time.Second) // let the last verify reads finish
	if xs != nil {
		xs.stop(30 * time.Second)
	}
	cs.stop(30 * time.Second)
	stopped = true
	stopWatch()
	<-watchDone
	end := monoNow()
	cl.stopAll(5 * time.Second)
	for _, err := range cl.unmountDisks() {
		warnings = append(warnings, err.Error())
	}

	h := hist.snapshot(start, end, cfg.Clients)
	h.Execs = xs.snapshot()
	for i := cfg.Clients - cfg.WorkerClients; i < cfg.Clients; i++ {
		h.Workers, h.Worker = append(h.Workers, i), cfg.Worker
	}
	logf("checking %d operations, %d writes", len(h.Ops), len(h.Writes))
	rep = analyze(h, cfg.CheckTimeout)
	accepted := 0
	for _, w := range h.Writes {
		if w.Accepted {
			accepted++
		}
	}
	rep.Violations = append(rep.Violations, res.finish(accepted)...)
	rep.Setup = describe(cfg)
	rep.Warnings = warnings
	rep.Skipped = in.skipped
	for _, k := range []string{faultPowerLoss, faultSlowDisk, faultFillDisk} {
		rep.NodeStartsJudged += in.counts[k]
	}
	if len(in.failures) > 0 {
		rep.Violations = append(rep.Violations, in.failures...)
		sort.SliceStable(rep.Violations, func(i, j int) bool { return rep.Violations[i].At < rep.Violations[j].At })
	}
	rep.Around = aroundFirst(h, rep.Violations)
	rep.Seed = cfg.Seed
	rep.Elapsed = time.Since(began)
	if err := rep.writeArtifacts(dir, h); err != nil {
		rep.Warnings = append(rep.Warnings, err.Error())
	}
	if tempDir && rep.exitCode() == 0 {
		_ = os.RemoveAll(dir)
	} else {
		rep.Dir = dir
	}
	return rep, nil
}

// outDir returns the run's directory: out, created if needed, or a new
// temp dir (temp true).
func outDir(out string) (dir string, temp bool, err error) {
	if out == "" {
		d, err := os.MkdirTemp("", "raftlock-check-")
		if err != nil {
			return "", false, fmt.Errorf("out dir: %w", err)
		}
		return d, true, nil
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", false, fmt.Errorf("out dir: %w", err)
	}
	return out, false, nil
}

// watchChecks ends the run (stop) as soon as one of the quick checks
// (all but linearizability) fails on the history recorded so far. It
// leaves out the last watchLag, whose messages may still be on their way
// (a client paused between stamping and sending one); the final analysis
// of the whole history decides.
func watchChecks(ctx context.Context, stop context.CancelFunc, hist *historyLog, start int64, clients int) {
	const watchLag = 2 * time.Second
	for sleep(ctx, time.Second) {
		h := hist.snapshot(start, monoNow(), clients)
		cut := monoNow() - int64(watchLag)
		ops := h.Ops[:0]
		for _, o := range h.Ops {
			if o.Call < cut {
				if o.Return >= cut {
					o.Return, o.Result = pending, resUnknown
				}
				ops = append(ops, o)
			}
		}
		h.Ops = ops
		writes := h.Writes[:0]
		for _, w := range h.Writes {
			if w.At < cut {
				writes = append(writes, w)
			}
		}
		h.Writes = writes
		holds := h.Holds[:0]
		for _, hd := range h.Holds {
			if hd.Held < cut {
				if hd.Lost >= cut {
					hd.Lost = pending
				}
				holds = append(holds, hd)
			}
		}
		h.Holds = holds
		expiries := h.Expiries[:0]
		for _, e := range h.Expiries {
			if e.At < cut {
				expiries = append(expiries, e)
			}
		}
		h.Expiries = expiries
		if len(quickChecks(h)) > 0 {
			stop()
			return
		}
	}
}

func describe(cfg Config) string {
	s := fmt.Sprintf("%d nodes, %d clients, %d locks, %v, seed %d, faults %s, ttl %v, lock-delay %v, grace %v, naive share %g",
		cfg.Nodes, cfg.Clients, cfg.Locks, cfg.Duration, cfg.Seed, strings.Join(cfg.Faults, ","), cfg.TTL, cfg.LockDelay, cfg.Grace, cfg.NaiveShare)
	if cfg.TLS {
		s += ", TLS"
	} else {
		s += ", no TLS"
	}
	if cfg.ACL {
		s += ", ACLs"
	} else {
		s += ", no ACLs"
	}
	if len(cfg.NodeFlags) > 0 {
		s += ", raftlockd " + strings.Join(cfg.NodeFlags, " ")
	}
	if cfg.Permits > 0 {
		s += fmt.Sprintf(", semaphores of %d permits", cfg.Permits)
	}
	if cfg.MixedKinds {
		s += ", mixed kinds"
	}
	if cfg.ClientProto != "" && cfg.ClientProto != protoHTTP {
		s += ", clients over " + cfg.ClientProto
	}
	if cfg.ExecClients > 0 {
		s += fmt.Sprintf(", %d exec holders", cfg.ExecClients)
	}
	if cfg.UnsafeExecNoGuard {
		s += ", UNSAFE exec --unsafe-no-guard"
	}
	if cfg.UnsafeFault != "" {
		s += ", UNSAFE raftlockd --unsafe-fault " + cfg.UnsafeFault
	}
	return s
}

// writeArtifacts writes the history to dir, and for a failed or
// inconclusive run porcupine's visualisation with the faults and the
// violations marked.
func (r *Report) writeArtifacts(dir string, h History) error {
	hp := filepath.Join(dir, "history.jsonl")
	if err := writeHistory(hp, h); err != nil {
		return err
	}
	r.Artifacts = append(r.Artifacts, hp)
	if r.exitCode() == 0 || r.Lin.NotRun != "" {
		return nil // nothing to visualise without the linearizability check
	}
	var notes []porcupine.Annotation
	for _, v := range r.Violations {
		if v.Check == checkLinearizable {
			continue
		}
		notes = append(notes, porcupine.Annotation{Tag: "violations", Start: v.At, Description: v.Check,
			Details: v.What, BackgroundColor: "#f4b6b6"})
	}
	vp := filepath.Join(dir, "linearizability.html")
	if err := r.Lin.visualize(vp, h, notes); err != nil {
		return err
	}
	r.Artifacts = append(r.Artifacts, vp)
	return nil
}
