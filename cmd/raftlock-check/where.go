package main

import (
	"net/http"
	"sync/atomic"
)

// lastAddr is an http.RoundTripper that remembers the address (host:port)
// of the last request sent through it. On the Go client of a client
// process it names the node the client talks to now: every call starts
// where the last one went, unless that node failed it. The freeze-node
// fault asks the clients for it (msgWhere) to tell how many of them the
// frozen node cost something.
type lastAddr struct {
	inner http.RoundTripper
	addr  atomic.Pointer[string]
}

// RoundTrip implements http.RoundTripper.
func (t *lastAddr) RoundTrip(req *http.Request) (*http.Response, error) {
	a := req.URL.Host
	t.addr.Store(&a)
	return t.inner.RoundTrip(req)
}

// last returns the address of the last request ("" if none).
func (t *lastAddr) last() string {
	if a := t.addr.Load(); a != nil {
		return *a
	}
	return ""
}

// bearer is an http.RoundTripper that sends the ACL token it holds now as
// Authorization: Bearer on every request (none while it holds none): the
// token of a client process can change during a run (msgToken).
type bearer struct {
	inner  http.RoundTripper
	secret atomic.Pointer[string]
}

// set makes secret the token of the requests sent from now on.
func (b *bearer) set(secret string) { b.secret.Store(&secret) }

// RoundTrip implements http.RoundTripper.
func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	if s := b.secret.Load(); s != nil && *s != "" {
		req = req.Clone(req.Context())
		req.Header.Set("Authorization", "Bearer "+*s)
	}
	return b.inner.RoundTrip(req)
}
