package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/sequencer"
	"github.com/raftlock/raftlock/transport/tlsconf"

	"github.com/raftlock/raftlock/session"
	"github.com/raftlock/raftlock/transport/client"
	"github.com/raftlock/raftlock/transport/stream"
)

// clientConfig is what the checker tells a client process.
type clientConfig struct {
	Index int      `json:"index"`
	Addrs []string `json:"addrs"`
	Locks []string `json:"locks"`
	Seed  int64    `json:"seed"`
	// TTL and LockDelay of the client's sessions.
	TTL       time.Duration `json:"ttl"`
	LockDelay time.Duration `json:"lock_delay"`
	// Grace is the sessions' grace period: how long the client keeps a
	// session in jeopardy before it declares it expired (0: the session
	// package's default).
	Grace time.Duration `json:"grace,omitempty"`
	// SourceIP is the loopback address the client's connections to the
	// cluster come from (empty: the kernel's choice), so that a partition
	// can cut this one client off.
	SourceIP string `json:"source_ip,omitempty"`
	// NaiveShare of the acquires are the naive waiter's (see naiveWait).
	NaiveShare float64 `json:"naive_share,omitempty"`
	// MaxHoldShare of the Go client's acquires set a hold limit
	// (pickMaxHold).
	MaxHoldShare float64 `json:"max_hold_share,omitempty"`
	// Clients is the number of client processes of the run (they take
	// turns at long holds).
	Clients int `json:"clients,omitempty"`
	// TLSCA, TLSCert and TLSKey are the PEM files of the CA and of the
	// client certificate, for a cluster with TLS (Addrs are then
	// https://host:port).
	TLSCA   string `json:"tls_ca,omitempty"`
	TLSCert string `json:"tls_cert,omitempty"`
	TLSKey  string `json:"tls_key,omitempty"`
	// Token is the ACL token's secret for a cluster with ACLs on.
	Token string `json:"token,omitempty"`
	// Stream: the Go client's requests go over the stream protocol where
	// a node serves it (--client-proto stream).
	Stream bool `json:"stream,omitempty"`
	// HTTP2: the client's requests go over HTTP/2 alone (h2 by ALPN over
	// TLS, h2c without; --client-proto http2), all of them multiplexed on
	// one connection per node.
	HTTP2 bool `json:"http2,omitempty"`
	// Worker, when set, is the command line of a conformance worker
	// (docs/CONFORMANCE.md) the client drives the workload through
	// (worker.go); SpareAddrs are the addresses of the spare nodes, which
	// the worker is given besides Addrs.
	Worker     []string `json:"worker,omitempty"`
	SpareAddrs []string `json:"spare_addrs,omitempty"`
	// Permits, above 0, takes every lock as a semaphore of that many
	// slots (a semaphore run; no naive waiter).
	Permits int `json:"permits,omitempty"`
	// MixedKinds: every acquire picks its kind at random (--mixed-kinds).
	MixedKinds bool `json:"mixed_kinds,omitempty"`
	// UnsafeClient names a deliberate bug of the Go client (Config's
	// UnsafeClient): the client process must be built with -tags
	// raftlock_faults.
	UnsafeClient string `json:"unsafe_client,omitempty"`
	// unsafeOpts are UnsafeClient's session options (newWorkload).
	unsafeOpts []session.Option
}

// Shape of a client's work.
const (
	// readShare of the steps read a random lock; waitShare of the acquires
	// wait in the queue, the others try once.
	readShare = 0.15
	waitShare = 0.6
	// A holder works for holdMin..holdMax, writing to the resource every
	// writeMin..writeMax; its first write comes prepMin..prepMax after the
	// grant.
	holdMin, holdMax = 500 * time.Millisecond, 2500 * time.Millisecond
	// maxHoldMin..maxHoldMax is the hold limit of an acquire that sets
	// one (--max-hold-share): within the holds' lengths, so that about
	// half of them run into it.
	maxHoldMin, maxHoldMax = time.Second, 2 * time.Second
	writeMin, writeMax     = 150 * time.Millisecond, 400 * time.Millisecond
	prepMin, prepMax       = 300 * time.Millisecond, 800 * time.Millisecond
	// Of the waits, giveUpShare give up after giveUpMin..giveUpMax (their
	// ctx is cancelled: the client must then dequeue them), longWaitShare
	// have a deadline of longWaitMin..longWaitMax (longer than the 30 s
	// slices an older client cut a wait into, re-queueing at the back),
	// the others wait without a deadline.
	giveUpShare, longWaitShare = 0.2, 0.3
	giveUpMin, giveUpMax       = 500 * time.Millisecond, 5 * time.Second
	longWaitMin, longWaitMax   = 35 * time.Second, 60 * time.Second
	// Long holds: the clients take turns, one every longHoldEvery (client
	// i in the i-th period, modulo the number of clients): its first grant
	// of the first lock from longHoldFrom to longHoldTo into its period is
	// held longHoldMin..longHoldMax. The clients that wait behind it wait
	// longer than 30 s, and queues of two and more form. At most one long
	// hold begins a period, so the lock is long-held at most three
	// quarters of the time.
	longHoldEvery            = 60 * time.Second
	longHoldFrom, longHoldTo = 5 * time.Second, 20 * time.Second
	longHoldMin, longHoldMax = 35 * time.Second, 45 * time.Second
	// The naive waiter waits naiveWaitMin..naiveWaitMax.
	naiveWaitMin, naiveWaitMax = 5 * time.Second, 40 * time.Second
	// ownReadShare of a holder's steps read its own lock.
	ownReadShare = 0.25
	// Between steps a client thinks thinkMin..thinkMax.
	thinkMin, thinkMax = 20 * time.Millisecond, 250 * time.Millisecond
	// readTimeout bounds one read; unlockTimeout one release; closeTimeout
	// the close at the end.
	readTimeout   = 3 * time.Second
	unlockTimeout = 20 * time.Second
	closeTimeout  = 10 * time.Second
	// A pinned holder in jeopardy looks whether its session is safe again
	// every jeopardyPoll.
	jeopardyPoll = 50 * time.Millisecond
	// lostReportWait bounds the wait, after Unlock, for the report that
	// Lost() closed (Unlock closes it first, so it is already on its way).
	lostReportWait = time.Second
)

// workload is one client process's work: sessions, locks, writes.
type workload struct {
	cfg     clientConfig
	link    *link
	backend *recorder
	readers []*recorder
	// naive records the naive waiter's single-attempt acquires.
	naive *recorder
	// born is when the client started; longPeriod is the last period
	// (see longHoldEvery) in which it began a long hold (-1: none).
	born       time.Time
	longPeriod int

	rmu sync.Mutex
	rng *rand.Rand
	// kinds is each lock's kind of the client's last acquire of it (a
	// mixed-kinds run; see pickKind), under rmu.
	kinds map[string]grantKind

	// hmu guards what the client holds now and whether the checker pinned
	// it (see msgPin).
	hmu     sync.Mutex
	holding clientLock
	holdS   clientSession
	pinned  bool

	// worker, when set, is the conformance worker the sessions and locks
	// go through (worker.go) instead of the Go session package.
	worker *workerClient
}

func newWorkload(cfg clientConfig, l *link, stderr io.Writer) (*workload, error) {
	rng := rand.New(rand.NewSource(cfg.Seed))
	addrs := append([]string(nil), cfg.Addrs...)
	rng.Shuffle(len(addrs), func(i, j int) { addrs[i], addrs[j] = addrs[j], addrs[i] })
	var tc *tls.Config
	if cfg.TLSCA != "" {
		var err error
		if tc, err = tlsconf.ClientConfig(cfg.TLSCA, cfg.TLSCert, cfg.TLSKey); err != nil {
			return nil, fmt.Errorf("client %d: %w", cfg.Index, err)
		}
	}
	hc, err := httpClient(cfg.SourceIP, tc)
	if err != nil {
		return nil, fmt.Errorf("client %d: %w", cfg.Index, err)
	}
	if cfg.HTTP2 {
		hc.Transport.(attemptCounter).inner.(*http.Transport).Protocols = client.HTTP2Only()
	}
	if cfg.Stream {
		// Under the attempt counter: from the client's source IP.
		ac := hc.Transport.(attemptCounter)
		tr := ac.inner.(*http.Transport)
		ac.inner = &stream.Transport{Fallback: tr, Dial: tr.DialContext, TLSConfig: tc}
		hc.Transport = ac
	}
	// Every request carries the client's ACL token of the moment: the
	// checker hands it a new one when it deleted the old (msgToken).
	bt := &bearer{inner: hc.Transport}
	bt.set(cfg.Token)
	hc.Transport = bt
	l.token = bt.set
	opts := []client.ClientOption{client.WithHTTPClient(hc)}
	// The Go client's requests go through la, which answers msgWhere.
	// Under la, the layer that holds a late answer (faultLateAnswer).
	late := newLateAnswers(hc.Transport, l)
	l.late, l.latePins = late.handle, late.pins
	la := &lastAddr{inner: late}
	l.where = la.last
	c, err := client.NewClient(addrs, client.WithHTTPClient(&http.Client{Transport: la}))
	if err != nil {
		return nil, fmt.Errorf("client %d: %w", cfg.Index, err)
	}
	if cfg.unsafeOpts, err = unsafeSessionOptions(cfg.UnsafeClient); err != nil {
		return nil, fmt.Errorf("client %d: %w", cfg.Index, err)
	}
	w := &workload{cfg: cfg, link: l, backend: &recorder{inner: c, link: l}, rng: rng, born: time.Now(), longPeriod: -1}
	if len(cfg.Worker) > 0 {
		// The worker is given every address a member may have (spares
		// included; the members first, in this client's order): a client
		// of the protocol need not learn the members from the cluster.
		targets := append(append([]string(nil), addrs...), cfg.SpareAddrs...)
		p, err := newRecProxy(l, &http.Client{Transport: bt}, targets)
		if err != nil {
			return nil, fmt.Errorf("client %d: %w", cfg.Index, err)
		}
		l.where = p.where
		if w.worker, err = startWorker(cfg, l, p, cfg.Worker, stderr); err != nil {
			p.close()
			return nil, fmt.Errorf("client %d: %w", cfg.Index, err)
		}
	}
	w.naive = &recorder{inner: &rawBackend{Backend: c, hc: hc, addrs: cfg.Addrs, pick: w.intn}, link: l, naive: true}
	for _, a := range cfg.Addrs {
		rc, err := client.NewClient([]string{a}, append(opts, client.WithRequestTimeout(readTimeout))...)
		if err != nil {
			return nil, fmt.Errorf("client %d: %w", cfg.Index, err)
		}
		w.readers = append(w.readers, &recorder{inner: rc, link: l, node: hostPort(a)})
	}
	return w, nil
}

// pickKind picks the kind of an acquire of name in a mixed-kinds run: the
// kind of the client's last acquire of name, or, one time in four, the
// first time and after a refusal of that kind (forgetKind), a new one
// (mixedKind). Other clients pick theirs, so the kinds meet; the
// stickiness keeps most acquires from being refused.
func (w *workload) pickKind(name string) (shared bool, permits uint64) {
	w.rmu.Lock()
	defer w.rmu.Unlock()
	k, ok := w.kinds[name]
	if !ok || w.rng.Intn(4) == 0 {
		k.shared, k.permits = mixedKind(w.rng.Intn)
		if w.kinds == nil {
			w.kinds = map[string]grantKind{}
		}
		w.kinds[name] = k
	}
	return k.shared, k.permits
}

// pickMaxHold picks the hold limit of an acquire: maxHoldMin..maxHoldMax
// for MaxHoldShare of them, else none (0).
func (w *workload) pickMaxHold() time.Duration {
	if w.float() >= w.cfg.MaxHoldShare {
		return 0
	}
	return w.between(maxHoldMin, maxHoldMax)
}

// forgetKind makes the next acquire of name pick a new kind: the lock
// refused the last one (invalid_argument).
func (w *workload) forgetKind(name string) {
	w.rmu.Lock()
	defer w.rmu.Unlock()
	delete(w.kinds, name)
}

func (w *workload) float() float64 {
	w.rmu.Lock()
	defer w.rmu.Unlock()
	return w.rng.Float64()
}

func (w *workload) intn(n int) int {
	w.rmu.Lock()
	defer w.rmu.Unlock()
	return w.rng.Intn(n)
}

func (w *workload) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(w.float()*float64(hi-lo))
}

func (w *workload) logf(format string, args ...any) {
	w.link.send(message{T: msgLog, At: monoNow(), Err: fmt.Sprintf(format, args...)})
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// run works until ctx ends: it opens a session, uses it until it is over,
// and opens the next; at the end it closes the session it has.
func (w *workload) run(ctx context.Context) {
	go w.verifyLoop(ctx)
	go w.pinLoop(ctx)
	for ctx.Err() == nil {
		s, err := w.open(ctx)
		if err != nil {
			if ctx.Err() == nil {
				w.logf("open session: %v", err)
				sleep(ctx, 200*time.Millisecond)
			}
			continue
		}
		w.useSession(ctx, s)
		cctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		if err := s.Close(cctx); err != nil {
			w.logf("close session %s: %v", s.ID(), err)
		}
		cancel()
	}
}

// open opens a session, through the worker if there is one.
func (w *workload) open(ctx context.Context) (clientSession, error) {
	name := fmt.Sprintf("check-client-%d", w.cfg.Index)
	if w.worker != nil {
		return w.worker.open(ctx, name)
	}
	var id atomic.Value // the session's id, once Open returned it
	opts := []session.Option{session.TTL(w.cfg.TTL), session.LockDelay(w.cfg.LockDelay),
		session.Name(name), session.OnEvent(func(ev session.Event) { w.onEvent(&id, ev) })}
	if w.cfg.Grace > 0 {
		opts = append(opts, session.GracePeriod(w.cfg.Grace))
	}
	opts = append(opts, w.cfg.unsafeOpts...)
	s, err := session.Open(ctx, w.backend, opts...)
	if err != nil {
		return nil, err
	}
	id.Store(s.ID())
	gs := goSession{Session: s, permits: uint64(w.cfg.Permits)}
	if w.cfg.MixedKinds {
		gs.pick = w.pickKind
	}
	if w.cfg.MaxHoldShare > 0 {
		gs.maxHold = w.pickMaxHold
	}
	return gs, nil
}

// onEvent reports a state change of the session whose id is in id (an
// empty Session if it is not known yet).
func (w *workload) onEvent(id *atomic.Value, ev session.Event) {
	sid, _ := id.Load().(string)
	m := message{T: msgState, At: monoNow(), Session: sid, Result: ev.State.String()}
	if ev.Err != nil {
		m.Err = ev.Err.Error()
	}
	w.link.send(m)
}

// useSession takes locks on s until s is over or ctx ends.
func (w *workload) useSession(ctx context.Context, s clientSession) {
	for ctx.Err() == nil && !s.Over() {
		name := w.cfg.Locks[w.intn(len(w.cfg.Locks))]
		switch f := w.float(); {
		case f < readShare:
			w.read(ctx, name, false)
		case f < readShare+(1-readShare)*w.cfg.NaiveShare && w.cfg.Permits == 0 && !w.cfg.MixedKinds:
			w.naiveWait(ctx, s.ID(), name)
		default:
			var (
				l   clientLock
				err error
			)
			if w.float() < waitShare {
				l, err = w.lock(ctx, s, name)
			} else {
				l, err = s.TryLock(ctx, name)
			}
			if api.CodeOf(err) == api.CodeInvalidArgument && w.cfg.MixedKinds {
				w.forgetKind(name)
			}
			if err == nil {
				w.hold(ctx, s, l)
			} else if ctx.Err() == nil && !errors.Is(err, api.ErrLockBusy) && api.CodeOf(err) != api.CodeInvalidArgument &&
				!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				w.logf("acquire %s: %v", name, err)
			}
		}
		sleep(ctx, w.between(thinkMin, thinkMax))
	}
}

// lock waits for name in one of three ways: giving up after
// giveUpMin..giveUpMax (its ctx cancelled mid-wait), with a deadline of
// longWaitMin..longWaitMax, or without a deadline.
func (w *workload) lock(ctx context.Context, s clientSession, name string) (clientLock, error) {
	switch f := w.float(); {
	case f < giveUpShare && w.worker != nil:
		// The protocol cancels no wait: giving up is a wait that ends.
		gctx, cancel := context.WithTimeout(ctx, w.between(giveUpMin, giveUpMax))
		defer cancel()
		return s.Lock(gctx, name)
	case f < giveUpShare:
		gctx, cancel := context.WithCancel(ctx)
		t := time.AfterFunc(w.between(giveUpMin, giveUpMax), cancel)
		defer func() { t.Stop(); cancel() }()
		return s.Lock(gctx, name)
	case f < giveUpShare+longWaitShare:
		lctx, cancel := context.WithTimeout(ctx, w.between(longWaitMin, longWaitMax))
		defer cancel()
		return s.Lock(lctx, name)
	}
	return s.Lock(ctx, name)
}

// holdFor returns how long to hold a grant of name: holdMin..holdMax, or
// for a long hold (see longHoldEvery) longHoldMin..longHoldMax.
func (w *workload) holdFor(name string) time.Duration {
	age := time.Since(w.born)
	period, into := int(age/longHoldEvery), age%longHoldEvery
	if name == w.cfg.Locks[0] && w.cfg.Clients > 0 && period%w.cfg.Clients == w.cfg.Index && period != w.longPeriod &&
		into >= longHoldFrom && into < longHoldTo {
		w.longPeriod = period
		d := w.between(longHoldMin, longHoldMax)
		w.logf("long hold of %s for %v", name, d.Round(time.Millisecond))
		return d
	}
	return w.between(holdMin, holdMax)
}

func lost(l clientLock) bool {
	select {
	case <-l.Lost():
		return true
	default:
		return false
	}
}

// hold works under l: it checks that the lock can be trusted, waits a
// moment, writes to the resource, and again, then releases l. The write
// after the wait does not check again, like a real program that checked,
// was paused, and carried on: a pause there makes a stale holder. Once
// the session is not safe it gives the lock up, unless the checker pinned
// it (msgPin): it then waits, without writing, until the session is safe
// again or Lost() closes, like a program that trusts Lost() to tell it
// when the lock is gone; a pinned hold also goes on after a refused
// write. A hold of the grant of an answer held by the late-answer fault
// starts pinned (lateAnswers.pins). Whenever Lost() closes, it tells the
// checker.
func (w *workload) hold(ctx context.Context, s clientSession, l clientLock) {
	hold := message{T: msgHold, At: monoNow(), Lock: l.Name(), Token: l.Token(), Session: s.ID(), Holder: l.Holder()}
	if seq, err := sequencer.Parse(l.Seq()); err == nil && seq.Semaphore {
		hold.Slot = seq.Slot
	}
	w.link.send(hold)
	reported := w.reportLost(l, hold)
	pinned := w.link.latePins != nil && w.link.latePins(l.Name(), l.Token())
	w.hmu.Lock()
	w.holding, w.holdS, w.pinned = l, s, pinned
	w.hmu.Unlock()
	defer func() {
		w.letGo(true)
		hold.T, hold.At = msgUnhold, monoNow()
		w.link.send(hold)
		uctx, cancel := context.WithTimeout(context.WithValue(context.Background(), unlockIntent{}, true), unlockTimeout)
		defer cancel()
		if err := l.Unlock(uctx); err != nil {
			w.logf("unlock %s: %v", l.Name(), err)
		}
		// Unlock closes Lost() first: wait for its report, so that it is
		// sent before the process can exit.
		t := time.NewTimer(lostReportWait)
		defer t.Stop()
		select {
		case <-reported:
		case <-t.C:
			w.logf("Lost() of %s token %d still open %v after Unlock", l.Name(), l.Token(), lostReportWait)
		}
	}()
	end := time.Now().Add(w.holdFor(l.Name()))
	for first := true; ; first = false {
		if ctx.Err() != nil || lost(l) {
			return
		}
		if !s.Safe() && !w.awaitSafe(ctx, s, l) {
			return
		}
		if !first && w.float() < ownReadShare {
			w.read(ctx, l.Name(), false)
		}
		d := w.between(writeMin, writeMax)
		if first {
			d = w.between(prepMin, prepMax)
		}
		if !sleep(ctx, d) {
			return
		}
		// A pinned hold goes on after a refused write: it ends when
		// Lost() closes or the pin does.
		if ok := w.write(ctx, s, l); !ok && !w.isPinned() || time.Now().After(end) && w.letGo(false) {
			return
		}
	}
}

// reportLost sends msgLost (hold's fields, stamped when it happens) once
// l's Lost() closes; the returned channel is closed after it was sent.
func (w *workload) reportLost(l clientLock, hold message) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-l.Lost()
		m := hold
		m.T, m.At = msgLost, monoNow()
		// A worker's lost event carries when it fired.
		if wl, ok := l.(interface{ lostAt() int64 }); ok && wl.lostAt() > 0 {
			m.At = min(m.At, wl.lostAt())
		}
		w.link.send(m)
	}()
	return done
}

// letGo marks the end of the current hold, after which a pin is refused.
// Unless force is set, a pinned hold does not end: it reports false.
func (w *workload) letGo(force bool) bool {
	w.hmu.Lock()
	defer w.hmu.Unlock()
	if w.pinned && !force {
		return false
	}
	w.holding, w.holdS, w.pinned = nil, nil, false
	return true
}

func (w *workload) isPinned() bool {
	w.hmu.Lock()
	defer w.hmu.Unlock()
	return w.pinned
}

// awaitSafe is what a holder does when its session is not safe: unpinned,
// it gives up at once (false); pinned, it waits until the session is safe
// again (true) or Lost() closes, ctx ends or the pin ends (false).
func (w *workload) awaitSafe(ctx context.Context, s clientSession, l clientLock) bool {
	t := time.NewTicker(jeopardyPoll)
	defer t.Stop()
	for {
		if s.Safe() {
			return true
		}
		if !w.isPinned() {
			return false
		}
		select {
		case <-l.Lost():
			return false
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// pinLoop answers msgPin and msgUnpin.
func (w *workload) pinLoop(ctx context.Context) {
	for {
		var m message
		select {
		case <-ctx.Done():
			return
		case m = <-w.link.pins:
		}
		w.hmu.Lock()
		switch m.T {
		case msgPin:
			l := w.holding
			ok := l != nil && l.Name() == m.Lock && l.Token() == m.Token && !lost(l)
			if ok {
				w.pinned = true
			}
			w.hmu.Unlock()
			w.link.send(message{T: msgPinReply, ID: m.ID, OK: ok, Lock: m.Lock, Token: m.Token})
			continue
		case msgUnpin:
			w.pinned = false
		}
		w.hmu.Unlock()
	}
}

// write offers one write under l to the resource; it reports whether the
// resource accepted it.
func (w *workload) write(ctx context.Context, s clientSession, l clientLock) bool {
	m := message{T: msgWrite, ID: w.link.nextID(), At: monoNow(), Lock: l.Name(), Seq: l.Seq(),
		Token: l.Token(), Session: s.ID(), Holder: l.Holder()}
	r, err := w.link.request(ctx, m)
	if err != nil {
		return false
	}
	return r.OK
}

// read reads a lock through a random node.
func (w *workload) read(ctx context.Context, name string, verify bool) {
	r := w.readers[w.intn(len(w.readers))]
	rctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	if verify {
		rctx = context.WithValue(rctx, verifyIntent{}, true)
	}
	_, _ = r.LockState(rctx, name)
}

// verifyLoop answers msgVerify: a holder whose session is safe reads its
// lock, so that a grant lost to a fault shows in the history.
func (w *workload) verifyLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.link.verify:
		}
		w.hmu.Lock()
		l, s := w.holding, w.holdS
		w.hmu.Unlock()
		if l != nil && s.Safe() && !lost(l) {
			w.read(ctx, l.Name(), true)
		}
	}
}
