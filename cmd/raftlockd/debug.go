package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/hashicorp/go-hclog"
)

// startDebug serves Go's profiling endpoints (/debug/pprof/...) on addr,
// apart from the API so that they are never exposed by accident: pass
// --debug-addr 127.0.0.1:PORT to profile a node under load (a non-loopback
// address needs --debug-allow-remote: the endpoints are plaintext and
// unauthenticated). /debug/pprof/cmdline is not served: the command line
// may carry a secret (--join-token). It returns the server to close on
// shutdown and the address it listens on.
func startDebug(addr string, logger hclog.Logger) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("debug listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", http.NotFound)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Warn("debug server stopped", "error", err)
		}
	}()
	logger.Info("serving pprof", "debug", ln.Addr().String())
	return srv, ln.Addr().String(), nil
}
