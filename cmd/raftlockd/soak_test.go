package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/cmd/internal/proccluster"
	"github.com/raftlock/raftlock/session"
	"github.com/raftlock/raftlock/transport/client"
)

// The soak's knobs. Every abuse is bounded in rate and in count (see
// soak_abuse_test.go); these are the ones a run is most likely to tune.
const (
	// soakNofile is every node's open-file limit (ulimit -n), as a
	// service manager sets it.
	soakNofile = 1024
	// soakBigLocks locks of soakValueBytes each fill the prefix
	// soakBigPrefix, whose listings and watch resets are the large
	// answers (about 2 × 4 KiB per lock: its holder's value and its
	// grant's).
	soakBigLocks   = 2000
	soakValueBytes = api.MaxValueBytes
	soakBigPrefix  = "soak/big/"
	// soakLegitLock is the lock the legitimate client takes and
	// releases, one pair every soakLegitEvery.
	soakLegitLock  = "soak/legit/lock"
	soakLegitEvery = 50 * time.Millisecond
	// soakDefaultWatches is how many blocking single-lock watches one
	// burst sends in all (RAFTLOCK_SOAK_WATCHES): a quarter over each of
	// the stream port and HTTP/2, to the leader and to a follower.
	soakDefaultWatches = 8000
)

// TestAbuseSoak is issue 40's soak: one read-only ACL token (and, where
// the abuse needs none, no token) runs every abuse of the issue at once
// against a 3-node secure cluster (TLS with client certificates, ACLs,
// the stream and metrics ports on, every node limited to 1024 open
// files) while a legitimate client (a write token, the Go session client
// over the stream protocol) takes and releases a lock every 50 ms. It
// measures the client's pairs quietly first, then under abuse, then
// quietly again (for the figures only), and requires: no node exited,
// the term did not change, the client's p99 under abuse within 2x its
// first quiet p99, and nothing lost (every pair completed, tokens
// strictly increasing, no session in jeopardy, the admin's locks still
// held, the bootstrap never won, no forged sequencer valid). It prints
// the timeline, every node's RSS, fds, term and leader once a second,
// each abuse's requests and answers, and a summary table for the note.
//
// It runs only when asked (not in CI, not with -short):
//
//	RAFTLOCK_SOAK=10m go test -run TestAbuseSoak -timeout 30m -v ./cmd/raftlockd
//
// RAFTLOCK_SOAK_QUIET (default 30s) is each quiet phase; RAFTLOCK_SOAK_ONLY
// (e.g. "3,5") runs only the abuses of those numbers (issue 40's
// items as soak_abuse_test.go numbers them), to see which does what;
// RAFTLOCK_SOAK_WATCHES (default 8000) is a watch burst's size;
// RAFTLOCK_SOAK_FD_HEADROOM (default 48) the descriptors the idle
// connections leave free on each node; RAFTLOCK_SOAK_REPORT a file to
// write the summary table into.
func TestAbuseSoak(t *testing.T) {
	soakFor := soakEnvDuration(t, "RAFTLOCK_SOAK", 0)
	if soakFor <= 0 || testing.Short() {
		t.Skip("the abuse soak runs only with RAFTLOCK_SOAK=<duration> (e.g. 10m), without -short")
	}
	quietFor := soakEnvDuration(t, "RAFTLOCK_SOAK_QUIET", 30*time.Second)
	watches := soakDefaultWatches
	if v := os.Getenv("RAFTLOCK_SOAK_WATCHES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 4 {
			t.Fatalf("RAFTLOCK_SOAK_WATCHES=%q: want a number of 4 or more", v)
		}
		watches = n
	}
	headroom := soakFDHeadroom
	if v := os.Getenv("RAFTLOCK_SOAK_FD_HEADROOM"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n >= soakNofile {
			t.Fatalf("RAFTLOCK_SOAK_FD_HEADROOM=%q: want 0 to %d", v, soakNofile-1)
		}
		headroom = n
	}
	need := 2*quietFor + soakFor + 4*time.Minute // set-up, fill, drain
	if dl, ok := t.Deadline(); ok && time.Until(dl) < need {
		t.Fatalf("the soak needs about %v and the test's deadline is in %v: pass -timeout %v", need, time.Until(dl).Round(time.Second), need.Round(time.Minute)+10*time.Minute)
	}
	ctx, cancel := context.WithTimeout(context.Background(), need)
	defer cancel()

	env := startSoakCluster(ctx, t)
	env.watches, env.fdHeadroom, env.soakFor, env.quietFor, env.only = watches, headroom, soakFor, quietFor, os.Getenv("RAFTLOCK_SOAK_ONLY")
	env.fillBigPrefix(ctx)
	t.Logf("cluster up: leader n%d, follower n%d; %d locks of %d bytes under %s", env.leader+1, env.follower+1, soakBigLocks, soakValueBytes, soakBigPrefix)

	abuses := env.abuses(env.only)
	smp := env.startSampler()
	legit := env.openLegit(ctx)
	var cpu [3]cpuSnapshot
	cpu[0] = env.cpuNow()
	env.log.add("quiet phase: %v", quietFor)
	qctx, qcancel := context.WithTimeout(ctx, quietFor)
	legit.run(qctx, "quiet")
	qcancel()

	cpu[1] = env.cpuNow()
	env.log.add("soak phase: %d abuses for %v", len(abuses), soakFor)
	sctx, scancel := context.WithTimeout(ctx, soakFor)
	var wg sync.WaitGroup
	for _, a := range abuses {
		wg.Go(func() { a.run(sctx, env, env.stats(a.name)) })
	}
	legit.run(sctx, "soak")
	cpu[2] = env.cpuNow()
	scancel()
	wg.Wait()
	env.log.add("abuses stopped; quiet again for %v", quietFor)
	actx, acancel := context.WithTimeout(ctx, quietFor)
	legit.run(actx, "after")
	acancel()
	smp.stop()

	env.check(ctx, legit, smp, cpu)
}

// soakEnvDuration reads a duration from the environment variable name
// (def when unset).
func soakEnvDuration(t *testing.T, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration (e.g. 1m)", name, v)
	}
	return d
}

// soakEnv is the soak's cluster, its tokens and its records.
type soakEnv struct {
	t *testing.T
	c *proccluster.Cluster
	// tls is the clients' TLS configuration (the CA, the client
	// certificate): only ever cloned, since an http.Transport writes
	// into the one it is given.
	tls   *tls.Config
	admin string
	// reader is the abuser's read-only token, writer the legitimate
	// client's.
	reader, writer string
	// metrics and stream are each node's metrics and stream addresses
	// (host:port); api its API address.
	metrics, stream, api []string
	leader, follower     int
	// The run's parameters: watches a burst, the descriptors the fill
	// leaves free, the phases' durations, the abuses asked for ("": all).
	watches, fdHeadroom int
	soakFor, quietFor   time.Duration
	only                string
	// fillers are the admin's sessions holding the big prefix's locks.
	fillers []*session.Session
	log     *soakLog

	mu     sync.Mutex
	names  []string
	byName map[string]*abuseStats
}

// startSoakCluster starts the secure cluster as README.md and
// docs/DEPLOYING.md set it up (raftlock tls init, --client-cert-auth,
// --acl, --metrics-addr, --stream-addr), every node under ulimit -n
// soakNofile, and makes the admin, reader and writer tokens.
func startSoakCluster(ctx context.Context, t *testing.T) *soakEnv {
	t.Helper()
	cli := proccluster.Build(t, "github.com/raftlock/raftlock/cmd/raftlock", "raftlock")
	dir := tlsInit(t, cli, 3)
	bin := proccluster.BuildDaemon(t)
	env := &soakEnv{t: t, tls: proccluster.ClientTLS(t, dir), log: &soakLog{start: time.Now()}, byName: map[string]*abuseStats{}}
	// proccluster gives every node the same extra flags: a script picks
	// each node's own ports by its --id (the first flag) and sets the
	// open-file limit, as limitedDaemon does.
	var cases strings.Builder
	for i := 1; i <= 3; i++ {
		m, s := proccluster.FreeAddr(t), proccluster.FreeAddr(t)
		env.metrics, env.stream = append(env.metrics, m), append(env.stream, s)
		fmt.Fprintf(&cases, "n%d) exec %q \"$@\" --metrics-addr %s --stream-addr %s ;;\n", i, bin, m, s)
	}
	script := filepath.Join(t.TempDir(), "raftlockd-soak")
	body := fmt.Sprintf("#!/bin/sh\nulimit -n %d || exit 97\ncase \"$2\" in\n%sesac\necho \"raftlockd-soak: no ports for $2\" >&2\nexit 98\n", soakNofile, cases.String())
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	env.c = proccluster.StartTLS(t, script, dir, 3, "--client-cert-auth", "--acl")
	for _, n := range env.c.Nodes {
		env.api = append(env.api, n.HTTPAddr)
	}
	leader, err := env.c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	env.leader, env.follower = leader, (leader+1)%3
	boot, err := env.c.Client().ACLBootstrap(ctx)
	if err != nil {
		t.Fatalf("acl bootstrap: %v", err)
	}
	env.admin = boot.Secret
	ac := env.c.Client(client.WithToken(env.admin))
	for _, tok := range []struct {
		secret *string
		name   string
		rules  []string
	}{{&env.reader, "abuser", []string{"read:"}}, {&env.writer, "legit", []string{"write:soak/legit/"}}} {
		ts, err := ac.CreateToken(ctx, api.TokenRequest{Name: tok.name, Rules: tok.rules})
		if err != nil {
			t.Fatalf("create the %s token: %v", tok.name, err)
		}
		*tok.secret = ts.Secret
	}
	return env
}

// fillBigPrefix has the admin take soakBigLocks locks under
// soakBigPrefix, each with a value of soakValueBytes, over four sessions
// (a session holds at most api.DefaultMaxLocksPerSession) that stay open
// through the soak.
func (env *soakEnv) fillBigPrefix(ctx context.Context) {
	t := env.t
	ac := env.c.Client(client.WithToken(env.admin))
	value := strings.Repeat("v", soakValueBytes)
	const sessions = 4
	for i := range sessions {
		s, err := session.Open(ctx, ac, session.TTL(15*time.Second), session.Name(fmt.Sprintf("soak-filler-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		env.fillers = append(env.fillers, s)
	}
	work := make(chan int, soakBigLocks)
	for i := range soakBigLocks {
		work <- i
	}
	close(work)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range work {
				if _, err := env.fillers[i%sessions].TryLock(ctx, fmt.Sprintf("%s%05d", soakBigPrefix, i), session.Value(value)); err != nil {
					errs <- fmt.Errorf("worker %d: lock %d: %w", w, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("fill the big prefix: %v", err)
	}
	// The locks the watch bursts wait on, held throughout.
	for j := range soakWatchedLocks {
		if _, err := env.fillers[j%sessions].TryLock(ctx, soakWatchedName(j)); err != nil {
			t.Fatalf("lock %s: %v", soakWatchedName(j), err)
		}
	}
}

// soakLog is the soak's timeline: what happened when, for a failure's
// account.
type soakLog struct {
	start time.Time
	mu    sync.Mutex
	lines []string
}

func (l *soakLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf("%7.1fs  ", time.Since(l.start).Seconds())+fmt.Sprintf(format, args...))
}

func (l *soakLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// legitClient is the legitimate client: a write token's session over the
// stream protocol, taking and releasing soakLegitLock.
type legitClient struct {
	env *soakEnv
	cl  *client.Client
	s   *session.Session // the latest session (run opens another when one is lost)

	mu       sync.Mutex
	pairs    map[string][]time.Duration // by phase
	failures []string
	last     uint64 // the last grant's token
	events   []string
}

// openLegit opens the legitimate client's session.
func (env *soakEnv) openLegit(ctx context.Context) *legitClient {
	lc := &legitClient{env: env, pairs: map[string][]time.Duration{}, cl: env.c.Client(client.WithToken(env.writer))}
	if err := lc.open(ctx); err != nil {
		env.t.Fatalf("the legitimate client's session: %v", err)
	}
	return lc
}

// open opens a session for the legitimate client, recording its events.
func (lc *legitClient) open(ctx context.Context) error {
	env := lc.env
	s, err := session.Open(ctx, lc.cl, session.TTL(10*time.Second), session.Name("legit"), session.OnEvent(func(ev session.Event) {
		text := fmt.Sprintf("%s at %.1fs", ev.State, time.Since(env.log.start).Seconds())
		if ev.Err != nil {
			text += fmt.Sprintf(" (%v)", ev.Err)
		}
		lc.mu.Lock()
		lc.events = append(lc.events, text)
		lc.mu.Unlock()
		env.log.add("legit session: %s", text)
	}))
	if err == nil {
		lc.s = s
	}
	return err
}

// run takes and releases the lock every soakLegitEvery until ctx ends,
// recording each pair's latency under phase, and each failure: an error,
// a lock lost while held, a token not above the last, the session lost
// (the client then opens another).
func (lc *legitClient) run(ctx context.Context, phase string) {
	tick := time.NewTicker(soakLegitEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if st := lc.s.State(); st == session.Expired || st == session.Closed {
			lc.mu.Lock()
			lc.failures = append(lc.failures, fmt.Sprintf("%s: the session is %s at %.1fs", phase, st, time.Since(lc.env.log.start).Seconds()))
			lc.mu.Unlock()
			octx, cancel := context.WithTimeout(ctx, time.Minute)
			err := lc.open(octx)
			cancel()
			if err != nil {
				lc.env.log.add("legit: open a new session: %v", err)
				continue
			}
		}
		// A pair is never cut short by the phase's end: its own bound.
		pctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		t0 := time.Now()
		l, err := lc.s.Lock(pctx, soakLegitLock)
		var lost bool
		var tok uint64
		if err == nil {
			tok = uint64(l.Token())
			select {
			case <-l.Lost():
				lost = true
			default:
			}
			err = l.Unlock(pctx)
		}
		lat := time.Since(t0)
		cancel()
		lc.mu.Lock()
		switch {
		case err != nil:
			lc.failures = append(lc.failures, fmt.Sprintf("%s pair at %.1fs: %v", phase, time.Since(lc.env.log.start).Seconds(), err))
			lc.env.log.add("legit pair failed after %v: %v", lat.Round(time.Millisecond), err)
		case lost:
			lc.failures = append(lc.failures, fmt.Sprintf("%s pair at %.1fs: token %d lost while held", phase, time.Since(lc.env.log.start).Seconds(), tok))
		case tok <= lc.last:
			lc.failures = append(lc.failures, fmt.Sprintf("%s pair: token %d after %d", phase, tok, lc.last))
		}
		if err == nil {
			lc.last = tok
			lc.pairs[phase] = append(lc.pairs[phase], lat)
		}
		lc.mu.Unlock()
		if lat > time.Second {
			lc.env.log.add("legit pair took %v", lat.Round(time.Millisecond))
		}
	}
}

// quantile returns the q-quantile of ds (sorted in place; 0 if empty).
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(float64(len(ds))*q+0.999999) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

// check asserts the soak's criteria and prints its figures and summary.
func (env *soakEnv) check(ctx context.Context, lc *legitClient, smp *sampler, cpu [3]cpuSnapshot) {
	t := env.t
	var fails []string
	fail := func(format string, args ...any) { fails = append(fails, fmt.Sprintf(format, args...)) }
	for i := range env.c.Nodes {
		if code, exited := env.c.Exited(i); exited {
			fail("n%d exited with status %d", i+1, code)
		}
	}
	terms, leaders := smp.termsAndLeaders()
	if len(terms) > 1 || len(leaders) > 1 {
		fail("the term or the leader changed: terms %v, leaders %v", terms, leaders)
	}
	lc.mu.Lock()
	quiet, soak, after := slices.Clone(lc.pairs["quiet"]), slices.Clone(lc.pairs["soak"]), slices.Clone(lc.pairs["after"])
	failures, events := slices.Clone(lc.failures), slices.Clone(lc.events)
	lc.mu.Unlock()
	qp99, sp99 := quantile(quiet, 0.99), quantile(soak, 0.99)
	if len(quiet) == 0 || len(soak) == 0 {
		fail("the legitimate client completed %d quiet and %d soak pairs", len(quiet), len(soak))
	} else if sp99 > 2*qp99 {
		fail("the legitimate client's p99 under abuse is %v, more than 2x its quiet %v (%.1fx)", sp99, qp99, float64(sp99)/float64(qp99))
	}
	for i, f := range failures {
		if i == 20 {
			fail("legitimate client: %d more failures", len(failures)-20)
			break
		}
		fail("legitimate client: %s", f)
	}
	if len(events) > 0 {
		left := 0
		for _, ev := range events {
			if !strings.HasPrefix(ev, session.Safe.String()) {
				left++
			}
		}
		fail("the legitimate session left safe %d times: %s", left, strings.Join(events, "; "))
	}
	if st := lc.s.State(); st != session.Safe {
		fail("the legitimate session ends %s", st)
	}
	for i, s := range env.fillers {
		if st := s.State(); st != session.Safe {
			fail("the admin's filler session %d ends %s", i, st)
		}
	}
	if held, err := env.heldBig(ctx); err != nil {
		fail("list the big prefix at the end: %v", err)
	} else if held != soakBigLocks {
		fail("%d of the admin's %d locks under %s are held at the end", held, soakBigLocks, soakBigPrefix)
	}
	for _, name := range env.names {
		st := env.stats(name)
		for _, bad := range st.mustNot {
			if n := st.count(bad); n > 0 {
				fail("%s: %d answers %q (%s)", name, n, bad, st.sample(bad))
			}
		}
	}

	summary := env.summary(quiet, soak, after, smp, cpu)
	t.Logf("timeline:\n%s", env.log)
	t.Logf("one answer of each outcome:\n%s", env.details())
	t.Logf("samples (every node once a second):\n%s", smp.table())
	t.Logf("summary:\n%s", summary)
	if path := os.Getenv("RAFTLOCK_SOAK_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(summary), 0o644); err != nil {
			t.Errorf("write the report: %v", err)
		}
	}
	for _, f := range fails {
		t.Error(f)
	}
}

// heldBig counts the locks under soakBigPrefix that have a holder, read
// by the admin (one page: soakBigLocks is below api.MaxLocksPage).
func (env *soakEnv) heldBig(ctx context.Context) (int, error) {
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// Every page: a page is bounded in bytes (api.MaxAnswerBytes), so
	// 2,000 locks of 4 KB come in many.
	locks, err := env.c.Client(client.WithToken(env.admin)).Locks(rctx, soakBigPrefix)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, l := range locks {
		if len(l.Holders) > 0 {
			n++
		}
	}
	return n, nil
}
