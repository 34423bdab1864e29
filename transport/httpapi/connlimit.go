package httpapi

import (
	"net/http"
	"time"

	"github.com/raftlock/raftlock/api"
)

// ReadTimeout bounds reading a request, headers and body, from its first
// byte (http.Server.ReadTimeout). net/http lifts it once the body is read,
// so a waiting acquire or a blocking query, which waits after reading, is
// not cut; a restore upload gets ReadTimeout more after each piece that
// arrives (watchBody).
const ReadTimeout = 30 * time.Second

// readHeaderTimeout bounds reading a request's headers.
const readHeaderTimeout = 10 * time.Second

// ConfigureServer sets srv's timeouts: headers within 10 s, the whole
// request within ReadTimeout (a restore upload: each piece within it), and
// idle connections closed after idle (DefaultIdleTimeout if zero).
func ConfigureServer(srv *http.Server, idle time.Duration) {
	configureServer(srv, idle, ReadTimeout)
}

func configureServer(srv *http.Server, idle, read time.Duration) {
	if idle <= 0 {
		idle = api.DefaultIdleTimeout
	}
	srv.ReadHeaderTimeout = min(readHeaderTimeout, read)
	srv.ReadTimeout = read
	srv.IdleTimeout = idle
}
