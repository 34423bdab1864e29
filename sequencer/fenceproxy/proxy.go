// Package fenceproxy is a reverse proxy that fences any HTTP backend with
// raftlock's sequencers: it forwards a request only if its
// Raftlock-Sequencer header carries a sequencer its fence admits, so that
// a backend that knows nothing of raftlock still refuses a stale holder's
// writes. `raftlock fence-proxy` runs it with a Store.
//
// A well-formed sequencer is easy to forge, and a forged one with a high
// token would raise the marks above every real grant's for good. So the
// proxy can be told which locks it guards (Options.Locks: another lock's
// sequencer is refused and never recorded) and whom to ask whether a
// sequencer was issued (Options.Cluster: one that would raise a mark is
// confirmed first); see Proxy, and docs/FENCING.md for the trust model.
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
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/sequencer"
)

// Fence is what the proxy checks sequencers with: Store (the one
// `raftlock fence-proxy` uses), sequencer.Fence (memory) or
// sequencer.FileFence.
type Fence interface {
	sequencer.Checker
	// Current reports whether the fence would admit s now, without
	// recording it.
	Current(s sequencer.Sequencer) bool
}

// Raiser is a Fence that tells which sequencers would raise a mark (Store
// does). With Options.Cluster, the proxy asks the cluster about every
// such sequencer; with a Fence that cannot tell, about those whose token
// is above the highest it has confirmed for the name.
type Raiser interface {
	Raises(s sequencer.Sequencer) bool
}

// Cluster is what the proxy confirms sequencers with: the cluster's POST
// /v1/sequencer/check (*client.Client has it).
type Cluster interface {
	CheckSequencer(ctx context.Context, seq string) (api.SequencerCheck, error)
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
	// Locks are the lock names the proxy guards (NewLockSet), or the lock
	// of each request path (NewRoutes); nil guards every name. A sequencer
	// of any other lock, or of another path's, is refused (403
	// lock_not_guarded): never forwarded, never checked with the fence.
	Locks *LockSet
	// Cluster, if set, confirms a sequencer before it may raise a mark
	// (see Proxy). Nil: any well-formed sequencer raises the marks.
	Cluster Cluster
	// ClusterTimeout bounds one confirmation (default 5 s).
	ClusterTimeout time.Duration
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
	// CodeLockNotGuarded: the sequencer is of a lock the proxy does not
	// guard, or not of the lock of the request's path (Options.Locks).
	// HTTP 403; nothing was forwarded or recorded.
	CodeLockNotGuarded = "lock_not_guarded"
	// CodeUnconfirmed: the cluster does not know the sequencer as a
	// current grant (forged, or its grant ended), and it would have raised
	// a mark. HTTP 409; nothing was forwarded or recorded. Not retryable
	// with that sequencer.
	CodeUnconfirmed = "unconfirmed_sequencer"
	// CodeClusterUnavailable: the sequencer would raise a mark above the
	// highest token the proxy confirmed for its lock, and the cluster
	// could not be asked. HTTP 503, with Retry-After; nothing was
	// forwarded or recorded.
	CodeClusterUnavailable = "cluster_unavailable"
	// CodeFenceFull: the sequencer's lock is new and the store keeps the
	// marks of as many names as it may (StoreOptions.MaxNames). HTTP 503;
	// nothing was forwarded or recorded.
	CodeFenceFull = "fence_full"
)

// Proxy is the fencing reverse proxy; it is an http.Handler.
//
// With Options.Cluster, a sequencer that would raise a mark is first
// confirmed: the proxy asks the cluster whether it is a current grant
// (once per sequencer; concurrent requests of one share the question),
// and refuses it unless it is. So a forged sequencer never raises a
// mark, and the holders of a lock are never refused because of one. The
// proxy remembers per lock the highest token the cluster confirmed (or
// named as its current holder's): when the cluster cannot be reached, a
// sequencer that would raise a mark is admitted as without a cluster if
// its token is at most that, and refused (503 cluster_unavailable) if it
// is above. A sequencer that raises nothing (the steady state of a
// holder) costs no question.
type Proxy struct {
	fence    Fence
	locks    *LockSet
	cluster  Cluster
	ctimeout time.Duration
	rp       *httputil.ReverseProxy
	drain    time.Duration
	log      hclog.Logger
	waiting  atomic.Int64 // requests waiting for older ones to drain (tests)

	// mu guards lanes, confirmed and asking.
	mu        sync.Mutex
	lanes     map[string]*lane
	confirmed map[string]sequencer.Token
	// lastValid is per lock the last sequencer the cluster confirmed:
	// its requests that come before its mark is raised ask no more.
	lastValid map[string]string
	asking    map[string]*question
}

// lane is one lock's requests in progress.
type lane struct {
	// mu serializes the lock's checks and guards sent and done, so that
	// no request is sent between a newer one's check and its entry.
	mu sync.Mutex
	// sent holds the sequencers of the requests forwarded and not yet
	// finished, by request.
	sent map[*inflight]sequencer.Sequencer
	// done is closed (and replaced) whenever a forwarded request ends.
	done chan struct{}
	// users counts the requests between admission and their end
	// (Proxy.mu guards it).
	users int
}

// inflight identifies one request in a lane. (Not an empty struct: distinct
// pointers to zero-size values may compare equal.)
type inflight struct{ _ byte }

// question is one confirmation under way; done is closed when valid and
// err are set.
type question struct {
	done  chan struct{}
	valid bool
	err   error
}

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
	if o.ClusterTimeout <= 0 {
		o.ClusterTimeout = 5 * time.Second
	}
	if o.Transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.ResponseHeaderTimeout = o.UpstreamTimeout
		t.MaxIdleConnsPerHost = 64
		o.Transport = t
	}
	p := &Proxy{fence: fence, locks: o.Locks, cluster: o.Cluster, ctimeout: o.ClusterTimeout, drain: o.DrainTimeout,
		log: o.Logger, lanes: make(map[string]*lane), confirmed: make(map[string]sequencer.Token), lastValid: make(map[string]string),
		asking: make(map[string]*question)}
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
	if p.locks != nil {
		if ok, why := p.locks.Admits(r.URL.Path, r.URL.RawPath, s.Name); !ok {
			p.refuse(w, r, &sequencer.RequestError{Status: http.StatusForbidden, Code: CodeLockNotGuarded, Message: why})
			return
		}
	}
	if rerr := p.confirm(r.Context(), s); rerr != nil {
		p.refuse(w, r, rerr)
		return
	}
	l, me, err := p.admit(s)
	if err != nil {
		p.refuse(w, r, checkError(err))
		return
	}
	defer p.finish(s.Name, l, me)
	if rerr := p.awaitOlder(r.Context(), s, l, me); rerr != nil {
		p.refuse(w, r, rerr)
		return
	}
	p.rp.ServeHTTP(w, r)
}

// checkError is the answer to a fence's refusal.
func checkError(err error) *sequencer.RequestError {
	if errors.Is(err, ErrFull) {
		return &sequencer.RequestError{Status: http.StatusServiceUnavailable, Code: CodeFenceFull, Message: err.Error()}
	}
	return sequencer.CheckError(err)
}

// refuse answers e, logging it.
func (p *Proxy) refuse(w http.ResponseWriter, r *http.Request, e *sequencer.RequestError) {
	if r.Context().Err() != nil {
		return
	}
	if e.Status >= 500 || e.Code == CodeUnconfirmed || e.Code == CodeLockNotGuarded {
		p.log.Warn("request refused", "method", r.Method, "path", r.URL.Path, "code", e.Code, "reason", e.Message)
	} else {
		p.log.Debug("request refused", "method", r.Method, "path", r.URL.Path, "code", e.Code, "reason", e.Message)
	}
	if e.Code == CodeDraining || e.Code == CodeClusterUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	sequencer.WriteError(w, e)
}

// needsConfirmation reports whether s must be confirmed by the cluster
// before the fence may record it.
func (p *Proxy) needsConfirmation(s sequencer.Sequencer) bool {
	if p.cluster == nil {
		return false
	}
	p.mu.Lock()
	above := s.Token > p.confirmed[s.Name]
	known := p.lastValid[s.Name] == s.String()
	p.mu.Unlock()
	if known {
		return false
	}
	if r, ok := p.fence.(Raiser); ok {
		return r.Raises(s)
	}
	return above
}

// confirm asks the cluster about s if it must (see Proxy), once for
// concurrent requests of the same sequencer, and refuses it unless the
// cluster says it is current.
func (p *Proxy) confirm(ctx context.Context, s sequencer.Sequencer) *sequencer.RequestError {
	if s.Validate() != nil || !p.needsConfirmation(s) {
		return nil // the fence refuses the malformed
	}
	text := s.String()
	p.mu.Lock()
	if p.lastValid[s.Name] == text {
		p.mu.Unlock() // confirmed since needsConfirmation looked
		return nil
	}
	q := p.asking[text]
	if q == nil {
		q = &question{done: make(chan struct{})}
		p.asking[text] = q
		p.mu.Unlock()
		go p.ask(s, text, q)
	} else {
		p.mu.Unlock()
	}
	select {
	case <-q.done:
	case <-ctx.Done():
		return &sequencer.RequestError{Status: http.StatusServiceUnavailable, Code: CodeClusterUnavailable, Message: ctx.Err().Error()}
	}
	switch {
	case q.err == nil && q.valid:
		return nil
	case q.err == nil:
		return &sequencer.RequestError{Status: http.StatusConflict, Code: CodeUnconfirmed,
			Message: fmt.Sprintf("%v: the cluster does not know it as a current grant of lock %q", s, s.Name)}
	}
	p.mu.Lock()
	high := p.confirmed[s.Name]
	p.mu.Unlock()
	if s.Token <= high {
		return nil // at or below what the cluster issued: as without a cluster
	}
	return &sequencer.RequestError{Status: http.StatusServiceUnavailable, Code: CodeClusterUnavailable,
		Message: fmt.Sprintf("%v: token %d is above %d, the highest the cluster confirmed for lock %q, and the cluster could not be asked: %v", s, s.Token, high, s.Name, q.err)}
}

// ask puts question q about s to the cluster and records the answer.
func (p *Proxy) ask(s sequencer.Sequencer, text string, q *question) {
	ctx, cancel := context.WithTimeout(context.Background(), p.ctimeout)
	defer cancel()
	chk, err := p.cluster.CheckSequencer(ctx, text)
	if err != nil {
		p.log.Warn("cannot confirm a sequencer with the cluster", "sequencer", text, "error", err)
	}
	p.mu.Lock()
	if err == nil {
		high := p.confirmed[s.Name]
		if chk.Valid {
			high = max(high, s.Token)
			p.lastValid[s.Name] = text
		}
		if high = max(high, chk.CurrentToken); high > 0 {
			p.confirmed[s.Name] = high
		}
	}
	q.valid, q.err = chk.Valid, err
	delete(p.asking, text)
	p.mu.Unlock()
	close(q.done)
}

// admit enters s into its lock's lane and checks it with the fence under
// the lane's lock, so that no request of the lock is sent between a newer
// one's check and its entry; other locks' requests go on meanwhile.
func (p *Proxy) admit(s sequencer.Sequencer) (*lane, *inflight, error) {
	p.mu.Lock()
	l := p.lanes[s.Name]
	if l == nil {
		l = &lane{sent: make(map[*inflight]sequencer.Sequencer), done: make(chan struct{})}
		p.lanes[s.Name] = l
	}
	l.users++
	p.mu.Unlock()
	l.mu.Lock()
	err := p.fence.Check(s)
	l.mu.Unlock()
	if err != nil {
		p.release(s.Name, l)
		return nil, nil, err
	}
	return l, &inflight{}, nil
}

// awaitOlder waits until no sent request of l is superseded, then marks
// me sent; it refuses s if s itself was superseded meanwhile, or the
// wait ran past the drain timeout.
func (p *Proxy) awaitOlder(ctx context.Context, s sequencer.Sequencer, l *lane, me *inflight) *sequencer.RequestError {
	var deadline <-chan time.Time
	for waited := false; ; waited = true {
		l.mu.Lock()
		if !p.fence.Current(s) {
			l.mu.Unlock()
			if waited {
				p.waiting.Add(-1)
			}
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
			l.mu.Unlock()
			if waited {
				p.waiting.Add(-1)
			}
			return nil
		}
		if !waited {
			p.waiting.Add(1)
			deadline = time.After(p.drain)
		}
		done := l.done
		l.mu.Unlock()
		select {
		case <-done:
		case <-deadline:
			p.waiting.Add(-1)
			return &sequencer.RequestError{Status: http.StatusServiceUnavailable, Code: CodeDraining,
				Message: fmt.Sprintf("lock %q: an older holder's requests are still in progress at the backend after %v; retry", s.Name, p.drain)}
		case <-ctx.Done():
			p.waiting.Add(-1)
			return &sequencer.RequestError{Status: http.StatusServiceUnavailable, Code: CodeDraining, Message: ctx.Err().Error()}
		}
	}
}

// finish takes me out of l, waking the requests that wait for it.
func (p *Proxy) finish(name string, l *lane, me *inflight) {
	l.mu.Lock()
	if _, ok := l.sent[me]; ok {
		delete(l.sent, me)
		close(l.done)
		l.done = make(chan struct{})
	}
	l.mu.Unlock()
	p.release(name, l)
}

// release drops one user of l, and l itself after its last.
func (p *Proxy) release(name string, l *lane) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l.users--
	if l.users == 0 {
		delete(p.lanes, name)
	}
}

// Waiting returns how many admitted requests wait for an older holder's
// requests to finish at the backend.
func (p *Proxy) Waiting() int {
	return int(p.waiting.Load())
}
