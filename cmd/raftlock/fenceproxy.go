package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/raftlock/raftlock/sequencer/fenceproxy"
)

const fenceProxyHelp = `Runs a reverse proxy that fences an HTTP backend: it forwards a request only if
its Raftlock-Sequencer header carries a current sequencer of a lock it guards,
and answers a stale one 409 stale_sequencer without forwarding it. A backend
that knows nothing of raftlock so refuses a former holder's writes; clients add
the header (Go: req.Header.Set(sequencer.Header, lock.Sequencer().String())).

Whom it trusts (docs/FENCING.md, "The fence proxy's trust model"):
  --lock NAME, --lock-prefix P  the locks it guards (repeatable; or --any-lock);
                                another lock's sequencer is refused 403
                                lock_not_guarded, never forwarded or recorded
  --route PATH=LOCK             or: a request under PATH must carry LOCK's
                                sequencer (repeatable; the longest PATH wins;
                                a path under none, or not clean, is refused)
  the cluster (--addr, --token, --ca/--cert/--key, as every command): a
                                sequencer that would raise a mark is first
                                checked with POST /v1/sequencer/check, once;
                                one the cluster does not know as current is
                                refused 409 unconfirmed_sequencer; with the
                                cluster unreachable, a token above the highest
                                it confirmed for the lock is refused 503
                                cluster_unavailable (--cluster-check=false:
                                any well-formed sequencer raises the marks)
  --client-ca FILE              only clients with a certificate of this CA
                                (with --tls-cert and --tls-key)

The fence's marks are kept in --state (a snapshot) and --state.log (every
raise, appended and fsynced before the request is forwarded), so a restarted
or crashed proxy still refuses what it refused before. It keeps the marks of
at most --max-names locks; past that a new lock is refused 503 fence_full. One
proxy owns a state file; run one per backend. A newer holder's request is
forwarded only after the older holder's requests in progress at the backend
were answered (at most --drain-timeout; then 503 draining). Answers of its
own, all JSON errors like the API's: 428 sequencer_required, 400
invalid_argument, 403 lock_not_guarded, 409 stale_sequencer or
unconfirmed_sequencer, 502 upstream_unavailable, 503 draining,
cluster_unavailable or fence_full, 500 internal (the state cannot be written:
nothing is forwarded).

Example:
  raftlock fence-proxy --addr 10.0.0.1:7070 --lock stock/42 \
    --listen :8081 --tls-cert proxy.pem --tls-key proxy-key.pem --client-ca clients-ca.pem \
    --upstream http://127.0.0.1:8080 --state /var/lib/app/fence.json`

// stringsFlag is a flag that may be given many times.
type stringsFlag []string

func (f *stringsFlag) String() string     { return strings.Join(*f, ",") }
func (f *stringsFlag) Set(v string) error { *f = append(*f, v); return nil }

// fenceProxy runs `raftlock fence-proxy`.
func (c *cli) fenceProxy(fs *flag.FlagSet) runFunc {
	listen := fs.String("listen", "", "the `ADDR` to serve on (host:port)")
	upstream := fs.String("upstream", "", "the backend's base `URL` (http:// or https://)")
	state := fs.String("state", "", "the `FILE` that keeps the fence's marks, beside FILE.log (created if missing)")
	certFile := fs.String("tls-cert", "", "serve HTTPS with this certificate `FILE` (with --tls-key)")
	keyFile := fs.String("tls-key", "", "the private key `FILE` of --tls-cert")
	clientCA := fs.String("client-ca", "", "require client certificates signed by this CA `FILE` (with --tls-cert)")
	upstreamCA := fs.String("upstream-ca", "", "verify an https:// backend against this CA `FILE` (default: the system's roots)")
	var locks, prefixes, routes stringsFlag
	fs.Var(&locks, "lock", "guard the lock `NAME` (repeatable)")
	fs.Var(&prefixes, "lock-prefix", "guard every lock whose name starts with `PREFIX` (repeatable)")
	fs.Var(&routes, "route", "`PATH=LOCK`: a request under PATH must carry a sequencer of LOCK (repeatable)")
	anyLock := fs.Bool("any-lock", false, "guard every lock name (instead of --lock or --lock-prefix)")
	clusterCheck := fs.Bool("cluster-check", true, "confirm with the cluster (--addr) a sequencer that would raise a mark")
	maxNames := fs.Int("max-names", fenceproxy.DefaultMaxNames, "keep the marks of at most `N` locks")
	drain := fs.Duration("drain-timeout", 30*time.Second, "how long a newer holder's request waits for an older holder's requests in progress")
	upTimeout := fs.Duration("upstream-timeout", 30*time.Second, "how long to wait for the backend's response headers")
	logLevel := fs.String("log-level", "info", "log `LEVEL`: debug (every refusal), info, warn, error")
	return func(ctx context.Context, _ []string) error {
		const cmd = "fence-proxy"
		switch {
		case *listen == "":
			return usagef(cmd, "--listen is required (e.g. --listen 127.0.0.1:8081)")
		case *upstream == "":
			return usagef(cmd, "--upstream is required (e.g. --upstream http://127.0.0.1:8080)")
		case *state == "":
			return usagef(cmd, "--state is required (a file for the fence's marks, e.g. --state ./fence.json)")
		case (*certFile == "") != (*keyFile == ""):
			return usagef(cmd, "--tls-cert and --tls-key go together")
		case *clientCA != "" && *certFile == "":
			return usagef(cmd, "--client-ca needs --tls-cert and --tls-key (client certificates come with TLS)")
		case *drain <= 0 || *upTimeout <= 0:
			return usagef(cmd, "--drain-timeout and --upstream-timeout must be positive, like 30s")
		case *maxNames <= 0:
			return usagef(cmd, "--max-names must be positive")
		case btoi(*anyLock)+btoi(len(locks)+len(prefixes) > 0)+btoi(len(routes) > 0) != 1:
			return usagef(cmd, "say which locks it guards, one way: --lock NAME and --lock-prefix PREFIX, or --route PATH=LOCK (repeatable), or --any-lock")
		}
		guarded, err := guardedLocks(locks, prefixes, routes, *anyLock)
		if err != nil {
			return usagef(cmd, "%v", err)
		}
		up, err := url.Parse(*upstream)
		if err != nil || (up.Scheme != "http" && up.Scheme != "https") || up.Host == "" {
			return usagef(cmd, "--upstream %q: want an http:// or https:// URL with a host", *upstream)
		}
		transport := http.DefaultTransport.(*http.Transport).Clone()
		transport.ResponseHeaderTimeout = *upTimeout
		transport.MaxIdleConnsPerHost = 64
		if *upstreamCA != "" {
			pool, err := readPool("--upstream-ca", *upstreamCA)
			if err != nil {
				return err
			}
			transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		}
		var serverTLS *tls.Config
		if *certFile != "" {
			cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
			if err != nil {
				return fmt.Errorf("fence-proxy: --tls-cert, --tls-key: %w", err)
			}
			serverTLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
			if *clientCA != "" {
				pool, err := readPool("--client-ca", *clientCA)
				if err != nil {
					return err
				}
				serverTLS.ClientCAs, serverTLS.ClientAuth = pool, tls.RequireAndVerifyClientCert
			}
		}
		logger := hclog.New(&hclog.LoggerOptions{Name: "fence-proxy", Level: hclog.LevelFromString(*logLevel), Output: c.stderr})
		opts := fenceproxy.Options{DrainTimeout: *drain, UpstreamTimeout: *upTimeout, Transport: transport,
			Logger: logger, Locks: guarded}
		if *clusterCheck {
			// Fail fast: a request waits for the answer.
			cl, err := c.newClient()
			if err != nil {
				return err
			}
			opts.Cluster = cl
		}
		store, err := fenceproxy.OpenStore(*state, fenceproxy.StoreOptions{MaxNames: *maxNames})
		if err != nil {
			return fmt.Errorf("fence-proxy: %w", err)
		}
		defer store.Close()
		p, err := fenceproxy.New(up, store, opts)
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", *listen)
		if err != nil {
			return fmt.Errorf("fence-proxy: --listen %s: %w", *listen, err)
		}
		srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
			TLSConfig: serverTLS, ErrorLog: logger.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})}
		scheme := "http"
		if serverTLS != nil {
			scheme = "https"
		}
		warnTrust(logger, ln.Addr().String(), *clientCA != "", *clusterCheck, *anyLock)
		logger.Info("fencing", "listen", scheme+"://"+ln.Addr().String(), "upstream", up.String(), "state", *state,
			"locks", guardedList(locks, prefixes, routes, *anyLock), "cluster_check", *clusterCheck, "client_certs", *clientCA != "")
		errc := make(chan error, 1)
		go func() {
			if serverTLS != nil {
				errc <- srv.ServeTLS(ln, "", "")
			} else {
				errc <- srv.Serve(ln)
			}
		}()
		select {
		case err := <-errc:
			return fmt.Errorf("fence-proxy: %w", err)
		case <-ctx.Done():
		}
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			return fmt.Errorf("fence-proxy: shut down: %w", err)
		}
		return nil
	}
}

// warnTrust says at start, loudly, what anyone who reaches addr can do
// that the flags let them.
func warnTrust(logger hclog.Logger, addr string, clientCerts, clusterCheck, anyLock bool) {
	if !clientCerts {
		what := "send requests to the backend with any sequencer they have seen"
		if !clusterCheck {
			what = "raise the fence's marks with a forged sequencer, so that the real holders are refused for good"
		}
		logger.Warn("NO CLIENT AUTHENTICATION (no --client-ca): anyone who can reach "+addr+" can "+what, "listen", addr)
	}
	if !clusterCheck {
		logger.Warn("NO CLUSTER CHECK (--cluster-check=false): every well-formed sequencer raises the marks, a forged one too")
	}
	if anyLock {
		logger.Warn("--any-lock: a sequencer of any lock name is admitted and its marks kept (at most --max-names)")
	}
}

// guardedList describes the guarded locks for the start line.
func guardedList(locks, prefixes, routes []string, anyLock bool) string {
	if anyLock {
		return "any"
	}
	parts := append([]string(nil), locks...)
	for _, p := range prefixes {
		parts = append(parts, p+"*")
	}
	return strings.Join(append(parts, routes...), ",")
}

// guardedLocks is the proxy's Options.Locks from the flags: nil for
// --any-lock.
func guardedLocks(locks, prefixes, routes []string, anyLock bool) (*fenceproxy.LockSet, error) {
	switch {
	case anyLock:
		return nil, nil
	case len(routes) == 0:
		return fenceproxy.NewLockSet(locks, prefixes)
	}
	m := make(map[string]string, len(routes))
	for _, r := range routes {
		path, lock, ok := strings.Cut(r, "=")
		if !ok {
			return nil, fmt.Errorf("--route %q: want PATH=LOCK, like /stock/42=stock/42", r)
		}
		if _, dup := m[path]; dup {
			return nil, fmt.Errorf("--route: path %s given twice", path)
		}
		m[path] = lock
	}
	return fenceproxy.NewRoutes(m)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// readPool reads a PEM file of CA certificates for flag.
func readPool(flag, file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("fence-proxy: %s: %w", flag, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("fence-proxy: %s %s: no PEM certificate in it", flag, file)
	}
	return pool, nil
}
