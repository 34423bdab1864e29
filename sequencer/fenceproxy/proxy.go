// Package fenceproxy is a reverse proxy that fences any HTTP backend with
// raftlock's sequencers: it forwards a request only if its
// Raftlock-Sequencer header carries a sequencer its fence admits, so that
// a backend that knows nothing of raftlock still refuses a stale holder's
// writes. `raftlock fence-proxy` runs it with a FileFence.
//
// Checking and forwarding are two steps, and a request admitted a moment
// before a newer holder's could otherwise reach the backend after it (it
// was slow on the wire, or the backend slow to answer it). So the proxy
// keeps, per lock, the requests it forwarded and has not finished, and
// forwards a newly admitted request only once none of those is superseded
// by it: requests of the same grant (or of concurrent readers) run in
// parallel; a newer holder's first request waits until the older holder's
// requests have been answered. A request that its own wait made stale (an
// even newer holder came meanwhile) is refused like any stale one. What a
// backend keeps doing after it answered, or after the proxy gave up on it
// (Options.UpstreamTimeout), the proxy cannot see: where that matters, fence
// in the backend's own store (see docs/DESIGN.md, "Sequencers").
package fenceproxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/raftlock/raftlock/sequencer"
)

// Fence is what the proxy checks sequencers with: sequencer.Fence (memory)
// or sequencer.FileFence (marks kept across restarts).
type Fence interface {
	sequencer.Checker
	// Current reports whether the fence would admit s now, without
	// recording it.
	Current(s sequencer.Sequencer) bool
}

// Options tune a Proxy; the zero value takes the defaults.
type Options struct {
	// DrainTimeout bounds how long an admitted request waits for an older
	// holder's requests that are still in progress at the backend
	// (default 30 s); after it the request is answered 503 "draining".
	DrainTimeout time.Duration
	// UpstreamTimeout bounds the wait for the backend's response headers
	// (default 30 s); after it the request is answered 502.
	UpstreamTimeout time.Duration
	// Transport carries requests to the backend (default: one like
	// http.DefaultTransport with UpstreamTimeout).
	Transport http.RoundTripper
	// Logger logs refusals at debug and failures at warn (default: none).
	Logger hclog.Logger
}

// Error codes the proxy answers besides sequencer.Middleware's
// (sequencer_required, invalid_argument, stale_sequencer, internal).
const (
	// CodeUpstreamUnavailable: the backend did not answer (refused, reset,
	// timed out); the request may or may not have reached it. HTTP 502.
	CodeUpstreamUnavailable = "upstream_unavailable"
	// CodeDraining: an older holder's requests were still in progress at
	// the backend after DrainTimeout; nothing was forwarded. HTTP 503,
	// with Retry-After.
	CodeDraining = "draining"
)

// Proxy is the fencing reverse proxy; it is an http.Handler.
type Proxy struct {
	fence   Fence
	rp      *httputil.ReverseProxy
	drain   time.Duration
	log     hclog.Logger
	mu      sync.Mutex
	lanes   map[string]*lane
	waiting int // requests waiting for older ones to drain (tests)
}

// lane is one lock's requests in progress; Proxy.mu guards it.
type lane struct {
	// sent holds the sequencers of the requests forwarded and not yet
	// finished, by request.
	sent map[*inflight]sequencer.Sequencer
	// users counts the requests between admission and their end.
	users int
	// done is closed (and replaced) whenever a forwarded request ends.
	done chan struct{}
}

// inflight identifies one request in a lane. (Not an empty struct: distinct
// pointers to zero-size values may compare equal.)
type inflight struct{ _ byte }

// New returns a proxy to upstream (an http or https URL; a request's path
// is appended to upstream's) that admits requests with fence.
func New(upstream *url.URL, fence Fence, o Options) (*Proxy, error) {
	if upstream == nil || (upstream.Scheme != "http" && upstream.Scheme != "https") || upstream.Host == "" {
		return nil, fmt.Errorf("fence proxy: upstream %v: want an http:// or https:// URL with a host", upstream)
	}
	if fence == nil {
		return nil, errors.New("fence proxy: no fence")
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = 30 * time.Second
	}
	if o.UpstreamTimeout <= 0 {
		o.UpstreamTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.ResponseHeaderTimeout = o.UpstreamTimeout
		t.MaxIdleConnsPerHost = 64
		o.Transport = t
	}
	p := &Proxy{fence: fence, drain: o.DrainTimeout, log: o.Logger, lanes: make(map[string]*lane)}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(upstream)
			r.SetXForwarded()
		},
		Transport: o.Transport,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the client left; nobody reads an answer
			}
			p.log.Warn("backend did not answer", "method", r.Method, "path", r.URL.Path, "error", err)
			sequencer.WriteError(w, &sequencer.RequestError{Status: http.StatusBadGateway, Code: CodeUpstreamUnavailable,
				Message: fmt.Sprintf("the backend did not answer: %v; the request may or may not have reached it", err)})
		},
	}
	return p, nil
}

// ServeHTTP admits r by its sequencer, waits until no request of an older
// holder of the same lock is still in progress at the backend, and
// forwards r.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s, rerr := sequencer.FromRequest(r)
	if rerr != nil {
		p.refuse(w, r, rerr)
		return
	}
	l, me, err := p.admit(s)
	if err != nil {
		p.refuse(w, r, sequencer.CheckError(err))
		return
	}
	defer p.finish(s.Name, l, me)
	if rerr := p.awaitOlder(r.Context(), s, l, me); rerr != nil {
		p.refuse(w, r, rerr)
		return
	}
	p.rp.ServeHTTP(w, r)
}

// refuse answers e, logging it.
func (p *Proxy) refuse(w http.ResponseWriter, r *http.Request, e *sequencer.RequestError) {
	if r.Context().Err() != nil {
		return
	}
	if e.Status >= 500 {
		p.log.Warn("request refused", "method", r.Method, "path", r.URL.Path, "code", e.Code, "reason", e.Message)
	} else {
		p.log.Debug("request refused", "method", r.Method, "path", r.URL.Path, "code", e.Code, "reason", e.Message)
	}
	if e.Code == CodeDraining {
		w.Header().Set("Retry-After", "1")
	}
	sequencer.WriteError(w, e)
}

// admit checks s with the fence and, if admitted, enters it into its
// lock's lane (not yet as sent). Checks of one lock and the lane's changes
// happen under p.mu, so no request is sent between a newer one's check and
// its entry.
func (p *Proxy) admit(s sequencer.Sequencer) (*lane, *inflight, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.fence.Check(s); err != nil {
		return nil, nil, err
	}
	l := p.lanes[s.Name]
	if l == nil {
		l = &lane{sent: make(map[*inflight]sequencer.Sequencer), done: make(chan struct{})}
		p.lanes[s.Name] = l
	}
	l.users++
	return l, &inflight{}, nil
}

// awaitOlder waits until no sent request of l is superseded, then marks
// me sent; it refuses s if s itself was superseded meanwhile, or the
// wait ran past the drain timeout.
func (p *Proxy) awaitOlder(ctx context.Context, s sequencer.Sequencer, l *lane, me *inflight) *sequencer.RequestError {
	var deadline <-chan time.Time
	for waited := false; ; waited = true {
		p.mu.Lock()
		if !p.fence.Current(s) {
			p.mu.Unlock()
			return sequencer.CheckError(fmt.Errorf("%w: %v was superseded while older requests drained", sequencer.ErrStale, s))
		}
		blocked := false
		for _, o := range l.sent {
			if !p.fence.Current(o) {
				blocked = true
				break
			}
		}
		if !blocked {
			l.sent[me] = s
			if waited {
				p.waiting--
			}
			p.mu.Unlock()
			return nil
		}
		if !waited {
			p.waiting++
			deadline = time.After(p.drain)
		}
		done := l.done
		p.mu.Unlock()
		select {
		case <-done:
		case <-deadline:
			p.mu.Lock()
			p.waiting--
			p.mu.Unlock()
			return &sequencer.RequestError{Status: http.StatusServiceUnavailable, Code: CodeDraining,
				Message: fmt.Sprintf("lock %q: an older holder's requests are still in progress at the backend after %v; retry", s.Name, p.drain)}
		case <-ctx.Done():
			p.mu.Lock()
			p.waiting--
			p.mu.Unlock()
			return &sequencer.RequestError{Status: http.StatusServiceUnavailable, Code: CodeDraining, Message: ctx.Err().Error()}
		}
	}
}

// finish takes me out of l, waking the requests that wait for it.
func (p *Proxy) finish(name string, l *lane, me *inflight) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := l.sent[me]; ok {
		delete(l.sent, me)
		close(l.done)
		l.done = make(chan struct{})
	}
	l.users--
	if l.users == 0 {
		delete(p.lanes, name)
	}
}

// Waiting returns how many admitted requests wait for an older holder's
// requests to finish at the backend.
func (p *Proxy) Waiting() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waiting
}
