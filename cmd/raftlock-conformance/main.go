// Command raftlock-conformance checks a raftlock client against the
// contract that the Go client (package session) keeps: keepalive cadence,
// jeopardy and grace, a lock's lost signal before anyone else can be
// granted the lock, holder-id retries after lost answers, FIFO places kept
// across long waits and failovers, the mode-aware fence over the shared
// test vectors, and the documented error codes.
//
// The client under test is a worker: a subprocess that speaks the line
// protocol of docs/CONFORMANCE.md on its stdin and stdout. The suite starts
// a 3-node cluster of raftlockd processes (or uses -endpoints), puts a
// fault proxy between the worker and the cluster (black hole, reset,
// latency, lost answers) and runs its cases, printing a line per case and
// "N passed, M failed"; it exits 0 only when every case passed.
//
//	go run ./cmd/raftlock-conformance                      # the Go client, the reference
//	go run ./cmd/raftlock-conformance -- clients/python/conformance-worker
//
// "raftlock-conformance worker" is the Go client's worker itself.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/raftlock/raftlock/cmd/internal/proccluster"
	"github.com/raftlock/raftlock/transport/client"
)

// config is the suite's command line.
type config struct {
	endpoints []string
	raftlockd string
	vectors   string
	run       *regexp.Regexp
	rounds    int
	parallel  int
	timeout   time.Duration
	env       []string
	worker    []string
	verbose   bool
	exec      string
}

// suite is one run: the cluster, the proxy, the suite's own Go client.
type suite struct {
	cfg    config
	tb     *runTB
	cl     *proccluster.Cluster // nil with -endpoints
	px     *proxy
	direct *client.Client
	runID  string
	// bin is the raftlockd binary of the clusters the suite starts; sec
	// the TLS and ACL cluster, once a case started it.
	bin string
	sec *secureCluster
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "worker" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if err := runGoWorker(ctx, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs the suite with args and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("raftlock-conformance", flag.ContinueOnError)
	fs.SetOutput(stderr)
	endpoints := fs.String("endpoints", "", "HTTP addresses of a running cluster, comma-separated (default: start a 3-node cluster; the failover cases need that)")
	raftlockd := fs.String("raftlockd", "", "the raftlockd binary of the cluster it starts (default: go build ./cmd/raftlockd)")
	vectors := fs.String("vectors", "", "the fence test vectors (default: testdata/fence-vectors.json of the repository around the working directory)")
	runRE := fs.String("run", "", "run only the cases whose names match this regular expression")
	full := fs.Bool("full", false, "the full count of the lost-signal cases: 20 runs of 20 locks each (default 3 runs of 5)")
	rounds := fs.Int("runs", 0, "runs of each lost-signal case (overrides -full)")
	parallel := fs.Int("parallel", 0, "locks per run of each lost-signal case (overrides -full)")
	timeout := fs.Duration("case-timeout", 3*time.Minute, "the longest a case may take")
	broken := fs.String("broken", "", "make the Go worker a broken client, to see the suite fail (late-lost, new-holder, ignore-revoked, late-grant, ignore-slot-revoked, ignore-tenure)")
	verbose := fs.Bool("v", false, "show the worker's stderr after every case, not only after a failed one")
	execCmd := fs.String("exec", "", "instead of the cases, run this shell command against the cluster (its HTTP addresses in RAFTLOCK_ENDPOINTS, comma-separated) and exit with its status")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg := config{raftlockd: *raftlockd, vectors: *vectors, rounds: 3, parallel: 5, timeout: *timeout, verbose: *verbose, exec: *execCmd}
	if *full {
		cfg.rounds, cfg.parallel = 20, 20
	}
	if *rounds > 0 {
		cfg.rounds = *rounds
	}
	if *parallel > 0 {
		cfg.parallel = *parallel
	}
	if *endpoints != "" {
		cfg.endpoints = strings.Split(*endpoints, ",")
	}
	if *runRE != "" {
		re, err := regexp.Compile(*runRE)
		if err != nil {
			fmt.Fprintln(stderr, "-run:", err)
			return 2
		}
		cfg.run = re
	}
	if *broken != "" {
		cfg.env = append(cfg.env, "RAFTLOCK_CONFORMANCE_BROKEN="+*broken)
	}
	cfg.worker = fs.Args()
	if len(cfg.worker) == 0 {
		self, err := os.Executable()
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		cfg.worker = []string{self, "worker"}
	}
	if cfg.vectors == "" {
		v, err := findVectors()
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		cfg.vectors = v
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	failed, err := runSuite(ctx, cfg, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "raftlock-conformance:", err)
		return 2
	}
	if failed > 0 {
		return 1
	}
	return 0
}

// findVectors looks for testdata/fence-vectors.json in the working
// directory and its parents.
func findVectors() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "testdata", "fence-vectors.json")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("testdata/fence-vectors.json not found here or above; pass -vectors")
		}
		dir = up
	}
}

// runSuite sets the run up, runs the cases and prints their lines; it
// returns how many failed.
func runSuite(ctx context.Context, cfg config, out io.Writer) (int, error) {
	tb, err := newRunTB()
	if err != nil {
		return 0, err
	}
	defer tb.Finish()
	id := make([]byte, 4)
	rand.Read(id)
	s := &suite{cfg: cfg, tb: tb, runID: hex.EncodeToString(id)}
	addrs := cfg.endpoints
	if len(addrs) == 0 {
		start := time.Now()
		var setupErr error
		if !tb.guard(func() {
			s.bin = cfg.raftlockd
			if s.bin == "" {
				s.bin = proccluster.BuildDaemon(tb)
			}
			s.cl = proccluster.Start(tb, s.bin, 3)
		}) {
			setupErr = fmt.Errorf("start the cluster: %s", strings.Join(tb.Messages(), "; "))
		}
		if setupErr != nil {
			return 0, setupErr
		}
		lctx, cancel := context.WithTimeout(ctx, time.Minute)
		_, err := s.cl.Leader(lctx)
		cancel()
		if err != nil {
			return 0, err
		}
		addrs = s.cl.Addrs()
		fmt.Fprintf(out, "cluster: 3 raftlockd processes at %s, up in %v\n", strings.Join(addrs, ","), time.Since(start).Round(time.Millisecond))
	}
	if cfg.exec != "" {
		return runExec(ctx, cfg.exec, addrs, out)
	}
	s.direct, err = client.NewClient(addrs)
	if err != nil {
		return 0, err
	}
	s.px, err = startProxy(addrs)
	if err != nil {
		return 0, err
	}
	defer s.px.Close()
	fmt.Fprintf(out, "worker: %s\n", strings.Join(cfg.worker, " "))
	passed, failed, skipped := 0, 0, 0
	begin := time.Now()
	for _, c := range cases(cfg) {
		if cfg.run != nil && !cfg.run.MatchString(c.name) {
			continue
		}
		if c.cluster && s.cl == nil {
			fmt.Fprintf(out, "SKIP  %s: kills nodes, needs the cluster the suite starts (no -endpoints)\n", c.name)
			skipped++
			continue
		}
		if ctx.Err() != nil {
			break
		}
		detail, stderr, err := s.runCase(ctx, c)
		if err != nil {
			failed++
			fmt.Fprintf(out, "FAIL  %s: %v\n", c.name, err)
			if stderr != "" {
				fmt.Fprintf(out, "      worker stderr:\n%s\n", indent(stderr))
			}
			continue
		}
		passed++
		fmt.Fprintf(out, "PASS  %s: %s\n", c.name, detail)
		if cfg.verbose && stderr != "" {
			fmt.Fprintf(out, "      worker stderr:\n%s\n", indent(stderr))
		}
	}
	fmt.Fprintf(out, "%d passed, %d failed", passed, failed)
	if skipped > 0 {
		fmt.Fprintf(out, ", %d skipped", skipped)
	}
	fmt.Fprintf(out, " (%v)\n", time.Since(begin).Round(time.Second))
	return failed, ctx.Err()
}

// runCase runs c against a new worker and returns its detail, the
// worker's stderr, and the case's error.
func (s *suite) runCase(ctx context.Context, c testCase) (detail, stderr string, err error) {
	start := time.Now()
	w, err := startWorker(s.cfg.worker, s.cfg.env)
	if err != nil {
		return "", "", err
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	detail, err = c.run(cctx, s, w)
	s.px.Heal()
	s.px.SetLatency(0)
	s.px.DropAnswerTo("")
	w.stop()
	took := time.Since(start).Round(10 * time.Millisecond)
	if err != nil {
		return "", w.stderr.String(), fmt.Errorf("%w (after %v)", err, took)
	}
	return fmt.Sprintf("%s (%v)", detail, took), w.stderr.String(), nil
}

func indent(s string) string {
	return "      | " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n      | ")
}

// runExec runs command with sh against the cluster at addrs; a failed
// command counts as one failed case.
func runExec(ctx context.Context, command string, addrs []string, out io.Writer) (int, error) {
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	cmd.Env = append(cmd.Environ(), "RAFTLOCK_ENDPOINTS="+strings.Join(addrs, ","))
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			fmt.Fprintf(out, "-exec: %v\n", err)
			return 1, nil
		}
		return 0, err
	}
	return 0, nil
}
