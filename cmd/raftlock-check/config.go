package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/session"
)

// Fault kinds.
const (
	faultKillLeader      = "kill-leader"
	faultKillFollower    = "kill-follower"
	faultPauseLeader     = "pause-leader"
	faultFreezeNode      = "freeze-node"
	faultPauseClient     = "pause-client"
	faultPartitionLeader = "partition-leader"
	faultPartitionSplit  = "partition-split"
	faultPartitionClient = "partition-client"
	faultRestartAll      = "restart-all"
	// The membership faults (membership.go): leadership moved to a
	// follower; a follower removed, wiped and replaced by the spare; the
	// leader removed, wiped and brought back with --join.
	faultTransferLeader = "transfer-leader"
	faultReplaceNode    = "replace-node"
	faultRemoveLeader   = "remove-leader"
	// corrupt-follower (corruption.go): a stopped follower's log
	// damaged; it must refuse to start, and is repaired with --join.
	faultCorruptFollower = "corrupt-follower"
	// The operator actions (operator.go), which revoke grants without any
	// client operation: a backup taken during the run restored into the
	// running cluster; a holding client's ACL token deleted (it gets a new
	// one); every member replaced, one by one, by a new node.
	faultRestore       = "restore"
	faultDeleteToken   = "delete-token"
	faultRotateMembers = "rotate-members"
	// revoke-grant: a holding client's grant revoked by an operator
	// (POST /v1/locks/revoke); its session goes on.
	faultRevokeGrant = "revoke-grant"
	// The disk faults (disks.go): power-loss, slow-disk, fill-disk.
)

// allFaults lists the fault kinds that need no disks of their own:
// --faults all is these and the disk faults (where the machine can mount
// the disks; see Config.DisksIfAble).
var allFaults = []string{faultKillLeader, faultKillFollower, faultPauseLeader, faultFreezeNode, faultPauseClient, faultLateWrite,
	faultPartitionLeader, faultPartitionSplit, faultPartitionClient, faultRestartAll,
	faultTransferLeader, faultReplaceNode, faultRemoveLeader, faultCorruptFollower,
	faultRestore, faultDeleteToken, faultRotateMembers, faultRevokeGrant, faultLateAnswer}

// diskFaults are the disk fault kinds (disks.go). They need root and
// /dev/fuse, and put every data dir on a FUSE mount: "all" includes them
// where the machine can do that and leaves them out, with a warning,
// where it cannot; a run that names them needs it.
var diskFaults = []string{faultPowerLoss, faultSlowDisk, faultFillDisk}

// knownFaults are every fault kind of --faults all without exec holders,
// in the order reports show them.
var knownFaults = append(append([]string(nil), allFaults...), diskFaults...)

// execFaultKinds are the fault kinds aimed at the exec holders
// (exec_faults.go): --faults accepts them with --exec-clients only, and
// "all" includes them then.
var execFaultKinds = []string{faultKillExec, faultFreezeExec}

// isPartition reports whether a fault kind needs iptables.
func isPartition(kind string) bool {
	return kind == faultPartitionLeader || kind == faultPartitionSplit || kind == faultPartitionClient
}

// Config is one run of the checker.
type Config struct {
	// Nodes is the cluster size (3 or 5); node i listens on 127.0.0.(11+i).
	Nodes    int
	Duration time.Duration
	Clients  int
	Locks    int
	// Raftlockd is the server binary; empty: build it with go build into
	// the run's directory.
	Raftlockd string
	// Out is where logs, and on a violation the history and its
	// visualisation, go; empty: a new temp dir.
	Out  string
	Seed int64
	// UnsafeFault is passed to raftlockd --unsafe-fault (testing the
	// checker: the service is then broken on purpose).
	UnsafeFault string
	// Faults are the fault kinds to inject.
	Faults []string
	// DisksIfAble: the disk faults in Faults came with "all", and are left
	// out (with a warning in the report) where the nodes' disks cannot be
	// mounted (not root, no /dev/fuse, the mount fails). Without it a run
	// with disk faults that cannot mount them fails.
	DisksIfAble bool
	// TTL, LockDelay and Grace (the grace period) of the clients'
	// sessions.
	TTL       time.Duration
	LockDelay time.Duration
	Grace     time.Duration
	// GapMin..GapMax is the quiet time between two faults.
	GapMin, GapMax time.Duration
	// CheckTimeout bounds the linearizability check.
	CheckTimeout time.Duration
	// StopOnViolation ends the run early once a check other than
	// linearizability fails (they are run every second).
	StopOnViolation bool
	// LogLevel of the raftlockd processes.
	LogLevel string
	// ClientCommand starts a client process; the checker appends
	// "--config JSON". Empty: this executable with "client".
	ClientCommand []string
	// ClientEnv is added to the client processes' environment.
	ClientEnv []string
	// NaiveShare of the clients' acquires are the naive waiter's: one HTTP
	// request without the Go client's retries, taking no_leader at its
	// word (see naiveWait).
	NaiveShare float64
	// MaxHoldShare of the Go clients' acquires set a hold limit
	// (max_hold) of maxHoldMin..maxHoldMax: the cluster revokes the grant
	// then (kind max_hold), and the client's Lost() closes first.
	MaxHoldShare float64
	// TLS runs the cluster with TLS: certificates made for the run, HTTPS
	// and client certificates on the API, mutual TLS between the nodes.
	TLS bool
	// ACL runs the cluster with ACLs on (raftlockd --acl): the checker
	// bootstraps the management token and hands the clients a token that
	// may write only under the run's lock prefix.
	ACL bool

	// WorkerClients of the clients (the last ones) drive the workload
	// through a conformance worker (worker.go) started with the command
	// line Worker; empty Worker: the Go worker, "raftlock-conformance
	// worker", built into the run's directory.
	WorkerClients int
	Worker        []string

	// Permits, above 0, makes the run a semaphore run: every lock is taken
	// as a semaphore of that many slots (session.Permits), and the checks
	// judge each slot as a lock of its own plus the semaphore's bound
	// (semaphore.go). The Go clients only (no --worker-clients), and no
	// naive waiter.
	Permits int

	// MixedKinds makes every acquire pick its kind at random: exclusive,
	// shared, or a semaphore of 1 to maxMixedPermits permits (mixed.go).
	// An acquire whose kind disagrees with the lock's while it is held or
	// waited for is refused (invalid_argument), so a name's kind changes
	// between tenures only. The Go clients only, no naive waiter, no
	// --permits.
	MixedKinds bool

	// UnsafeClient and UnsafeResourceFence break a promise on purpose in
	// the checker's own processes, for its "can it fail" tests: the Go
	// client's (--unsafe-client, in the client processes) and the
	// in-memory resource's fence (--unsafe-resource-fence). Both exist
	// only in a checker built with -tags raftlock_faults (unsafe_on.go);
	// the default build refuses them.
	UnsafeClient        string
	UnsafeResourceFence string

	// NodeFlags are more raftlockd flags for every node (e.g. snapshots
	// every few entries, so that power losses follow snapshots closely).
	NodeFlags []string

	// ResourcePostgres, when set, is the DSN of a PostgreSQL database that
	// is the protected resource: every write is a transaction fenced by
	// sequencer/sqlfence (resource_pg.go). Its tables raftlock_fence and
	// checker_writes are dropped and made anew.
	ResourcePostgres string
	// UnfencedWriter (TESTING THE CHECKER) makes the database resource's
	// writer skip the fence: it trusts its lock alone.
	UnfencedWriter bool

	// ClientProto is the clients' protocol: "http" (HTTP/1.1), "http2"
	// (HTTP/2 alone) or "stream" (the nodes serve --stream-addr and the
	// Go clients use it).
	ClientProto string

	// ExecClients are the exec holders (exec.go): each runs `raftlock
	// exec` with a writer as CMD, again and again, for one of
	// (ExecClients+1)/2 locks of their own; the kill-exec and freeze-exec
	// faults aim at them. Raftlock is the raftlock CLI binary (empty: go
	// build it into the run's directory); UnsafeExecNoGuard (TESTING THE
	// CHECKER) passes exec --unsafe-no-guard (a -tags raftlock_faults
	// build, then), which starts CMD without its guard.
	ExecClients       int
	Raftlock          string
	UnsafeExecNoGuard bool
}

// The protocols of --client-proto.
const (
	protoHTTP   = "http"
	protoHTTP2  = "http2"
	protoStream = "stream"
)

// defaultConfig returns the defaults of the flags.
func defaultConfig() Config {
	return Config{Nodes: 3, Duration: 2 * time.Minute, Clients: 6, Locks: 3, Seed: 1,
		Faults: append([]string(nil), knownFaults...), DisksIfAble: true, TTL: 3 * time.Second, LockDelay: 10 * time.Second,
		Grace: session.DefaultGracePeriod, GapMin: 2 * time.Second, GapMax: 5 * time.Second, CheckTimeout: 5 * time.Minute, LogLevel: "info",
		NaiveShare: 0.1, TLS: true, ACL: true}
}

// parseFlags parses the checker's command line.
func parseFlags(args []string, stderr io.Writer) (Config, error) {
	cfg := defaultConfig()
	fs := flag.NewFlagSet("raftlock-check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: raftlock-check [flags]\n       raftlock-check analyze HISTORY.jsonl\n\n"+
			"Runs a real raftlock cluster on 127.0.0.11-15 with client processes, injects faults\n"+
			"and checks the history (needs root for partitions and iptables).\n\nflags:\n")
		fs.PrintDefaults()
	}
	fs.IntVar(&cfg.Nodes, "nodes", cfg.Nodes, "cluster size: 3 or 5")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long to run the workload and faults")
	fs.IntVar(&cfg.Clients, "clients", cfg.Clients, "number of client processes")
	fs.IntVar(&cfg.Locks, "locks", cfg.Locks, "number of locks the clients contend for")
	fs.StringVar(&cfg.Raftlockd, "raftlockd", "", "raftlockd binary (default: go build it into the run's directory)")
	fs.StringVar(&cfg.Out, "out", "", "directory for logs, history and visualisation (default: a new temp dir)")
	fs.Int64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the fault schedule and the clients' choices")
	fs.StringVar(&cfg.UnsafeFault, "unsafe-fault", "", "TESTING THE CHECKER: pass --unsafe-fault to raftlockd (skip-lock-delay, local-reads, revoke-without-notice, semaphore-extra-slot, watch-drops-changes, revoke-slot-early)")
	nodeFlags := fs.String("raftlockd-flags", "", "more raftlockd flags for every node, space-separated (e.g. \"--snapshot-threshold 64 --snapshot-interval 200ms\")")
	faults := fs.String("faults", "all", "comma-separated fault kinds, \"all\" or \"none\": "+strings.Join(append(slices.Clone(knownFaults), execFaultKinds...), ", ")+
		" (with --exec-clients only, \"all\" then including them: "+strings.Join(execFaultKinds, ", ")+")"+
		" (\"all\": every kind; the disk faults, "+strings.Join(diskFaults, ", ")+
		", need root and /dev/fuse and put each node's data dir on a FUSE mount over a tmpfs: \"all\" leaves them out, with a warning, where that cannot be done; named, they must run)")
	fs.DurationVar(&cfg.TTL, "ttl", cfg.TTL, "session TTL of the clients")
	fs.DurationVar(&cfg.LockDelay, "lock-delay", cfg.LockDelay, "lock-delay of the clients' sessions")
	fs.DurationVar(&cfg.Grace, "grace", cfg.Grace, "grace period of the clients' sessions (how long one stays in jeopardy before its client declares it expired); freeze-node lasts longer than ttl + grace")
	fs.DurationVar(&cfg.GapMin, "gap-min", cfg.GapMin, "shortest quiet time between faults")
	fs.DurationVar(&cfg.GapMax, "gap-max", cfg.GapMax, "longest quiet time between faults")
	fs.DurationVar(&cfg.CheckTimeout, "check-timeout", cfg.CheckTimeout, "give up the linearizability check after this long")
	fs.StringVar(&cfg.ClientProto, "client-proto", protoHTTP, "protocol of the clients: http (HTTP/1.1), http2 (HTTP/2 alone: h2 over TLS, h2c without; the workers' proxies too) or stream (the nodes serve --stream-addr, the Go clients use the stream protocol; HTTP for each node's first request)")
	fs.BoolVar(&cfg.StopOnViolation, "stop-on-violation", false, "end the run as soon as a check other than linearizability fails")
	fs.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "log level of the raftlockd processes")
	fs.Float64Var(&cfg.NaiveShare, "naive-share", cfg.NaiveShare, "share of the acquires sent by the naive waiter (one request, no retries, no_leader taken at its word)")
	fs.Float64Var(&cfg.MaxHoldShare, "max-hold-share", 0, "share of the Go clients' acquires that set a hold limit (max_hold) of "+maxHoldMin.String()+" to "+maxHoldMax.String()+": the cluster revokes the grant then, an expected end for the checks")
	fs.BoolVar(&cfg.TLS, "tls", cfg.TLS, "run the cluster with TLS: a CA and certificates made into --out, HTTPS and client certificates on the API, mutual TLS between the nodes")
	fs.BoolVar(&cfg.ACL, "acl", cfg.ACL, "run the cluster with ACLs on: the checker bootstraps them and the clients use a token with write:"+lockPrefix+" only")
	fs.IntVar(&cfg.WorkerClients, "worker-clients", 0, "how many of the clients (the last ones) drive the workload through a conformance worker (docs/CONFORMANCE.md) instead of the Go client")
	fs.StringVar(&cfg.ResourcePostgres, "resource-postgres", "", "a PostgreSQL `DSN`: the protected resource is that database, every write a transaction fenced by the SQL fence (its tables raftlock_fence and checker_writes are dropped and made anew)")
	fs.BoolVar(&cfg.UnfencedWriter, "unsafe-unfenced-writer", false, "TESTING THE CHECKER: the database resource's writer skips the fence (with --resource-postgres)")
	fs.BoolVar(&cfg.MixedKinds, "mixed-kinds", false, "every acquire picks its kind at random: exclusive, shared, or a semaphore of 1 to 3 permits (one refused with invalid_argument while the lock is held or waited for in another kind); the checks judge every tenure by its kind")
	fs.IntVar(&cfg.Permits, "permits", 0, "above 0: a semaphore run, every lock taken with that many permits (slots); the checks judge each slot as a lock and at most N writers at once")
	fs.IntVar(&cfg.ExecClients, "exec-clients", 0, "exec holders: each runs `raftlock exec NAME -- WRITER` again and again (WRITER writes to the resource with RAFTLOCK_SEQUENCER until its tenure ends), for locks of their own; --faults all then includes kill-exec (SIGKILL of a holding exec) and freeze-exec (SIGSTOP past its lease, then SIGCONT); the checks judge their writes, and that each writer is dead before its lock is granted again")
	fs.StringVar(&cfg.Raftlock, "raftlock", "", "raftlock CLI binary for the exec holders (default: go build it into the run's directory)")
	fs.BoolVar(&cfg.UnsafeExecNoGuard, "unsafe-exec-no-guard", false, "TESTING THE CHECKER: the exec holders run exec --unsafe-no-guard (CMD without its guard; the CLI is built with -tags raftlock_faults)")
	addUnsafeFlags(fs, &cfg)
	worker := fs.String("worker", "", "the conformance worker's command line, space-separated, e.g. \"python3 clients/python/conformance-worker\" (default: the Go worker, raftlock-conformance worker, built into the run's directory)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	cfg.Worker = strings.Fields(*worker)
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	kinds, err := parseFaults(*faults)
	if err != nil {
		return cfg, err
	}
	if cfg.ExecClients > 0 && execFromAll(*faults) {
		for _, k := range execFaultKinds {
			if !slices.Contains(kinds, k) {
				kinds = append(kinds, k)
			}
		}
	}
	cfg.Faults = kinds
	cfg.DisksIfAble = disksFromAll(*faults)
	cfg.NodeFlags = strings.Fields(*nodeFlags)
	return cfg, cfg.validate()
}

// disksFromAll reports whether the --faults list s brings the disk
// faults through "all" alone (none of them named).
func disksFromAll(s string) bool {
	all := false
	for _, k := range strings.Split(s, ",") {
		switch k = strings.TrimSpace(k); {
		case k == "all" || k == "" && strings.TrimSpace(s) == "":
			all = true
		case isDiskFault(k):
			return false
		}
	}
	return all
}

// execFromAll reports whether the --faults list s asks for "all".
func execFromAll(s string) bool {
	for _, k := range strings.Split(s, ",") {
		if k = strings.TrimSpace(k); k == "all" || k == "" && strings.TrimSpace(s) == "" {
			return true
		}
	}
	return false
}

// parseFaults parses the --faults list ("all": every kind, the disk
// faults included).
func parseFaults(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "all", "":
		return append([]string(nil), knownFaults...), nil
	case "none":
		return nil, nil
	}
	var out []string
	seen := map[string]bool{}
	for _, k := range strings.Split(s, ",") {
		k = strings.TrimSpace(k)
		known := false
		if k == "all" {
			for _, a := range knownFaults {
				if !seen[a] {
					seen[a] = true
					out = append(out, a)
				}
			}
			continue
		}
		for _, a := range knownFaults {
			known = known || a == k
		}
		known = known || isExecFault(k)
		if !known {
			return nil, fmt.Errorf("--faults: unknown fault %q (want %s)", k, strings.Join(append(slices.Clone(knownFaults), execFaultKinds...), ", "))
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out, nil
}

func (c Config) validate() error {
	switch {
	case c.UnfencedWriter && c.ResourcePostgres == "":
		return fmt.Errorf("--unsafe-unfenced-writer needs --resource-postgres (the in-memory resource always fences)")
	case c.ClientProto != "" && c.ClientProto != protoHTTP && c.ClientProto != protoHTTP2 && c.ClientProto != protoStream:
		return fmt.Errorf("--client-proto %q: want http, http2 or stream", c.ClientProto)
	case c.Nodes != 3 && c.Nodes != 5:
		return fmt.Errorf("--nodes %d: want 3 or 5", c.Nodes)
	case c.Clients < 1 || c.Clients > 64:
		return fmt.Errorf("--clients %d: want 1 to 64", c.Clients)
	case c.Locks < 1 || c.Locks > 64:
		return fmt.Errorf("--locks %d: want 1 to 64", c.Locks)
	case c.Duration <= 0:
		return errors.New("--duration must be positive")
	case c.TTL < time.Second:
		return fmt.Errorf("--ttl %v: at least 1s", c.TTL)
	case c.Grace <= 0:
		return fmt.Errorf("--grace %v: must be positive", c.Grace)
	case c.LockDelay <= 0:
		return fmt.Errorf("--lock-delay %v: must be positive (the fencing check relies on it)", c.LockDelay)
	case c.GapMin < 0 || c.GapMax < c.GapMin:
		return fmt.Errorf("--gap-min %v, --gap-max %v: want 0 <= min <= max", c.GapMin, c.GapMax)
	case !(c.NaiveShare >= 0 && c.NaiveShare <= 1):
		return fmt.Errorf("--naive-share %v: want 0 to 1", c.NaiveShare)
	case !(c.MaxHoldShare >= 0 && c.MaxHoldShare <= 1):
		return fmt.Errorf("--max-hold-share %v: want 0 to 1", c.MaxHoldShare)
	case c.WorkerClients < 0 || c.WorkerClients > c.Clients:
		return fmt.Errorf("--worker-clients %d: want 0 to --clients (%d)", c.WorkerClients, c.Clients)
	case c.Permits < 0 || c.Permits > api.MaxPermits:
		return fmt.Errorf("--permits %d: want 0 (plain locks) to %d", c.Permits, api.MaxPermits)
	case c.MixedKinds && (c.Permits > 0 || c.WorkerClients > 0):
		return fmt.Errorf("--mixed-kinds: not with --permits or --worker-clients (the Go clients pick the kinds)")
	case c.ExecClients < 0 || c.ExecClients > 16:
		return fmt.Errorf("--exec-clients %d: want 0 to 16", c.ExecClients)
	case c.ExecClients > 0 && c.MixedKinds:
		return fmt.Errorf("--exec-clients: not with --mixed-kinds (exec takes exclusive locks, or with --permits semaphore slots)")
	case c.ExecClients == 0 && slices.ContainsFunc(c.Faults, isExecFault):
		return fmt.Errorf("--faults %s: kill-exec and freeze-exec need --exec-clients", strings.Join(c.Faults, ","))
	case c.UnsafeExecNoGuard && c.ExecClients == 0:
		return fmt.Errorf("--unsafe-exec-no-guard needs --exec-clients")
	case c.ExecClients > 0 && c.LockDelay-session.LostMargin(c.TTL, c.LockDelay) < execKillGrace+500*time.Millisecond:
		return fmt.Errorf("--lock-delay %v is too short for the exec holders (--kill-grace %v): exec refuses it", c.LockDelay, execKillGrace)
	case c.Permits > 0 && c.WorkerClients > 0:
		return fmt.Errorf("--permits %d: the conformance workers take no semaphores; use --worker-clients 0", c.Permits)
	}
	if err := checkUnsafe(c); err != nil {
		return err
	}
	// A paused client wakes after at most TTL+clientPauseExtra and writes
	// at once; the fencing check is sound only if that stays well inside
	// the lock-delay (see checkFence).
	if slack := c.LockDelay - (clientPauseMax(c.TTL) + prepMax); slack < 2*time.Second {
		return fmt.Errorf("--lock-delay %v is too short for --ttl %v: it must exceed the longest client pause (%v) plus a write interval by at least 2s",
			c.LockDelay, c.TTL, clientPauseMax(c.TTL))
	}
	return nil
}
