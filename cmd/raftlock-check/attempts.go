package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/raftlock/raftlock/api"
)

// The Go client (client.Client) retries a call inside one recorded
// operation: an answer such as lock_busy may follow an earlier attempt
// that broke after it was sent and may still take effect (a request held
// up in a partitioned forwarder, an entry of a deposed leader committed
// by the next one). The checks that trust a definite answer to mean that
// nothing else of the call can happen later (no-ghost-grant) need to know
// whether such an attempt existed: every HTTP request of a recorded call
// is counted by attemptCounter, and those that may have taken effect
// unseen are counted as unsure.

// attemptLog counts the HTTP requests of one recorded call.
type attemptLog struct {
	mu       sync.Mutex
	attempts int
	unsure   int
}

func (a *attemptLog) add(unsure bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.attempts++
	if unsure {
		a.unsure++
	}
}

// counts returns how many requests were sent and how many of them may
// have taken effect unseen.
func (a *attemptLog) counts() (attempts, unsure int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.attempts, a.unsure
}

// attemptKey is the context key of a call's attemptLog.
type attemptKey struct{}

// withAttempts returns ctx carrying a new attemptLog, which counts the
// HTTP requests sent under it.
func withAttempts(ctx context.Context) (context.Context, *attemptLog) {
	a := &attemptLog{}
	return context.WithValue(ctx, attemptKey{}, a), a
}

// attemptCounter is an http.RoundTripper that counts every request whose
// context carries an attemptLog, and judges whether it may have taken
// effect unseen: a request that failed after it was sent, or one answered
// 5xx other than no_leader (unknown_outcome, internal, or a non-API
// answer). A failed dial sent nothing; no_leader promises that nothing
// was appended; any other answer is the request's definite outcome.
type attemptCounter struct {
	inner http.RoundTripper
}

// errorPrefix bounds how much of an error answer is read to learn its
// code.
const errorPrefix = 64 << 10

// RoundTrip implements http.RoundTripper.
func (t attemptCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	a, _ := req.Context().Value(attemptKey{}).(*attemptLog)
	resp, err := t.inner.RoundTrip(req)
	if a == nil {
		return resp, err
	}
	if err != nil {
		var op *net.OpError
		a.add(!(errors.As(err, &op) && op.Op == "dial"))
		return resp, err
	}
	if resp.StatusCode < 500 {
		a.add(false)
		return resp, nil
	}
	// Learn the code, and hand the body on unchanged.
	prefix, rerr := io.ReadAll(io.LimitReader(resp.Body, errorPrefix))
	orig := resp.Body
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(prefix), orig), orig}
	var er api.ErrorReply
	sure := rerr == nil && json.Unmarshal(prefix, &er) == nil && api.Code(er.Error.Code) == api.CodeNoLeader
	a.add(!sure)
	return resp, nil
}

// httpClient returns the HTTP client of a client process: its
// connections come from the loopback address ip (empty: the kernel's
// choice), it speaks TLS with tc (nil: the default) to https addresses,
// and it counts the attempts of recorded calls (attemptCounter).
// Like the transport's default client it has no overall Timeout (the
// transport bounds every request itself).
func httpClient(ip string, tc *tls.Config) (*http.Client, error) {
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	if ip != "" {
		addr := net.ParseIP(ip)
		if addr == nil {
			return nil, fmt.Errorf("source address %q: not an IP address", ip)
		}
		d.LocalAddr = &net.TCPAddr{IP: addr}
	}
	return &http.Client{Transport: attemptCounter{inner: &http.Transport{
		DialContext:           d.DialContext,
		TLSClientConfig:       tc,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	}}}, nil
}
