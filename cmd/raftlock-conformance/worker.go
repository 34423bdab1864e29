package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/sequencer"
	"github.com/raftlock/raftlock/session"
	"github.com/raftlock/raftlock/transport/client"
	"github.com/raftlock/raftlock/transport/tlsconf"
)

// goWorker is the reference worker: the line protocol served with the Go
// client (package session over client.Client). Broken variants, for the
// suite's own tests, are chosen with the environment variable
// RAFTLOCK_CONFORMANCE_BROKEN:
//   - "late-lost": a lock's lost event is reported at the lease's end plus
//     lock-delay plus half a second, counted from when the worker learned of
//     the grant or keepalive, as a client that counts from the wrong moment
//     and without a margin would;
//   - "new-holder": a lock whose answer was lost is asked for again with a
//     new holder id, as a client without holder-id retries would;
//   - "ignore-revoked": a lock whose grant the cluster revoked is never
//     reported lost, as a client that ignores a keepalive answer's
//     "revoked" would;
//   - "late-grant": a waiting lock is asked for over HTTP by the worker
//     itself, and its grant answer is taken as held however late it
//     comes, as a client that checks a grant only against the last
//     keepalive answer would once the revocation has left those answers;
//   - "ignore-slot-revoked": a semaphore slot's grant that the cluster
//     revoked is never reported lost (a plain lock's is), as a client
//     that matches keepalive answers' "revoked" only against plain grants
//     would;
//   - "ignore-tenure": fence_check uses a fence without the tenure rule
//     (tenurelessFence: the mode and slot rules only), as a fence from
//     before a name's kind or permits counted would.
type goWorker struct {
	out    *json.Encoder
	outMu  sync.Mutex
	broken string

	mu       sync.Mutex
	client   *client.Client
	sessions map[string]*session.Session
	locks    map[string]*session.Lock
	fences   map[string]sequencer.Checker
	streams  map[string]context.CancelFunc
	ctx      context.Context
	// attempt bounds one attempt of the "new-holder" variant: half the
	// request timeout, so the client's own same-holder retry never runs.
	attempt   time.Duration
	endpoints []string
}

// runGoWorker serves the protocol on stdin/stdout until stdin ends or
// "quit" arrives.
func runGoWorker(ctx context.Context, in io.Reader, out io.Writer) error {
	w := &goWorker{out: json.NewEncoder(out), broken: os.Getenv("RAFTLOCK_CONFORMANCE_BROKEN"), ctx: ctx,
		sessions: map[string]*session.Session{}, locks: map[string]*session.Lock{}, fences: map[string]sequencer.Checker{}, streams: map[string]context.CancelFunc{}}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var wg sync.WaitGroup
	defer wg.Wait()
	for sc.Scan() {
		var m message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			w.send(message{OK: ptr(false), Code: "invalid_argument", Message: "bad request line: " + err.Error()})
			continue
		}
		if m.Op == "quit" {
			w.closeAll()
			w.send(message{ID: m.ID, OK: ptr(true)})
			return nil
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.send(w.handle(m))
		}()
	}
	w.closeAll()
	return sc.Err()
}

func (w *goWorker) send(m message) {
	w.outMu.Lock()
	defer w.outMu.Unlock()
	w.out.Encode(m)
}

// fail is the reply to request m failing with err, named by its code; a
// session's id (a secret) is never in a message.
func (w *goWorker) fail(m message, err error) message {
	code := string(api.CodeOf(err))
	if errors.Is(err, context.DeadlineExceeded) {
		code = string(api.CodeWaitTimeout)
	}
	msg := err.Error()
	w.mu.Lock()
	for _, s := range w.sessions {
		msg = strings.ReplaceAll(msg, s.ID(), "(handle "+s.Handle()+")")
	}
	w.mu.Unlock()
	return message{ID: m.ID, OK: ptr(false), Code: code, Message: msg}
}

func (w *goWorker) handle(m message) message {
	ok := message{ID: m.ID, OK: ptr(true)}
	ctx := w.ctx
	switch m.Op {
	case "hello":
		ok.Client = "go: github.com/raftlock/raftlock/session"
		return ok
	case "connect":
		opts := []client.ClientOption{}
		if m.RequestTimeout > 0 {
			opts = append(opts, client.WithRequestTimeout(seconds(m.RequestTimeout)))
		}
		if m.CA != "" {
			cfg, err := tlsconf.ClientConfig(m.CA, m.Cert, m.Key)
			if err != nil {
				return w.fail(m, api.Errorf(api.CodeInvalidArgument, "tls: %v", err))
			}
			opts = append(opts, client.WithTLS(cfg))
		}
		if m.ACLToken != "" {
			opts = append(opts, client.WithToken(m.ACLToken))
		}
		c, err := client.NewClient(m.Endpoints, opts...)
		if err != nil {
			return w.fail(m, err)
		}
		w.mu.Lock()
		w.client = c
		w.endpoints = m.Endpoints
		w.attempt = seconds(m.RequestTimeout) / 2
		w.mu.Unlock()
		return ok
	case "open":
		return w.open(ctx, m)
	case "lock":
		return w.lock(ctx, m)
	case "campaign":
		s := w.session(m.Session)
		if s == nil {
			return w.fail(m, api.Errorf(api.CodeInvalidArgument, "no session %q", m.Session))
		}
		cctx, cancel := ctx, context.CancelFunc(func() {})
		if m.Wait > 0 {
			cctx, cancel = context.WithTimeout(ctx, seconds(m.Wait))
		}
		defer cancel()
		ld, err := s.Campaign(cctx, m.Name, m.Value)
		if err != nil {
			return w.fail(m, err)
		}
		w.mu.Lock()
		w.locks[m.Lock] = ld.Lock
		w.mu.Unlock()
		go w.watchLost(m.Lock, ld.Lock)
		return message{ID: m.ID, OK: ptr(true), Sequencer: ld.Sequencer().String(), Token: uint64(ld.Token()), Holder: ld.Holder()}
	case "watch", "observe":
		return w.stream(m)
	case "stop":
		w.mu.Lock()
		stop := w.streams[m.Watch]
		delete(w.streams, m.Watch)
		w.mu.Unlock()
		if stop != nil {
			stop()
		}
		return ok
	case "unlock":
		w.mu.Lock()
		l := w.locks[m.Lock]
		w.mu.Unlock()
		if l == nil {
			return w.fail(m, api.Errorf(api.CodeInvalidArgument, "no lock %q", m.Lock))
		}
		if err := l.Unlock(ctx); err != nil {
			return w.fail(m, err)
		}
		return ok
	case "close":
		s := w.session(m.Session)
		if s == nil {
			return w.fail(m, api.Errorf(api.CodeInvalidArgument, "no session %q", m.Session))
		}
		if err := s.Close(ctx); err != nil {
			return w.fail(m, err)
		}
		return ok
	case "state":
		s := w.session(m.Session)
		if s == nil {
			return w.fail(m, api.Errorf(api.CodeInvalidArgument, "no session %q", m.Session))
		}
		ok.State = s.State().String()
		return ok
	case "fence_check":
		w.mu.Lock()
		f := w.fences[m.Fence]
		if f == nil {
			f = sequencer.NewFence()
			if w.broken == "ignore-tenure" {
				f = newTenurelessFence()
			}
			w.fences[m.Fence] = f
		}
		w.mu.Unlock()
		err := checkString(f, m.Sequencer)
		switch {
		case err == nil:
			ok.Verdict = "admit"
		case errors.Is(err, sequencer.ErrStale):
			ok.Verdict = "stale"
		case errors.Is(err, sequencer.ErrMalformed):
			ok.Verdict = "malformed"
		default:
			return w.fail(m, err)
		}
		return ok
	default:
		return w.fail(m, api.Errorf(api.CodeInvalidArgument, "unknown op %q", m.Op))
	}
}

// stream starts a watch (lock_state events) or an observation (leader
// events) of m.Name, named m.Watch, until "stop".
func (w *goWorker) stream(m message) message {
	w.mu.Lock()
	c := w.client
	w.mu.Unlock()
	if c == nil {
		return w.fail(m, api.Errorf(api.CodeInvalidArgument, "connect first"))
	}
	ctx, cancel := context.WithCancel(w.ctx)
	ref := m.Watch
	if m.Op == "watch" {
		states, err := session.Watch(ctx, c, m.Name)
		if err != nil {
			cancel()
			return w.fail(m, err)
		}
		go func() {
			for st := range states {
				var hs []uint64
				for _, h := range st.Holders {
					hs = append(hs, uint64(h.Token))
				}
				w.send(message{Event: "lock_state", Watch: ref, Holders: hs, At: unixSeconds(time.Now())})
			}
		}()
	} else {
		leaders, err := session.Observe(ctx, c, m.Name)
		if err != nil {
			cancel()
			return w.fail(m, err)
		}
		go func() {
			for ld := range leaders {
				w.send(message{Event: "leader", Watch: ref, Value: ld.Value, Token: uint64(ld.Token()),
					Sequencer: ld.Sequencer.String(), At: unixSeconds(time.Now())})
			}
		}()
	}
	w.mu.Lock()
	w.streams[ref] = cancel
	w.mu.Unlock()
	return message{ID: m.ID, OK: ptr(true)}
}

func (w *goWorker) session(ref string) *session.Session {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sessions[ref]
}

func (w *goWorker) open(ctx context.Context, m message) message {
	w.mu.Lock()
	c := w.client
	w.mu.Unlock()
	if c == nil {
		return w.fail(m, api.Errorf(api.CodeInvalidArgument, "connect first"))
	}
	opts := []session.Option{session.TTL(seconds(m.TTL)), session.Name(m.Name)}
	if m.LockDelay != nil {
		if *m.LockDelay == 0 {
			opts = append(opts, session.LockDelay(api.NoLockDelay))
		} else {
			opts = append(opts, session.LockDelay(seconds(*m.LockDelay)))
		}
	}
	if m.Grace > 0 {
		opts = append(opts, session.GracePeriod(seconds(m.Grace)))
	}
	ref := m.Session
	opts = append(opts, session.OnEvent(func(e session.Event) {
		w.send(message{Event: "state", Session: ref, State: e.State.String(), At: unixSeconds(time.Now())})
	}))
	if m.TTL == 0 {
		opts[0] = session.TTL(0)
	}
	s, err := session.Open(ctx, c, opts...)
	if err != nil {
		return w.fail(m, err)
	}
	w.mu.Lock()
	w.sessions[ref] = s
	w.mu.Unlock()
	return message{ID: m.ID, OK: ptr(true)}
}

func (w *goWorker) lock(ctx context.Context, m message) message {
	s := w.session(m.Session)
	if s == nil {
		return w.fail(m, api.Errorf(api.CodeInvalidArgument, "no session %q", m.Session))
	}
	mode, err := sequencer.ParseMode(m.Mode)
	if err != nil {
		return w.fail(m, api.Errorf(api.CodeInvalidArgument, "%v", err))
	}
	var l *session.Lock
	opts := []session.LockOption{session.Value(m.Value)}
	if m.Permits > 0 {
		opts = append(opts, session.Permits(m.Permits))
	}
	if w.broken == "new-holder" {
		return w.lockNewHolder(ctx, s, m, mode)
	}
	if w.broken == "late-grant" && m.Wait > 0 {
		return w.lockLateGrant(ctx, s, m, mode)
	}
	switch {
	case m.Wait > 0:
		wctx, cancel := context.WithTimeout(ctx, seconds(m.Wait))
		defer cancel()
		if mode == sequencer.Shared {
			l, err = s.RLock(wctx, m.Name, opts...)
		} else {
			l, err = s.Lock(wctx, m.Name, opts...)
		}
	case mode == sequencer.Shared:
		l, err = s.TryRLock(ctx, m.Name, opts...)
	default:
		l, err = s.TryLock(ctx, m.Name, opts...)
	}
	if err != nil {
		return w.fail(m, err)
	}
	w.mu.Lock()
	w.locks[m.Lock] = l
	w.mu.Unlock()
	go w.watchLost(m.Lock, l)
	r := message{ID: m.ID, OK: ptr(true), Sequencer: l.Sequencer().String(), Token: uint64(l.Token()), Holder: l.Holder()}
	if l.Permits() > 0 {
		r.Permits, r.Slot = l.Permits(), ptr(l.Slot())
	}
	return r
}

// watchLost reports the lock's lost event when its Lost channel closes
// (late, in the "late-lost" broken variant).
func (w *goWorker) watchLost(ref string, l *session.Lock) {
	if w.broken == "late-lost" {
		w.lateLost(ref, l)
		return
	}
	asked := l.ReleaseRequested()
	for {
		select {
		case <-asked:
			asked = nil
			by, _ := l.RequestedBy()
			w.send(message{Event: "release_requested", Lock: ref, ByHolder: by.ByHolder, At: unixSeconds(time.Now())})
			continue
		case <-l.Lost():
			ev := message{Event: "lost", Lock: ref, At: unixSeconds(time.Now())}
			var rev *session.RevokedError
			if errors.As(l.Err(), &rev) {
				if w.broken == "ignore-revoked" || w.broken == "ignore-slot-revoked" && l.Permits() > 0 {
					return
				}
				ev.Kind, ev.Reason = rev.Kind, rev.Reason
			}
			w.send(ev)
		case <-w.ctx.Done():
		}
		return
	}
}

// lateLost is the broken "late-lost" variant: lost is reported
// ttl + lock-delay + 0.5 s after the session's lost deadline was last
// renewed, as seen by polling it.
func (w *goWorker) lateLost(ref string, l *session.Lock) {
	s := l.Session()
	late := s.TTL() + s.LockDelay() + 500*time.Millisecond
	renewed := time.Now()
	last := s.LostDeadline()
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-time.After(20 * time.Millisecond): // polling is the bug's model, not a sync
		}
		if d := s.LostDeadline(); d.After(last) {
			last, renewed = d, time.Now()
		}
		if time.Since(renewed) >= late {
			w.send(message{Event: "lost", Lock: ref, At: unixSeconds(time.Now())})
			return
		}
	}
}

// lockNewHolder is the broken "new-holder" variant of a try lock: it
// speaks HTTP itself (the Go client would retry with the same holder id),
// each attempt with a new holder id and a deadline of half the request
// timeout, so an attempt whose answer was lost is followed by one that the
// cluster sees as somebody else's.
func (w *goWorker) lockNewHolder(ctx context.Context, s *session.Session, m message, mode sequencer.Mode) message {
	w.mu.Lock()
	addrs, per := w.endpoints, w.attempt
	w.mu.Unlock()
	if per <= 0 {
		per = time.Second
	}
	hc := &http.Client{Timeout: per}
	var last error
	for attempt := range 5 {
		holder := fmt.Sprintf("broken-%d-%d", time.Now().UnixNano(), attempt)
		body, _ := json.Marshal(map[string]string{"name": m.Name, "session": s.ID(), "holder": holder, "mode": mode.String()})
		resp, err := hc.Post("http://"+addrs[attempt%len(addrs)]+"/v1/acquire", "application/json", bytes.NewReader(body))
		if err != nil {
			last = err
			continue
		}
		if reply, done, err := w.acquireAnswer(m, holder, resp); done {
			return reply
		} else if err != nil {
			last = err
		}
	}
	return w.fail(m, api.Errorf(api.CodeUnknownOutcome, "gave up after 5 attempts: %v", last))
}

// acquireAnswer reads a raw POST /v1/acquire answer for the broken
// variants that speak HTTP themselves: the reply to the suite and true,
// or false for an attempt to make again (an answer that could not be
// read, its error returned; unknown_outcome or no_leader).
func (w *goWorker) acquireAnswer(m message, holder string, resp *http.Response) (message, bool, error) {
	var ans struct {
		Token     uint64
		Sequencer string
		Error     *struct{ Code, Message string }
	}
	err := json.NewDecoder(resp.Body).Decode(&ans)
	resp.Body.Close()
	switch {
	case err != nil:
		return message{}, false, err
	case ans.Error != nil && ans.Error.Code != string(api.CodeUnknownOutcome) && ans.Error.Code != string(api.CodeNoLeader):
		return w.fail(m, api.Errorf(api.Code(ans.Error.Code), "%s", ans.Error.Message)), true, nil
	case ans.Error == nil:
		return message{ID: m.ID, OK: ptr(true), Sequencer: ans.Sequencer, Token: ans.Token, Holder: holder}, true, nil
	}
	return message{}, false, nil
}

// lockLateGrant is the broken "late-grant" variant of a waiting lock: it
// speaks HTTP itself, one holder id, and takes the first grant answer as
// held, however long after its request it came. The lock is never
// reported lost.
func (w *goWorker) lockLateGrant(ctx context.Context, s *session.Session, m message, mode sequencer.Mode) message {
	w.mu.Lock()
	addrs := w.endpoints
	w.mu.Unlock()
	hc := &http.Client{Timeout: seconds(m.Wait) + 5*time.Second}
	holder := fmt.Sprintf("broken-%d", time.Now().UnixNano())
	body, _ := json.Marshal(map[string]string{"name": m.Name, "session": s.ID(), "holder": holder, "mode": mode.String(),
		"wait": seconds(m.Wait).String()})
	var last error
	for attempt := range 5 {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addrs[attempt%len(addrs)]+"/v1/acquire", bytes.NewReader(body))
		if err != nil {
			return w.fail(m, err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			last = err
			continue
		}
		if reply, done, err := w.acquireAnswer(m, holder, resp); done {
			return reply
		} else if err != nil {
			last = err
		}
	}
	return w.fail(m, api.Errorf(api.CodeUnknownOutcome, "gave up after 5 attempts: %v", last))
}

func (w *goWorker) closeAll() {
	w.mu.Lock()
	ss := w.sessions
	w.sessions = map[string]*session.Session{}
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range ss {
		s.Close(ctx)
	}
}

// seconds converts the protocol's float seconds.
func seconds(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
