package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftlock/raftlock/api"
)

// recProxy is how the checker sees what a conformance worker sends: the
// worker is given the proxy's addresses (plain HTTP on 127.0.0.1, one per
// node address, spares included), and the proxy forwards every request to
// its node from the client's own source address, with the client's TLS
// certificate and ACL token, recording each request that changes sessions
// or locks as one operation of the history, as the recorder does for the
// Go client's calls: the history then holds exactly the requests the
// cluster saw, each HTTP attempt one operation (Attempts 1). A request
// whose answer the worker gave up on (it closed the connection) is
// recorded with an unknown outcome; a request that broke after it was
// sent is recorded unknown and the worker's connection is cut, so that the
// worker, too, cannot know; one that could not be sent (a failed dial) is
// answered no_leader, which promises what it promises from a node:
// nothing was appended. Node addresses in answers (X-Raftlock-Leader-Addr,
// the members in a body) are rewritten to the proxy's addresses for them.
type recProxy struct {
	link *link
	hc   *http.Client
	// toProxy maps a node's host:port to the proxy's address for it.
	toProxy map[string]string
	addrs   []string // the proxy's addresses, in the order of the nodes
	servers []*http.Server
	last    atomic.Pointer[string]
	opened  atomic.Pointer[string]

	mu        sync.Mutex
	unlocking map[string]int // holder ids with an Unlock in flight
}

// newRecProxy listens on 127.0.0.1 for each of targets (node API
// addresses, https://host:port or host:port) and forwards through hc.
func newRecProxy(l *link, hc *http.Client, targets []string) (*recProxy, error) {
	p := &recProxy{link: l, hc: hc, toProxy: map[string]string{}, unlocking: map[string]int{}}
	for _, t := range targets {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			p.close()
			return nil, fmt.Errorf("worker proxy: %w", err)
		}
		base := t
		if !strings.Contains(base, "://") {
			base = "http://" + base
		}
		srv := &http.Server{Handler: p.handler(base), ReadHeaderTimeout: 10 * time.Second}
		p.servers = append(p.servers, srv)
		p.toProxy[hostPort(t)] = ln.Addr().String()
		p.addrs = append(p.addrs, ln.Addr().String())
		go func() { _ = srv.Serve(ln) }()
	}
	return p, nil
}

func (p *recProxy) close() {
	for _, s := range p.servers {
		_ = s.Close()
	}
}

// where names the node the last request went to ("" if none).
func (p *recProxy) where() string {
	if a := p.last.Load(); a != nil {
		return *a
	}
	return ""
}

// lastOpened is the id of the session the last successful open created.
func (p *recProxy) lastOpened() string {
	if s := p.opened.Load(); s != nil {
		return *s
	}
	return ""
}

// unlock marks holder's releases as a Lock.Unlock's until the returned
// function is called.
func (p *recProxy) unlock(holder string) func() {
	p.mu.Lock()
	p.unlocking[holder]++
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.unlocking[holder]--; p.unlocking[holder] <= 0 {
			delete(p.unlocking, holder)
		}
	}
}

func (p *recProxy) isUnlocking(holder string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.unlocking[holder] > 0
}

// maxProxyBody bounds a request or answer the proxy passes on.
const maxProxyBody = 16 << 20

// callOf returns the operation a request is (Kind empty: not recorded).
func (p *recProxy) callOf(r *http.Request, body []byte) message {
	path := r.URL.Path
	switch {
	case r.Method == http.MethodPost && path == "/v1/sessions":
		return message{Kind: kindOpen}
	case r.Method == http.MethodPost && strings.HasPrefix(path, "/v1/sessions/") && strings.HasSuffix(path, "/keepalive"):
		return message{Kind: kindKeepAlive, Session: strings.TrimSuffix(strings.TrimPrefix(path, "/v1/sessions/"), "/keepalive")}
	case r.Method == http.MethodDelete && strings.HasPrefix(path, "/v1/sessions/"):
		return message{Kind: kindClose, Session: strings.TrimPrefix(path, "/v1/sessions/")}
	case r.Method == http.MethodPost && path == "/v1/acquire":
		var b api.AcquireBody
		_ = json.Unmarshal(body, &b)
		wait, _ := time.ParseDuration(b.Wait)
		return message{Kind: kindAcquire, Lock: b.Name, Session: b.Session, Holder: b.Holder,
			Wait: wait > 0, WaitFor: int64(max(wait, 0))}
	case r.Method == http.MethodPost && path == "/v1/release":
		var b api.ReleaseBody
		_ = json.Unmarshal(body, &b)
		return message{Kind: kindRelease, Lock: b.Name, Session: b.Session, Holder: b.Holder, Unlock: p.isUnlocking(b.Holder)}
	}
	return message{}
}

func (p *recProxy) handler(base string) http.Handler {
	node := hostPort(base)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxProxyBody))
		if err != nil {
			return
		}
		call := p.callOf(r, body)
		var id uint64
		if call.Kind != "" {
			m := call
			m.T, m.ID, m.At = msgCall, p.link.nextID(), monoNow()
			id = m.ID
			p.link.send(m)
		}
		p.last.Store(&node)
		req, err := http.NewRequestWithContext(r.Context(), r.Method, base+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, h := range []string{"Content-Type", "Accept"} {
			if v := r.Header.Get(h); v != "" {
				req.Header.Set(h, v)
			}
		}
		resp, err := p.hc.Do(req)
		var raw []byte
		if err == nil {
			raw, err = io.ReadAll(io.LimitReader(resp.Body, maxProxyBody))
			resp.Body.Close()
		}
		if err != nil {
			var op *net.OpError
			notSent := errors.As(err, &op) && op.Op == "dial" && r.Context().Err() == nil
			if notSent {
				err = api.Errorf(api.CodeNoLeader, "worker proxy: %v", err)
			}
			p.end(id, call, nil, 0, err, !notSent)
			if !notSent {
				// The worker cannot know the outcome either.
				panic(http.ErrAbortHandler)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(api.ErrorReply{Error: api.ErrorBody{Code: string(api.CodeNoLeader), Message: "worker proxy: node unreachable"}})
			return
		}
		var aerr error
		unsure := false
		if resp.StatusCode >= 300 {
			var er api.ErrorReply
			_ = json.Unmarshal(raw, &er)
			code := api.Code(er.Error.Code)
			aerr = api.Errorf(code, "%s", er.Error.Message)
			if code == "" {
				aerr = fmt.Errorf("HTTP %d", resp.StatusCode)
			}
			unsure = resp.StatusCode >= 500 && code != api.CodeNoLeader
		}
		p.end(id, call, raw, resp.StatusCode, aerr, unsure)
		for k, vs := range resp.Header {
			if k == "Content-Length" {
				continue
			}
			for _, v := range vs {
				w.Header().Add(k, v)
			}
		}
		if la := resp.Header.Get("X-Raftlock-Leader-Addr"); la != "" {
			if pa, ok := p.toProxy[hostPort(la)]; ok {
				w.Header().Set("X-Raftlock-Leader-Addr", pa)
			} else {
				w.Header().Del("X-Raftlock-Leader-Addr")
			}
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(p.rewrite(raw))
	})
}

// rewrite replaces every node address in an answer (the members of
// GET /v1/cluster, a leader named in an error) with the proxy's address
// for it, so that a client that learns addresses from answers (the Go
// client's member sync) keeps talking through the proxy.
func (p *recProxy) rewrite(raw []byte) []byte {
	for node, proxy := range p.toProxy {
		raw = bytes.ReplaceAll(raw, []byte(node), []byte(proxy))
	}
	return raw
}

// end records the return of operation id (if call is recorded): err nil
// is a success whose answer is raw.
func (p *recProxy) end(id uint64, call message, raw []byte, status int, err error, unsure bool) {
	if call.Kind == "" {
		return
	}
	m := message{T: msgRet, ID: id, Kind: call.Kind}
	switch call.Kind {
	case kindOpen, kindKeepAlive:
		m.Result, m.Err = failedUnlessNotFound(err)
	default:
		m.Result, m.Err = outcome(err)
	}
	if call.Kind == kindAcquire || call.Kind == kindRelease {
		m.Attempts = 1
		if unsure {
			m.Unsure = 1
		}
	}
	if err == nil && status/100 == 2 {
		switch call.Kind {
		case kindOpen:
			var o api.OpenSessionReply
			_ = json.Unmarshal(raw, &o)
			ttl, _ := time.ParseDuration(o.TTL)
			ld, _ := time.ParseDuration(o.LockDelay)
			m.Session, m.TTL, m.LockDelay = o.ID, int64(ttl), int64(ld)
			if o.ID != "" {
				p.opened.Store(&o.ID)
			}
		case kindKeepAlive:
			var k api.KeepAliveReply
			_ = json.Unmarshal(raw, &k)
			ttl, _ := time.ParseDuration(k.TTL)
			m.TTL = int64(ttl)
		case kindAcquire:
			var g api.GrantReply
			_ = json.Unmarshal(raw, &g)
			m.Token = g.Token
		}
	}
	m.At = monoNow()
	p.link.send(m)
}
