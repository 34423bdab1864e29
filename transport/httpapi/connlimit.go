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

// ConfigureServer sets srv's protocols and timeouts. It serves HTTP/1.1
// and HTTP/2: over TLS through ALPN ("h2"), and on a plain port cleartext
// HTTP/2 with prior knowledge (h2c) beside HTTP/1.1, told apart by the
// connection's first bytes; an HTTP/2 connection carries at most
// api.MaxStreamsPerConn requests at once. Timeouts: HTTP/1.1 headers
// within 10 s; every request (an HTTP/2 stream alike), headers and body,
// within ReadTimeout (a restore upload: each piece within it); idle
// connections closed after idle (DefaultIdleTimeout if zero): an HTTP/2
// connection is idle while it carries no stream.
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
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	p.SetUnencryptedHTTP2(true)
	srv.Protocols = &p
	srv.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: api.MaxStreamsPerConn}
}
