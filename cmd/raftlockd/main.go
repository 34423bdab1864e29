// Command raftlockd runs a raftlock server: one replica of the lock
// service, or with --dev a local three-node cluster in one process.
//
//	raftlockd --id n1 --data-dir /var/lib/raftlock/n1 \
//	          --raft-addr 127.0.0.1:7101 --http-addr 127.0.0.1:7001 \
//	          --peers n1=127.0.0.1:7101,n2=127.0.0.1:7102,n3=127.0.0.1:7103
//	raftlockd --dev
//
// With --tls-cert, --tls-key and --tls-ca it serves HTTPS on --http-addr
// and mutual TLS on --raft-addr; a node on an address other machines can
// reach refuses to start without them, unless --insecure.
//
// Its other commands work offline, on a stopped node's data dir, each
// with only its own flags (commands.go; raftlockd help COMMAND):
//
//	raftlockd recover --peers-file peers.json --data-dir D --min-token N
//	raftlockd migrate-log-store --data-dir D --to wal
//	raftlockd check-data --data-dir D
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/node/nodehttp"
	"github.com/raftlock/raftlock/transport/httpapi"
	"github.com/raftlock/raftlock/transport/raftnet"
	"github.com/raftlock/raftlock/transport/stream"
	"github.com/raftlock/raftlock/transport/tlsconf"

	"github.com/hashicorp/go-hclog"

	"github.com/raftlock/raftlock/cmd/internal/buildinfo"
	"github.com/raftlock/raftlock/node"
)

func main() {
	os.Exit(mainIO(os.Getenv, os.Args[1:], os.Stdout, os.Stderr))
}

// mainIO is main with its environment and output given.
func mainIO(getenv func(string) string, args []string, stdout, stderr io.Writer) int {
	if dir := getenv(checkEnv); dir != "" {
		deprecated(stderr, checkEnv, "raftlockd check-data --data-dir DIR")
		return runCheckChild(dir, stderr)
	}
	return runIO(args, stdout, stderr)
}

type options struct {
	// version: print the version and exit (--version).
	version                                               bool
	id, dataDir, raftAddr, raftAdvertise, httpAddr, peers string
	debugAddr                                             string
	dev                                                   bool
	logLevel                                              string
	logJSON                                               bool
	failoverGrace                                         time.Duration
	heartbeat, election, leaderLease                      time.Duration
	limits                                                api.Limits
	faults                                                node.Faults
	// TLS: the node's certificate and key and the cluster's CA (PEM
	// files); clientCertAuth: the API requires client certificates too;
	// insecure: plaintext on a non-loopback address is meant.
	tlsCert, tlsKey, tlsCA string
	clientCertAuth         bool
	insecure               bool
	// acl: ACLs on (node.Config.ACL).
	acl      bool
	tlsFiles *tlsconf.TLS // loaded by run
	// backup: snapshot, --restore and --recover flags (restore.go).
	backup  backupOptions
	members membershipOptions
	// metricsOpen serves GET /metrics without a token under --acl.
	metricsOpen bool
	// metricsAddr: the plain health and metrics listener (--metrics-addr).
	metricsAddr string
	// logStore: --log-store and --migrate-log-store (migrate.go).
	logStore logStoreOptions
	// maxConnsPerIP and idleTimeout: --max-conns-per-ip and
	// --http-idle-timeout, on both ports.
	maxConnsPerIP int
	idleTimeout   time.Duration
	// prefixWatchers and prefixWatchersPerToken: --max-prefix-watchers
	// and --max-prefix-watchers-per-token (node-local caps).
	prefixWatchers, prefixWatchersPerToken int
	// blockingQueries and blockingQueriesPerToken: --max-blocking-queries
	// and --max-blocking-queries-per-token.
	blockingQueries, blockingQueriesPerToken int
	// answerBytes and answerBytesPerToken: --max-answer-bytes-in-flight
	// and --max-answer-bytes-in-flight-per-token.
	answerBytes, answerBytesPerToken int64
	// debugRemote allows a non-loopback --debug-addr.
	debugRemote bool
	// streamAddr: the stream protocol's listener (--stream-addr; "": off).
	streamAddr string
}

// serveFlags returns the flag set of serve, bound to o.
func serveFlags(o *options, stderr io.Writer) *flag.FlagSet {
	fs := newFlagSet("raftlockd", stderr)
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	fs.StringVar(&o.id, "id", "", "this node's id (e.g. n1)")
	fs.StringVar(&o.dataDir, "data-dir", "", "directory for the Raft log, stable store and snapshots (--dev: default a new temp dir)")
	fs.StringVar(&o.raftAddr, "raft-addr", "", "host:port for Raft traffic; outgoing Raft connections use its IP")
	fs.StringVar(&o.raftAdvertise, "raft-advertise", "", "host:port peers dial for Raft (default --raft-addr); a DNS name is kept as given, not resolved, so that peers find the node after its IP changes")
	fs.StringVar(&o.httpAddr, "http-addr", "127.0.0.1:7001", "host:port of the HTTP API")
	fs.StringVar(&o.debugAddr, "debug-addr", "", "host:port to serve Go's pprof endpoints on, plaintext and without a token (default: off; a loopback address unless --debug-allow-remote)")
	fs.BoolVar(&o.debugRemote, "debug-allow-remote", false, "allow a --debug-addr that is not a loopback address: anyone who reaches it can profile the node")
	fs.StringVar(&o.peers, "peers", "", "bootstrap members id=raft-addr,... (used only with an empty data dir, once every peer answered that it is new too)")
	fs.BoolVar(&o.dev, "dev", false, "run a local 3-node cluster in this process (HTTP 127.0.0.1:7001-7003, Raft 127.0.0.1:7101-7103)")
	fs.StringVar(&o.logLevel, "log-level", "info", "trace, debug, info, warn or error")
	fs.BoolVar(&o.logJSON, "log-json", false, "log JSON lines")
	fs.DurationVar(&o.failoverGrace, "failover-grace", node.DefaultFailoverGrace,
		fmt.Sprintf("extra lease time every session gets when a new leader takes over (0s to %v; 0s: none)", node.MaxFailoverGrace))
	raftRange := fmt.Sprintf("%v to %v", node.MinRaftTimeout, node.MaxRaftTimeout)
	fs.DurationVar(&o.heartbeat, "raft-heartbeat-timeout", node.DefaultHeartbeatTimeout,
		"Raft heartbeat timeout ("+raftRange+"; at most --raft-election-timeout)")
	fs.DurationVar(&o.election, "raft-election-timeout", node.DefaultElectionTimeout,
		"Raft election timeout ("+raftRange+"; at least --raft-heartbeat-timeout)")
	fs.DurationVar(&o.leaderLease, "raft-leader-lease-timeout", node.DefaultLeaderLeaseTimeout,
		"Raft leader lease timeout, not a read lease ("+raftRange+"; at most --raft-heartbeat-timeout)")
	fs.IntVar(&o.limits.Sessions, "max-sessions", api.DefaultMaxSessions, "most sessions open at once (every node the same)")
	fs.IntVar(&o.limits.Locks, "max-locks", api.DefaultMaxLocks, "most locks held, waited for or delayed at once (every node the same)")
	fs.IntVar(&o.limits.WaitersPerLock, "max-waiters-per-lock", api.DefaultMaxWaitersPerLock, "most waiters in one lock's queue (every node the same)")
	fs.IntVar(&o.limits.LocksPerSession, "max-locks-per-session", api.DefaultMaxLocksPerSession, "most holds and waits of one session, one per lock and holder id (every node the same)")
	fs.IntVar(&o.limits.SessionsPerToken, "max-sessions-per-token", api.DefaultMaxSessionsPerToken, "most open sessions of one ACL token, with --acl (every node the same)")
	fs.IntVar(&o.limits.LocksPerToken, "max-locks-per-token", api.DefaultMaxLocksPerToken, "most holds and waits of one ACL token's sessions together, with --acl (every node the same)")
	fs.IntVar(&o.limits.WaitersPerToken, "max-waiters-per-token", api.DefaultMaxWaitersPerToken, "most waits of one ACL token's sessions together, with --acl (every node the same)")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "this node's certificate (PEM): HTTPS on --http-addr, mutual TLS on --raft-addr (with --tls-key, --tls-ca)")
	fs.StringVar(&o.tlsKey, "tls-key", "", "the key of --tls-cert (PEM)")
	fs.StringVar(&o.tlsCA, "tls-ca", "", "the cluster's CA certificate (PEM): peers (and, with --client-cert-auth, clients) must present a certificate it signed")
	fs.BoolVar(&o.clientCertAuth, "client-cert-auth", false, "the API requires a client certificate signed by --tls-ca")
	fs.BoolVar(&o.insecure, "insecure", false, "allow a non-loopback --http-addr or --raft-addr without TLS: anyone who can reach them can use and join the cluster")
	fs.BoolVar(&o.acl, "acl", false, "require an ACL token (Authorization: Bearer) on every API call but /v1/health; raftlock acl bootstrap makes the first (every node the same)")
	fs.BoolVar(&o.metricsOpen, "metrics-open", false, "with --acl, serve GET /metrics without a token (otherwise it needs one with read on the empty prefix)")
	fs.IntVar(&o.prefixWatchers, "max-prefix-watchers", api.DefaultMaxPrefixWatchers, "most prefix watches (GET /v1/locks?index=) this node serves at once")
	fs.IntVar(&o.prefixWatchersPerToken, "max-prefix-watchers-per-token", api.DefaultMaxPrefixWatchersPerToken, "most prefix watches of one ACL token this node serves at once, with --acl")
	fs.IntVar(&o.blockingQueries, "max-blocking-queries", api.DefaultMaxBlockingQueries, "most blocking queries (watches: GET /v1/lock?index=, /v1/locks?index=, /v1/overview?index=) this node serves or forwards at once")
	fs.IntVar(&o.blockingQueriesPerToken, "max-blocking-queries-per-token", api.DefaultMaxBlockingQueriesPerToken, "most blocking queries of one ACL token this node serves or forwards at once, with --acl")
	fs.Int64Var(&o.answerBytes, "max-answer-bytes-in-flight", api.DefaultMaxAnswerBytesInFlight, "most bytes of listing pages and prefix watch answers this node builds and sends at once, each counted 1 MiB (api.MaxAnswerBytes)")
	fs.Int64Var(&o.answerBytesPerToken, "max-answer-bytes-in-flight-per-token", api.DefaultMaxAnswerBytesInFlightPerToken, "most bytes of those answers of one ACL token at once, with --acl")
	fs.IntVar(&o.maxConnsPerIP, "max-conns-per-ip", api.DefaultMaxConnsPerIP,
		fmt.Sprintf("most connections one source IP holds open on each port (%d to %d); on the Raft port the members' IPs are exempt", api.MinMaxConnsPerIP, api.MaxMaxConnsPerIP))
	fs.DurationVar(&o.idleTimeout, "http-idle-timeout", api.DefaultIdleTimeout,
		fmt.Sprintf("close an API connection that carries no request for this long (%v to %v), on both ports", api.MinIdleTimeout, api.MaxIdleTimeout))
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "host:port of a plain-HTTP listener serving only GET /v1/health and GET /metrics, "+
		"with no client certificate or token (for probes and scrapers; default: off)")
	fs.StringVar(&o.streamAddr, "stream-addr", "", "host:port of the stream protocol (the API in binary frames, many requests per connection; "+
		"TLS as --http-addr; default: off)")
	addFaultFlags(fs, &o.faults)
	addBackupFlags(fs, &o.backup)
	addMembershipFlags(fs, &o.members)
	addLogStoreFlags(fs, &o.logStore)
	return fs
}

// parse parses and checks the serve flags. A flag the flag package
// refuses is printed to stderr, with a hint (reportedError); -h comes
// back as flag.ErrHelp, unprinted: runServe prints the help on stdout. A
// deprecated flag prints its WARN line here.
func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := serveFlags(&o, stderr)
	if err := fs.Parse(args); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "raftlockd: %s\n", flagErrorHint(err, fs, "raftlockd --help"))
		}
		return o, reportedError{err}
	}
	if o.backup.recover != "" {
		deprecated(stderr, "--recover", "raftlockd recover --peers-file FILE --data-dir DIR --min-token N")
	}
	if o.logStore.migrate != "" {
		deprecated(stderr, "--migrate-log-store", "raftlockd migrate-log-store --data-dir DIR --to STORE")
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.version {
		return o, nil
	}
	if o.debugAddr != "" && !o.debugRemote && !tlsconf.IsLoopback(o.debugAddr) {
		return o, fmt.Errorf("--debug-addr %s is not a loopback address: its profiling endpoints are plaintext and need no token; "+
			"serve them on 127.0.0.1, or pass --debug-allow-remote", o.debugAddr)
	}
	if hclog.LevelFromString(o.logLevel) == hclog.NoLevel {
		return o, fmt.Errorf("--log-level %q: want trace, debug, info, warn or error", o.logLevel)
	}
	if err := o.validateDurations(); err != nil {
		return o, err
	}
	if err := o.limits.Check(); err != nil {
		return o, err
	}
	if o.prefixWatchers < 1 || o.prefixWatchersPerToken < 1 {
		return o, fmt.Errorf("--max-prefix-watchers %d and --max-prefix-watchers-per-token %d: want 1 or more", o.prefixWatchers, o.prefixWatchersPerToken)
	}
	if o.blockingQueries < 1 || o.blockingQueriesPerToken < 1 {
		return o, fmt.Errorf("--max-blocking-queries %d and --max-blocking-queries-per-token %d: want 1 or more", o.blockingQueries, o.blockingQueriesPerToken)
	}
	if o.answerBytes < api.MaxAnswerBytes || o.answerBytesPerToken < api.MaxAnswerBytes {
		return o, fmt.Errorf("--max-answer-bytes-in-flight %d and --max-answer-bytes-in-flight-per-token %d: want %d (one answer) or more", o.answerBytes, o.answerBytesPerToken, api.MaxAnswerBytes)
	}
	if o.maxConnsPerIP < api.MinMaxConnsPerIP || o.maxConnsPerIP > api.MaxMaxConnsPerIP {
		return o, fmt.Errorf("--max-conns-per-ip %d: want %d to %d", o.maxConnsPerIP, api.MinMaxConnsPerIP, api.MaxMaxConnsPerIP)
	}
	if err := node.CheckIdleTimeout("--http-idle-timeout", o.idleTimeout); err != nil {
		return o, err
	}
	if err := o.backup.check(o.dev, o.dataDir); err != nil {
		return o, err
	}
	if o.backup.recover != "" {
		return o, nil // runRecover needs --data-dir only
	}
	if err := o.logStore.check(o.dev, o.dataDir); err != nil {
		return o, err
	}
	if o.logStore.migrate != "" {
		return o, nil // runMigrate needs --data-dir only
	}
	if err := o.members.check(o.peers, o.dev); err != nil {
		return o, err
	}
	if o.dev && o.metricsAddr != "" {
		return o, errors.New("--metrics-addr is for real nodes: --dev's nodes serve /v1/health and /metrics on their HTTP ports")
	}
	if o.metricsAddr != "" {
		if _, _, err := net.SplitHostPort(o.metricsAddr); err != nil {
			return o, fmt.Errorf("--metrics-addr %q is not host:port (like 0.0.0.0:9101)", o.metricsAddr)
		}
	}
	if o.streamAddr != "" {
		if _, _, err := net.SplitHostPort(o.streamAddr); err != nil {
			return o, fmt.Errorf("--stream-addr %q is not host:port (like 127.0.0.1:7201)", o.streamAddr)
		}
		if o.dev {
			return o, errors.New("--stream-addr is for real nodes: --dev's three nodes serve HTTP only")
		}
	}
	if o.dev {
		if o.tls() || o.clientCertAuth || o.insecure {
			return o, errors.New("--dev is plaintext on 127.0.0.1: --tls-cert, --tls-key, --tls-ca, --client-cert-auth and --insecure are for real nodes")
		}
		return o, nil
	}
	if o.id == "" || o.dataDir == "" || o.raftAddr == "" || o.httpAddr == "" {
		return o, errors.New("--id, --data-dir, --raft-addr and --http-addr are required (or use --dev)")
	}
	return o, o.checkTLS()
}

// tls reports whether any of the TLS files is given.
func (o options) tls() bool { return o.tlsCert != "" || o.tlsKey != "" || o.tlsCA != "" }

// checkTLS checks the TLS flags: all three files or none; and without
// them, only loopback addresses unless --insecure.
func (o options) checkTLS() error {
	switch {
	case o.tls() && (o.tlsCert == "" || o.tlsKey == "" || o.tlsCA == ""):
		return errors.New("TLS needs all of --tls-cert, --tls-key and --tls-ca (raftlock tls init makes them)")
	case o.tls() && o.insecure:
		return errors.New("--insecure is for running without TLS; drop it or the --tls-* flags")
	case o.clientCertAuth && !o.tls():
		return errors.New("--client-cert-auth needs TLS: --tls-cert, --tls-key and --tls-ca")
	case o.tls() || o.insecure:
		return nil
	}
	for _, a := range []struct{ flag, addr string }{{"--http-addr", o.httpAddr}, {"--raft-addr", o.raftAddr}, {"--raft-advertise", o.raftAdvertise}, {"--stream-addr", o.streamAddr}} {
		if a.addr != "" && !tlsconf.IsLoopback(a.addr) {
			return fmt.Errorf("%s %s is not a loopback address: refusing to run without TLS (give --tls-cert, --tls-key and --tls-ca; "+
				"raftlock tls init makes them), or pass --insecure to serve it in plaintext, to anyone who can reach it", a.flag, a.addr)
		}
	}
	return nil
}

// reportedError is an error the flag package has already printed, with the
// usage; run does not print it again.
type reportedError struct{ error }

func (e reportedError) Unwrap() error { return e.error }

// validateDurations checks every duration flag, before anything starts. Its
// errors (invalid_argument *api.Error) name the flag, the value and the
// allowed range. The ranges are node's (CheckFailoverGrace,
// CheckRaftTimeouts), so a flag accepted here is never refused by node.New.
func (o options) validateDurations() error {
	if err := node.CheckFailoverGrace("--failover-grace", o.failoverGrace); err != nil {
		return err
	}
	return node.CheckRaftTimeouts(
		node.Timeout{Name: "--raft-heartbeat-timeout", Value: o.heartbeat},
		node.Timeout{Name: "--raft-election-timeout", Value: o.election},
		node.Timeout{Name: "--raft-leader-lease-timeout", Value: o.leaderLease})
}

// message is err as printed: an API error (a refused flag value) without
// its code.
func message(err error) string {
	if e, ok := err.(*api.Error); ok {
		return e.Message
	}
	return err.Error()
}

// parsePeers parses "n1=host:port,n2=host:port".
func parsePeers(s string) ([]node.Peer, error) {
	if s == "" {
		return nil, nil
	}
	var peers []node.Peer
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("--peers: %q is not id=host:port", part)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("--peers: %q: %w", part, err)
		}
		if seen[id] {
			return nil, fmt.Errorf("--peers: id %q twice", id)
		}
		seen[id] = true
		peers = append(peers, node.Peer{ID: id, RaftAddr: addr})
	}
	return peers, nil
}

// run runs raftlockd with args; --version and the help print to
// os.Stdout, all else goes to stderr.
func run(args []string, stderr io.Writer) int { return runIO(args, os.Stdout, stderr) }

// runIO is run with the standard output given: the command args name
// (commands.go), or serve.
func runIO(args []string, stdout, stderr io.Writer) int { return dispatch(args, stdout, stderr) }

// runServe is raftlockd serve: it runs one node, or with --dev three, until
// a signal. The deprecated --recover and --migrate-log-store run those
// commands instead.
func runServe(args []string, stdout, stderr io.Writer) int {
	o, err := parse(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printOverview(stdout)
			return 0
		}
		if !errors.As(err, new(reportedError)) {
			fmt.Fprintf(stderr, "raftlockd: %s\n", message(err))
		}
		return 2
	}
	if o.version {
		fmt.Fprint(stdout, buildinfo.Text("raftlockd"))
		return 0
	}
	if o.backup.recover != "" {
		return runRecover(recoverOptions{dataDir: o.dataDir, peersFile: o.backup.recover, minToken: o.backup.minToken,
			minTokenSet: o.backup.minTokenSet, hold: o.backup.hold, log: logOptions{o.logLevel, o.logJSON}}, true, stderr)
	}
	if o.logStore.migrate != "" {
		return runMigrate(migrateOptions{dataDir: o.dataDir, to: o.logStore.migrate, log: logOptions{o.logLevel, o.logJSON}}, true, stderr)
	}
	logger := hclog.New(&hclog.LoggerOptions{Name: "raftlockd", Level: hclog.LevelFromString(o.logLevel),
		JSONFormat: o.logJSON, Output: stderr})
	sigs := []os.Signal{syscall.SIGINT, syscall.SIGTERM}
	if o.dev && !signal.Ignored(syscall.SIGHUP) {
		// The terminal of a --dev run was closed: stop as on Ctrl-C, so
		// that its temporary data dir is removed. (Not when SIGHUP is
		// ignored, as under nohup, nor for a real node.)
		sigs = append(sigs, syscall.SIGHUP)
	}
	ctx, stop := signal.NotifyContext(context.Background(), sigs...)
	defer stop()
	if o.dev {
		// go run ./cmd/raftlockd --dev & ... kill PID: the signal reaches
		// go run, which exits without passing it on; --dev stops with its
		// parent instead of keeping its ports and temporary data dir.
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go stopWithParent(ctx, cancel, os.Getppid(), stderr)
	}

	var specs []serverSpec
	if o.dev {
		var tempDir string
		specs, tempDir, err = devSpecs(o)
		if tempDir != "" {
			// Registered before the servers' shutdown below, so it runs
			// after it: on every return of run, a signal, a failed start
			// or a failed server alike.
			defer removeDevDir(tempDir, stderr)
		}
	} else {
		var peers []node.Peer
		peers, err = parsePeers(o.peers)
		specs = []serverSpec{{id: o.id, dataDir: o.dataDir, raftAddr: o.raftAddr, httpAddr: o.httpAddr, streamAddr: o.streamAddr, peers: peers}}
	}
	if err != nil {
		fmt.Fprintf(stderr, "raftlockd: %v\n", err)
		return 2
	}
	if !o.dev {
		if err := preflight(o, specs[0].peers); err != nil {
			fmt.Fprintf(stderr, "raftlockd: %v\n", err)
			return 2
		}
	}
	if o.tls() {
		if o.tlsFiles, err = tlsconf.LoadTLS(o.tlsCert, o.tlsKey, o.tlsCA); err != nil {
			fmt.Fprintf(stderr, "raftlockd: %v\n", err)
			return 2
		}
	} else if o.insecure {
		logger.Warn("INSECURE: serving without TLS on a non-loopback address: anyone who can reach it can use the cluster, and join it")
	}
	if o.debugAddr != "" {
		dbg, _, err := startDebug(o.debugAddr, logger)
		if err != nil {
			fmt.Fprintf(stderr, "raftlockd: %v\n", err)
			return 2
		}
		defer dbg.Close()
	}
	var metricsLn net.Listener
	if o.metricsAddr != "" {
		// Before the node starts: a taken port stops the daemon with its
		// data untouched.
		if metricsLn, err = net.Listen("tcp", o.metricsAddr); err != nil {
			fmt.Fprintf(stderr, "raftlockd: %s\n", listenError("--metrics-addr", o.metricsAddr, err))
			return 1
		}
		specs[0].metricsLn = metricsLn
	}
	var servers []*server
	defer func() {
		for _, s := range servers {
			s.shutdown(logger)
		}
	}()
	for _, spec := range specs {
		s, err := startServer(ctx, spec, o, logger)
		if err != nil {
			if !o.dev {
				logger.Error("start failed", "id", spec.id, "error", err)
				return exitStatus(err)
			}
			fmt.Fprintf(stderr, "raftlockd --dev: node %s did not start: %v\n", spec.id, err)
			if errors.Is(err, syscall.EADDRINUSE) {
				fmt.Fprintf(stderr, "raftlockd --dev: it needs the ports 127.0.0.1:7001-7003 (HTTP) and 7101-7103 (Raft) free: is another raftlockd --dev running?\n")
			}
			return 1
		}
		servers = append(servers, s)
	}
	if o.dev {
		kept := "removed at exit; --data-dir DIR keeps it"
		if o.dataDir != "" {
			kept = "kept"
		}
		fmt.Fprintf(stderr, "raftlockd --dev: 3 nodes, HTTP on 127.0.0.1:7001-7003, data in %s (%s)\n", filepath.Dir(specs[0].dataDir), kept)
		fmt.Fprintf(stderr, "try: curl -s 127.0.0.1:7001/v1/cluster\n")
	}
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case err := <-firstError(servers):
		logger.Error("stopping", "error", err)
		fmt.Fprintf(stderr, "raftlockd: %v\n", err)
		return exitStatus(err)
	}
	return 0
}

type serverSpec struct {
	id, dataDir, raftAddr, httpAddr string
	// streamAddr: the stream protocol's listener address ("": none).
	streamAddr string
	peers      []node.Peer
	// metricsLn: the --metrics-addr listener, if any (closed on failure).
	metricsLn net.Listener
}

// listenError is the one line a listener that could not be opened prints:
// a taken port says so and names the fix.
func listenError(flag, addr string, err error) string {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Sprintf("%s %s: the port is taken (another process listens there): stop it or pick a free port", flag, addr)
	}
	if errors.Is(err, syscall.EADDRNOTAVAIL) {
		return fmt.Sprintf("%s %s: no interface of this machine has that IP address: use one of its addresses or 0.0.0.0", flag, addr)
	}
	return fmt.Sprintf("%s %s: %v", flag, addr, err)
}

// devSpecs returns the three nodes of --dev, with their data under
// --data-dir or else under a new temporary directory (raftlock-dev-* in
// $TMPDIR), returned as tempDir for run to remove when it returns.
func devSpecs(o options) (specs []serverSpec, tempDir string, err error) {
	dir := o.dataDir
	if dir == "" {
		d, err := os.MkdirTemp("", "raftlock-dev-")
		if err != nil {
			return nil, "", fmt.Errorf("dev data dir: %w", err)
		}
		dir, tempDir = d, d
	}
	var peers []node.Peer
	for i := 1; i <= 3; i++ {
		peers = append(peers, node.Peer{ID: fmt.Sprintf("n%d", i), RaftAddr: fmt.Sprintf("127.0.0.1:%d", 7100+i)})
	}
	for i, p := range peers {
		specs = append(specs, serverSpec{id: p.ID, dataDir: filepath.Join(dir, p.ID), raftAddr: p.RaftAddr,
			httpAddr: fmt.Sprintf("127.0.0.1:%d", 7001+i), peers: peers})
	}
	return specs, tempDir, nil
}

// parentPoll is how often a --dev run checks that its parent lives.
const parentPoll = 100 * time.Millisecond

// stopWithParent calls stop once this process's parent, parent, has exited
// (the process is re-parented), or returns when ctx ends.
func stopWithParent(ctx context.Context, stop context.CancelFunc, parent int, stderr io.Writer) {
	if parent <= 1 {
		return // started by init (or a container's runtime): nothing to watch
	}
	t := time.NewTicker(parentPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if os.Getppid() != parent {
				fmt.Fprintf(stderr, "raftlockd --dev: the process that started it (pid %d, go run?) exited: stopping\n", parent)
				stop()
				return
			}
		}
	}
}

// removeDevDir removes the temporary data directory of a --dev run.
func removeDevDir(dir string, stderr io.Writer) {
	if err := os.RemoveAll(dir); err != nil {
		fmt.Fprintf(stderr, "raftlockd --dev: could not remove its data dir: %v\n", err)
	}
}

// server is one node with its HTTP API.
type server struct {
	node *node.Node
	http *http.Server
	// metrics serves --metrics-addr (nil without it).
	metrics *http.Server
	// stream serves --stream-addr (nil without it).
	stream *stream.Server
	errc   chan error
	// transferOnStop: hand leadership over before stopping (a real node).
	transferOnStop bool
}

func startServer(ctx context.Context, spec serverSpec, o options, logger hclog.Logger) (_ *server, err error) {
	if spec.metricsLn != nil {
		defer func() {
			if err != nil {
				spec.metricsLn.Close()
			}
		}()
	}
	var streamLn net.Listener
	if spec.streamAddr != "" {
		if streamLn, err = net.Listen("tcp", spec.streamAddr); err != nil {
			return nil, errors.New(listenError("--stream-addr", spec.streamAddr, err))
		}
		defer func() {
			if err != nil {
				streamLn.Close()
			}
		}()
	}
	ln, err := net.Listen("tcp", spec.httpAddr)
	if err != nil {
		return nil, fmt.Errorf("http listen: %w", err)
	}
	nlog := logger.Named(spec.id)
	cfg := nodeConfig(spec, o, ln.Addr().String(), nlog)
	if cfg.Join, err = joinConfig(o); err != nil {
		ln.Close()
		return nil, err
	}
	if !o.dev {
		began := time.Now()
		if err := checkDataDir(ctx, spec.id, spec.dataDir); err != nil {
			ln.Close()
			return nil, fmt.Errorf("node: %w", err)
		}
		logStage(nlog, "check the data dir", time.Since(began))
	}
	n, err := node.Start(ctx, cfg)
	if err != nil {
		ln.Close()
		return nil, err
	}
	s := &server{node: n, errc: make(chan error, 2), transferOnStop: !o.dev}
	sopts := append([]httpapi.ServerOption{httpapi.WithLogger(nlog)}, faultServerOptions(o.faults)...)
	if o.faults.Any() {
		nlog.Warn("UNSAFE FAULTS ENABLED: this node breaks raftlock's guarantees on purpose", "faults", fmt.Sprintf("%+v", o.faults))
	}
	apiHandler := http.Handler(httpapi.NewServer(n, sopts...))
	s.http = &http.Server{
		Handler:  apiHandler,
		ErrorLog: nlog.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
	httpapi.ConfigureServer(s.http, o.idleTimeout)
	if streamLn != nil {
		_, port, _ := net.SplitHostPort(streamLn.Addr().String())
		s.http.Handler = stream.Advertise(apiHandler, port)
		s.stream = &stream.Server{Handler: apiHandler, IdleTimeout: o.idleTimeout,
			ErrorLog: nlog.Named("stream").StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})}
		if o.tlsFiles != nil {
			s.stream.TLSConfig = o.tlsFiles.APIConfig(o.clientCertAuth)
		}
		sln := raftnet.LimitConnsPerIP(streamLn, o.maxConnsPerIP, nlog.Named("stream"))
		go func() {
			if err := s.stream.Serve(sln); err != nil && !errors.Is(err, stream.ErrServerClosed) {
				s.errc <- fmt.Errorf("stream listener: %w", err)
			}
		}()
		nlog.Info("serving the stream protocol", "stream", streamLn.Addr().String(), "tls", o.tlsFiles != nil)
	}
	ln = raftnet.LimitConnsPerIP(ln, o.maxConnsPerIP, nlog.Named("http"))
	scheme := "http"
	if o.tlsFiles != nil {
		s.http.TLSConfig = o.tlsFiles.APIConfig(o.clientCertAuth)
		scheme = "https"
	}
	go func() {
		var err error
		if s.http.TLSConfig != nil {
			err = s.http.ServeTLS(ln, "", "")
		} else {
			err = s.http.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.errc <- err
		}
	}()
	if spec.metricsLn != nil {
		s.metrics = &http.Server{
			Handler:  httpapi.NewMetricsServer(n, httpapi.WithLogger(nlog)),
			ErrorLog: nlog.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
		}
		// Unauthenticated, so capped harder than the API port: its
		// timeouts, and api.MetricsConnsPerIP connections per source IP.
		httpapi.ConfigureServer(s.metrics, o.idleTimeout)
		mln := raftnet.LimitConnsPerIP(spec.metricsLn, api.MetricsConnsPerIP, nlog.Named("metrics"))
		go func() {
			if err := s.metrics.Serve(mln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.errc <- fmt.Errorf("metrics listener: %w", err)
			}
		}()
		nlog.Info("serving health and metrics, plain HTTP, no authentication", "metrics", "http://"+spec.metricsLn.Addr().String())
	}
	nlog.Info("serving", "id", spec.id, "http", scheme+"://"+ln.Addr().String(), "raft", n.RaftAddr(), "peer_tls", o.tlsFiles != nil,
		"client_cert_auth", o.clientCertAuth, "acl", o.acl, "metrics_open", o.metricsOpen, "data_dir", spec.dataDir,
		"log_store", n.LogStore(), "log", n.LogPath())
	return s, nil
}

// slowStage is how long a stage of the start may take before it is
// logged at WARN (node logs its own stages alike).
const slowStage = 10 * time.Second

// logStage logs that a stage of the start took took: at INFO, at WARN
// when it was slow, so that a slow start names its stage at --log-level
// warn too.
func logStage(log hclog.Logger, stage string, took time.Duration) {
	if took >= slowStage {
		log.Warn("start-up stage was slow", "stage", stage, "took", took.Round(time.Millisecond))
		return
	}
	log.Info("start-up stage", "stage", stage, "took", took.Round(time.Microsecond))
}

// nodeConfig is the node.Config of one server. --failover-grace 0s reaches
// the node as node.NoFailoverGrace (no extra grace), not as a zero, which
// node.Config reads as "the default".
func nodeConfig(spec serverSpec, o options, httpAddr string, logger hclog.Logger) node.Config {
	grace := o.failoverGrace
	if grace == 0 {
		grace = node.NoFailoverGrace
	}
	return node.Config{
		ID: spec.id, DataDir: spec.dataDir, RaftBind: spec.raftAddr, RaftAdvertise: o.raftAdvertise,
		HTTPAddr: httpAddr, Peers: spec.peers, Logger: logger, FailoverGrace: grace,
		HeartbeatTimeout: o.heartbeat, ElectionTimeout: o.election, LeaderLeaseTimeout: o.leaderLease,
		Faults: o.faults, TLS: o.tlsFiles, Limits: o.limits, ACL: o.acl, MetricsOpen: o.metricsOpen,
		SnapshotThreshold: o.backup.snapshotThreshold, SnapshotInterval: o.backup.snapshotInterval,
		TrailingLogs: o.backup.trailingLogs, LogStore: o.logStore.logStore,
		MaxConnsPerIP: o.maxConnsPerIP, IdleTimeout: o.idleTimeout, Wire: nodehttp.Wire{},
		MaxPrefixWatchers: o.prefixWatchers, MaxPrefixWatchersPerToken: o.prefixWatchersPerToken,
		MaxBlockingQueries: o.blockingQueries, MaxBlockingQueriesPerToken: o.blockingQueriesPerToken,
		MaxAnswerBytesInFlight: o.answerBytes, MaxAnswerBytesInFlightPerToken: o.answerBytesPerToken,
		// --dev starts its nodes one after the other, in one process: a
		// probe would wait for the next one forever.
		ProbePeers: !o.dev,
		Restore:    o.backup.seed(),
	}
}

func (s *server) shutdown(logger hclog.Logger) {
	s.stepDown(logger)
	// Waiting acquires and watches are long polls (a follower's forwarded
	// to the leader): give them a moment, then cut them. A client sees a
	// cut long poll as it sees a node that died, and retries elsewhere,
	// keeping its place in the queue.
	hctx, hcancel := context.WithTimeout(context.Background(), httpShutdownGrace)
	defer hcancel()
	if s.stream != nil {
		go func() { _ = s.stream.Shutdown(hctx) }()
	}
	if err := s.http.Shutdown(hctx); err != nil {
		s.http.Close()
	}
	if s.stream != nil {
		s.stream.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.node.Shutdown(ctx); err != nil {
		logger.Warn("node shutdown", "error", err)
	}
	if s.metrics != nil {
		// Last: a probe sees the node's health until it is gone.
		s.metrics.Close()
	}
}

// httpShutdownGrace is how long a stopping server lets requests in flight
// finish before it closes their connections: short, so that a stop takes
// well under a second (a Kubernetes rolling restart, Ctrl-C on --dev).
const httpShutdownGrace = 300 * time.Millisecond

// firstError delivers the first failure of any server: its HTTP server
// failed, or its node stopped itself for good (a corrupt log entry).
func firstError(servers []*server) <-chan error {
	out := make(chan error, 2*len(servers))
	for _, s := range servers {
		go func(c <-chan error) {
			if err, ok := <-c; ok {
				out <- fmt.Errorf("http server failed: %w", err)
			}
		}(s.errc)
		go func(n *node.Node) {
			<-n.Fatal()
			out <- n.FatalErr()
		}(s.node)
	}
	return out
}
