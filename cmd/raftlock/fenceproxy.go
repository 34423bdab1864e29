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
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/raftlock/raftlock/sequencer"
	"github.com/raftlock/raftlock/sequencer/fenceproxy"
)

const fenceProxyHelp = `Runs a reverse proxy that fences an HTTP backend: it forwards a request only if
its Raftlock-Sequencer header carries a current sequencer of the lock it names,
and answers a stale one 409 stale_sequencer without forwarding it. A backend
that knows nothing of raftlock so refuses a former holder's writes; clients add
the header (Go: req.Header.Set(sequencer.Header, lock.Sequencer().String())).

The fence's marks are kept in --state (rewritten atomically, fsynced), so a
restarted proxy still refuses what it refused before. One proxy owns a state
file; run one per backend. A newer holder's request is forwarded only after
the older holder's requests in progress at the backend were answered (at most
--drain-timeout; then 503 draining). Answers of its own, all JSON errors like
the API's: 428 sequencer_required, 400 invalid_argument, 409 stale_sequencer,
502 upstream_unavailable, 503 draining, 500 internal (the state file cannot be
written: nothing is forwarded).

Example:
  raftlock fence-proxy --listen 127.0.0.1:8081 --upstream http://127.0.0.1:8080 \
    --state /var/lib/app/fence.json`

// fenceProxy runs `raftlock fence-proxy`.
func (c *cli) fenceProxy(fs *flag.FlagSet) runFunc {
	listen := fs.String("listen", "", "the `ADDR` to serve on (host:port)")
	upstream := fs.String("upstream", "", "the backend's base `URL` (http:// or https://)")
	state := fs.String("state", "", "the `FILE` that keeps the fence's marks (created if missing)")
	certFile := fs.String("tls-cert", "", "serve HTTPS with this certificate `FILE` (with --tls-key)")
	keyFile := fs.String("tls-key", "", "the private key `FILE` of --tls-cert")
	upstreamCA := fs.String("upstream-ca", "", "verify an https:// backend against this CA `FILE` (default: the system's roots)")
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
		case *drain <= 0 || *upTimeout <= 0:
			return usagef(cmd, "--drain-timeout and --upstream-timeout must be positive, like 30s")
		}
		up, err := url.Parse(*upstream)
		if err != nil || (up.Scheme != "http" && up.Scheme != "https") || up.Host == "" {
			return usagef(cmd, "--upstream %q: want an http:// or https:// URL with a host", *upstream)
		}
		transport := http.DefaultTransport.(*http.Transport).Clone()
		transport.ResponseHeaderTimeout = *upTimeout
		transport.MaxIdleConnsPerHost = 64
		if *upstreamCA != "" {
			pem, err := os.ReadFile(*upstreamCA)
			if err != nil {
				return fmt.Errorf("fence-proxy: --upstream-ca: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return fmt.Errorf("fence-proxy: --upstream-ca %s: no PEM certificate in it", *upstreamCA)
			}
			transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		}
		fence, err := sequencer.OpenFileFence(*state)
		if err != nil {
			return fmt.Errorf("fence-proxy: %w", err)
		}
		defer fence.Close()
		logger := hclog.New(&hclog.LoggerOptions{Name: "fence-proxy", Level: hclog.LevelFromString(*logLevel), Output: c.stderr})
		p, err := fenceproxy.New(up, fence, fenceproxy.Options{DrainTimeout: *drain, UpstreamTimeout: *upTimeout,
			Transport: transport, Logger: logger})
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", *listen)
		if err != nil {
			return fmt.Errorf("fence-proxy: --listen %s: %w", *listen, err)
		}
		srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
			ErrorLog: logger.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})}
		scheme := "http"
		if *certFile != "" {
			scheme = "https"
		}
		logger.Info("fencing", "listen", scheme+"://"+ln.Addr().String(), "upstream", up.String(), "state", *state)
		errc := make(chan error, 1)
		go func() {
			if *certFile != "" {
				errc <- srv.ServeTLS(ln, *certFile, *keyFile)
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
