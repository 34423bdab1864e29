package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/cmd/internal/proccluster"
	"github.com/raftlock/raftlock/session"
)

// testCase is one named check of the suite.
type testCase struct {
	name string
	// cluster: the case kills and restarts nodes, so it runs only on a
	// cluster the suite started itself.
	cluster bool
	run     func(ctx context.Context, s *suite, w *worker) (detail string, err error)
}

// cases returns the suite's cases, in the order they run.
func cases(cfg config) []testCase {
	cs := []testCase{
		{name: "fence/shared-vectors", run: caseFenceVectors},
		{name: "fence/tenure-change", run: caseFenceTenureChange},
		{name: "errors/documented-codes", run: caseErrorCodes},
		{name: "keepalive/cadence-ttl-over-3", run: caseKeepaliveCadence},
		{name: "jeopardy/then-expired-after-grace", run: caseJeopardyExpired},
		{name: "jeopardy/then-safe-after-failover", cluster: true, run: caseJeopardySafe},
		{name: "latency/session-stays-safe", run: caseLatency},
	}
	for _, lc := range []struct{ ttl, delay float64 }{{1, 0}, {1, 1}, {3, 0}, {3, 1}} {
		lc := lc
		cs = append(cs, testCase{
			name: fmt.Sprintf("lost/before-grant-ttl-%gs-delay-%gs", lc.ttl, lc.delay),
			run: func(ctx context.Context, s *suite, w *worker) (string, error) {
				return caseLostBeforeGrant(ctx, s, w, lc.ttl, lc.delay)
			},
		})
	}
	cs = append(cs,
		testCase{name: "retry/acquire-answer-lost-same-token", run: caseAcquireAnswerLost},
		testCase{name: "retry/release-answer-lost", run: caseReleaseAnswerLost},
		testCase{name: "retry/blocked-acquire-survives-reset", run: caseReset},
		testCase{name: "fifo/place-kept-across-3-ttl-and-failover", cluster: true, run: caseFIFO},
		testCase{name: "watch/reports-grant-and-release", run: caseWatch},
		testCase{name: "election/observe-reports-every-leader-in-order", run: caseObserve},
		testCase{name: "election/campaign-is-fifo", run: caseCampaign},
		testCase{name: "secure/mutual-tls-and-acl-token", cluster: true, run: caseSecure},
		testCase{name: "revoke/holder-told-before-next-grant", run: caseRevokedBeforeGrant},
		testCase{name: "revoke/late-grant-after-revocation", run: caseLateGrantAfterRevocation},
		testCase{name: "revoke/semaphore-slot-holder-told-before-next-grant", run: caseSemaphoreSlotRevoked},
		testCase{name: "release-request/holder-told-lock-kept", run: caseReleaseRequested},
	)
	return cs
}

// lockName is a lock name of this run and case, unique across runs
// against the same cluster.
func (s *suite) lockName(parts ...string) string {
	return "conformance/" + s.runID + "/" + strings.Join(parts, "/")
}

// openDirect opens a session of the suite's own (the Go client, straight
// to the cluster, not through the proxy): the other client of a case.
func (s *suite) openDirect(ctx context.Context, ttl time.Duration) (*session.Session, error) {
	return session.Open(ctx, s.direct, session.TTL(ttl), session.LockDelay(api.NoLockDelay), session.Name("conformance-suite"))
}

// connect connects the worker to the proxy with a request timeout.
func (s *suite) connect(ctx context.Context, w *worker, timeout float64) error {
	_, err := w.do(ctx, message{Op: "connect", Endpoints: s.px.Addrs(), RequestTimeout: timeout})
	return err
}

// pause lets d pass, or ctx end: the length of a scenario (a wait that a
// case is about), never a way to wait for something to happen.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// until polls cond, every 20 ms, until it returns nil or ctx ends: for
// conditions held by the cluster's processes, which cannot be awaited.
func until(ctx context.Context, what string, cond func() error) error {
	for {
		err := cond()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last: %v)", what, ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// queueOf polls the lock's queue until it has n holders.
func (s *suite) queueOf(ctx context.Context, name string, n int) ([]api.QueuedHolder, error) {
	var q []api.QueuedHolder
	err := until(ctx, fmt.Sprintf("%d queued on %s", n, name), func() error {
		st, err := s.direct.LockState(ctx, name)
		if err != nil {
			return err
		}
		q = st.Queue
		if len(q) != n {
			return fmt.Errorf("queue has %d", len(q))
		}
		return nil
	})
	return q, err
}

// fenceVectors is testdata/fence-vectors.json.
type fenceVectors struct {
	Vectors []struct {
		Name  string
		Steps []struct {
			Sequencer string
			Verdict   string
		}
	}
}

func caseFenceVectors(ctx context.Context, s *suite, w *worker) (string, error) {
	raw, err := os.ReadFile(s.cfg.vectors)
	if err != nil {
		return "", err
	}
	var vs fenceVectors
	if err := json.Unmarshal(raw, &vs); err != nil {
		return "", fmt.Errorf("%s: %w", s.cfg.vectors, err)
	}
	var bad []string
	steps := 0
	for i, v := range vs.Vectors {
		for j, st := range v.Steps {
			steps++
			r, err := w.do(ctx, message{Op: "fence_check", Fence: fmt.Sprintf("v%d", i), Sequencer: st.Sequencer})
			if err != nil {
				return "", err
			}
			if r.Verdict != st.Verdict {
				bad = append(bad, fmt.Sprintf("%s, step %d (%.40q): %s, want %s", v.Name, j, st.Sequencer, r.Verdict, st.Verdict))
			}
		}
	}
	if len(bad) > 0 {
		return "", errors.New(strings.Join(bad, "; "))
	}
	return fmt.Sprintf("%d vectors, %d checks", len(vs.Vectors), steps), nil
}

// wantCode checks that r failed with code.
func wantCode(what string, r message, err error, code api.Code) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if r.OK != nil && *r.OK {
		return fmt.Errorf("%s: succeeded, want %s", what, code)
	}
	if r.Code != string(code) {
		return fmt.Errorf("%s: code %q (%s), want %s", what, r.Code, r.Message, code)
	}
	return nil
}

func caseErrorCodes(ctx context.Context, s *suite, w *worker) (string, error) {
	if err := s.connect(ctx, w, 2); err != nil {
		return "", err
	}
	r, err := w.call(ctx, message{Op: "open", Session: "bad", TTL: 0.5, LockDelay: ptr(0.0)})
	if err := wantCode("open with ttl 0.5s", r, err, api.CodeInvalidArgument); err != nil {
		return "", err
	}
	r, err = w.call(ctx, message{Op: "open", Session: "bad", TTL: 5, LockDelay: ptr(61.0)})
	if err := wantCode("open with lock-delay 61s", r, err, api.CodeInvalidArgument); err != nil {
		return "", err
	}
	if _, err := w.open(ctx, message{Op: "open", Session: "s", TTL: 5, LockDelay: ptr(0.0), Name: "conformance"}); err != nil {
		return "", err
	}
	r, err = w.call(ctx, message{Op: "lock", Session: "s", Lock: "l0", Name: ""})
	if err := wantCode("lock with an empty name", r, err, api.CodeInvalidArgument); err != nil {
		return "", err
	}
	r, err = w.call(ctx, message{Op: "lock", Session: "s", Lock: "l0", Name: s.lockName("bad\x01name")})
	if err := wantCode("lock with a control character in its name", r, err, api.CodeInvalidArgument); err != nil {
		return "", err
	}
	name := s.lockName("errors", "held")
	other, err := s.openDirect(ctx, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer other.Close(context.WithoutCancel(ctx))
	if _, err := other.TryLock(ctx, name); err != nil {
		return "", err
	}
	r, err = w.call(ctx, message{Op: "lock", Session: "s", Lock: "l1", Name: name})
	if err := wantCode("try-lock on a held lock", r, err, api.CodeLockBusy); err != nil {
		return "", err
	}
	r, err = w.call(ctx, message{Op: "lock", Session: "s", Lock: "l1", Name: name, Mode: "shared"})
	if err := wantCode("shared try-lock on an exclusively held lock", r, err, api.CodeLockBusy); err != nil {
		return "", err
	}
	r, err = w.call(ctx, message{Op: "lock", Session: "s", Lock: "l1", Name: name, Wait: 0.5})
	if err := wantCode("lock waiting 0.5s on a held lock", r, err, api.CodeWaitTimeout); err != nil {
		return "", err
	}
	if _, err := w.do(ctx, message{Op: "close", Session: "s"}); err != nil {
		return "", err
	}
	r, err = w.call(ctx, message{Op: "lock", Session: "s", Lock: "l2", Name: s.lockName("errors", "free")})
	if err := wantCode("lock on a closed session", r, err, api.CodeSessionNotFound); err != nil {
		return "", err
	}
	return "invalid_argument, lock_busy, wait_timeout, session_not_found", nil
}

// keepaliveLine is the proxy's (redacted) request line of a keepalive.
const keepaliveLine = "POST /v1/sessions/*/keepalive"

func caseKeepaliveCadence(ctx context.Context, s *suite, w *worker) (string, error) {
	if err := s.connect(ctx, w, 2); err != nil {
		return "", err
	}
	const ttl = 1.5
	if _, err := w.open(ctx, message{Op: "open", Session: "s", TTL: ttl, LockDelay: ptr(0.0)}); err != nil {
		return "", err
	}
	start := time.Now()
	const window = 4500 * time.Millisecond
	if err := pause(ctx, window); err != nil {
		return "", err
	}
	kas := s.px.Requests(keepaliveLine, start)
	end := start.Add(window)
	n := 0
	for _, r := range kas {
		if r.at.Before(end) {
			n++
		}
	}
	if n == 0 {
		return "", fmt.Errorf("no keepalive in %v (ttl %gs)", window, ttl)
	}
	mean := window.Seconds() / float64(n)
	detail := fmt.Sprintf("%d keepalives in %v: one every %.2fs (ttl/3 = %.2fs)", n, window, mean, ttl/3)
	if mean < ttl/5 || mean > ttl/2 {
		return "", fmt.Errorf("%s: want one every ttl/5..ttl/2", detail)
	}
	r, err := w.do(ctx, message{Op: "state", Session: "s"})
	if err != nil {
		return "", err
	}
	if r.State != "safe" {
		return "", fmt.Errorf("%s; state %s, want safe", detail, r.State)
	}
	return detail, nil
}

// firstKeepalive waits for a keepalive through the proxy after since.
func (s *suite) firstKeepalive(ctx context.Context, since time.Time) error {
	return until(ctx, "a keepalive", func() error {
		if len(s.px.Requests(keepaliveLine, since)) == 0 {
			return errors.New("none yet")
		}
		return nil
	})
}

func caseJeopardyExpired(ctx context.Context, s *suite, w *worker) (string, error) {
	if err := s.connect(ctx, w, 1); err != nil {
		return "", err
	}
	const ttl, grace = 1.0, 1.5
	if _, err := w.open(ctx, message{Op: "open", Session: "s", TTL: ttl, LockDelay: ptr(0.0), Grace: grace}); err != nil {
		return "", err
	}
	opened := time.Now()
	if err := s.firstKeepalive(ctx, opened); err != nil {
		return "", err
	}
	from := w.mark()
	s.px.Cut()
	cut := time.Now()
	defer s.px.Heal()
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	jeo, _, err := w.await(actx, from, isState("s", "jeopardy"))
	if err != nil {
		return "", fmt.Errorf("no jeopardy after the cut: %w", err)
	}
	exp, _, err := w.await(actx, from, isState("s", "expired"))
	if err != nil {
		return "", fmt.Errorf("no expiry after jeopardy: %w", err)
	}
	if w.seen(from, isState("s", "safe")) {
		return "", errors.New("safe reported while cut")
	}
	j, x := jeo.at.Sub(cut).Seconds(), exp.at.Sub(jeo.at).Seconds()
	detail := fmt.Sprintf("ttl %gs, grace %gs: jeopardy %.2fs after the cut, expired %.2fs after jeopardy", ttl, grace, j, x)
	if j < ttl/2 || j > ttl+0.5 {
		return "", fmt.Errorf("%s: want jeopardy %gs..%gs after the cut", detail, ttl/2, ttl+0.5)
	}
	if x < grace-0.2 || x > grace+1 {
		return "", fmt.Errorf("%s: want expiry %gs..%gs after jeopardy", detail, grace-0.2, grace+1)
	}
	s.px.Heal()
	r, err := w.call(ctx, message{Op: "lock", Session: "s", Lock: "l", Name: s.lockName("expired")})
	if err := wantCode("lock on the expired session", r, err, api.CodeSessionNotFound); err != nil {
		return "", fmt.Errorf("%s; %w", detail, err)
	}
	return detail + "; then a lock: session_not_found", nil
}

func caseJeopardySafe(ctx context.Context, s *suite, w *worker) (string, error) {
	if err := s.connect(ctx, w, 1); err != nil {
		return "", err
	}
	const ttl, grace = 2.0, 30.0
	if _, err := w.open(ctx, message{Op: "open", Session: "s", TTL: ttl, LockDelay: ptr(0.0), Grace: grace}); err != nil {
		return "", err
	}
	if err := s.firstKeepalive(ctx, time.Now()); err != nil {
		return "", err
	}
	from := w.mark()
	s.px.Cut()
	cut := time.Now()
	healed := false
	defer func() {
		if !healed {
			s.px.Heal()
		}
	}()
	leader, err := s.killLeader(ctx)
	if err != nil {
		return "", err
	}
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	jeo, _, err := w.await(actx, from, isState("s", "jeopardy"))
	if err != nil {
		return "", fmt.Errorf("no jeopardy after the cut: %w", err)
	}
	if err := s.restart(leader); err != nil {
		return "", err
	}
	s.px.Heal()
	healed = true
	ev, _, err := w.await(actx, from, func(e event) bool {
		return e.Event == "state" && e.Session == "s" && (e.State == "safe" || e.State == "expired")
	})
	if err != nil {
		return "", fmt.Errorf("neither safe nor expired after the heal: %w", err)
	}
	if ev.State != "safe" {
		return "", fmt.Errorf("expired after jeopardy, want safe: the new leader keeps the session for ttl + failover grace")
	}
	return fmt.Sprintf("ttl %gs: jeopardy %.2fs after the cut and the leader's kill, safe %.2fs after it", ttl,
		jeo.at.Sub(cut).Seconds(), ev.at.Sub(jeo.at).Seconds()), nil
}

func caseLatency(ctx context.Context, s *suite, w *worker) (string, error) {
	if err := s.connect(ctx, w, 3); err != nil {
		return "", err
	}
	const ttl = 2.0
	s.px.SetLatency(100 * time.Millisecond)
	defer s.px.SetLatency(0)
	if _, err := w.open(ctx, message{Op: "open", Session: "s", TTL: ttl, LockDelay: ptr(0.0)}); err != nil {
		return "", err
	}
	from := w.mark()
	name := s.lockName("latency")
	start := time.Now()
	r, err := w.do(ctx, message{Op: "lock", Session: "s", Lock: "l", Name: name})
	if err != nil {
		return "", err
	}
	took := time.Since(start)
	if err := pause(ctx, 2*time.Second); err != nil {
		return "", err
	}
	if _, err := w.do(ctx, message{Op: "unlock", Lock: "l"}); err != nil {
		return "", err
	}
	if w.seen(from, func(e event) bool { return e.Event == "state" }) {
		return "", fmt.Errorf("session left safe under 100 ms of added latency each way (ttl %gs)", ttl)
	}
	if r.Token == 0 || r.Sequencer == "" {
		return "", fmt.Errorf("lock reply without a token or sequencer: %+v", r)
	}
	return fmt.Sprintf("lock took %v with 100 ms added each way; no jeopardy in 2 s", took.Round(time.Millisecond)), nil
}

// caseLostBeforeGrant: the worker holds locks, the proxy black-holes it,
// and the suite's own clients wait for the same locks: each lock's lost
// event must reach the suite before the other client's grant does.
func caseLostBeforeGrant(ctx context.Context, s *suite, w *worker, ttl, delay float64) (string, error) {
	if err := s.connect(ctx, w, 1); err != nil {
		return "", err
	}
	rounds, par := s.cfg.rounds, s.cfg.parallel
	var margins []time.Duration
	for round := 0; round < rounds; round++ {
		ms, err := lostRound(ctx, s, w, ttl, delay, round, par)
		if err != nil {
			return "", fmt.Errorf("round %d: %w", round+1, err)
		}
		margins = append(margins, ms...)
	}
	sort.Slice(margins, func(i, j int) bool { return margins[i] < margins[j] })
	return fmt.Sprintf("%d runs of %d: lost before the other grant by %v (min) .. %v (max), median %v",
		rounds, par, margins[0].Round(time.Millisecond), margins[len(margins)-1].Round(time.Millisecond),
		margins[len(margins)/2].Round(time.Millisecond)), nil
}

func lostRound(ctx context.Context, s *suite, w *worker, ttl, delay float64, round, par int) ([]time.Duration, error) {
	names := make([]string, par)
	for i := range par {
		ref := fmt.Sprintf("r%d-%d", round, i)
		names[i] = s.lockName(fmt.Sprintf("lost-%g-%g", ttl, delay), ref)
		if _, err := w.open(ctx, message{Op: "open", Session: ref, TTL: ttl, LockDelay: ptr(delay), Grace: 30}); err != nil {
			return nil, err
		}
		if _, err := w.do(ctx, message{Op: "lock", Session: ref, Lock: ref, Name: names[i]}); err != nil {
			return nil, err
		}
	}
	other, err := s.openDirect(ctx, 10*time.Second)
	if err != nil {
		return nil, err
	}
	defer other.Close(context.WithoutCancel(ctx))
	type grant struct {
		at  time.Time
		err error
	}
	grants := make([]chan grant, par)
	gctx, cancel := context.WithTimeout(ctx, time.Duration((ttl+delay)*float64(time.Second))+30*time.Second)
	defer cancel()
	for i := range par {
		grants[i] = make(chan grant, 1)
		go func() {
			l, err := other.Lock(gctx, names[i])
			grants[i] <- grant{time.Now(), err}
			if err == nil {
				l.Unlock(context.WithoutCancel(ctx))
			}
		}()
	}
	for i := range par {
		if _, err := s.queueOf(gctx, names[i], 1); err != nil {
			return nil, err
		}
	}
	from := w.mark()
	s.px.Cut()
	defer s.px.Heal()
	var margins []time.Duration
	var bad []string
	for i := range par {
		ref := fmt.Sprintf("r%d-%d", round, i)
		g := <-grants[i]
		if g.err != nil {
			return nil, fmt.Errorf("the other client's lock %s: %w", names[i], g.err)
		}
		lctx, lcancel := context.WithTimeout(ctx, 100*time.Millisecond)
		lost, _, err := w.await(lctx, from, isLost(ref))
		lcancel()
		if err != nil || !lost.at.Before(g.at) {
			late := "not reported by 100 ms after"
			if err == nil {
				late = fmt.Sprintf("reported %v after", lost.at.Sub(g.at).Round(time.Millisecond))
			}
			bad = append(bad, fmt.Sprintf("lock %s: lost %s the other client's grant", ref, late))
			continue
		}
		margins = append(margins, g.at.Sub(lost.at))
	}
	if len(bad) > 0 {
		return nil, errors.New(strings.Join(bad, "; "))
	}
	return margins, nil
}

func caseAcquireAnswerLost(ctx context.Context, s *suite, w *worker) (string, error) {
	if err := s.connect(ctx, w, 1.5); err != nil {
		return "", err
	}
	if _, err := w.open(ctx, message{Op: "open", Session: "s", TTL: 10, LockDelay: ptr(0.0)}); err != nil {
		return "", err
	}
	name := s.lockName("retry", "acquire")
	before := s.px.Dropped()
	s.px.DropAnswerTo("POST /v1/acquire")
	defer s.px.DropAnswerTo("")
	r, err := w.call(ctx, message{Op: "lock", Session: "s", Lock: "l", Name: name})
	if err != nil {
		return "", err
	}
	if s.px.Dropped() == before {
		return "", errors.New("the proxy dropped no answer (did the client send POST /v1/acquire?)")
	}
	if r.OK == nil || !*r.OK {
		return "", fmt.Errorf("try-lock whose first answer was lost: %s: %s (an unknown outcome is the client's to retry)", r.Code, r.Message)
	}
	st, err := s.direct.LockState(ctx, name)
	if err != nil {
		return "", err
	}
	if len(st.Holders) != 1 || st.Holders[0].Holder != r.Holder || uint64(st.Holders[0].Token) != r.Token {
		return "", fmt.Errorf("the cluster's holders %+v, want the client's one grant (holder %s, token %d)", st.Holders, r.Holder, r.Token)
	}
	return fmt.Sprintf("answer dropped after the grant; the retry got token %d, same holder", r.Token), nil
}

func caseReleaseAnswerLost(ctx context.Context, s *suite, w *worker) (string, error) {
	if err := s.connect(ctx, w, 1.5); err != nil {
		return "", err
	}
	if _, err := w.open(ctx, message{Op: "open", Session: "s", TTL: 10, LockDelay: ptr(0.0)}); err != nil {
		return "", err
	}
	name := s.lockName("retry", "release")
	if _, err := w.do(ctx, message{Op: "lock", Session: "s", Lock: "l", Name: name}); err != nil {
		return "", err
	}
	before := s.px.Dropped()
	s.px.DropAnswerTo("POST /v1/release")
	defer s.px.DropAnswerTo("")
	if _, err := w.do(ctx, message{Op: "unlock", Lock: "l"}); err != nil {
		return "", fmt.Errorf("unlock whose first answer was lost: %w", err)
	}
	if s.px.Dropped() == before {
		return "", errors.New("the proxy dropped no answer (did the client send POST /v1/release?)")
	}
	st, err := s.direct.LockState(ctx, name)
	if err != nil {
		return "", err
	}
	if len(st.Holders) != 0 {
		return "", fmt.Errorf("lock still held after unlock: %+v", st.Holders)
	}
	return "answer dropped after the release; the retry succeeded", nil
}

func caseReset(ctx context.Context, s *suite, w *worker) (string, error) {
	if err := s.connect(ctx, w, 2); err != nil {
		return "", err
	}
	if _, err := w.open(ctx, message{Op: "open", Session: "s", TTL: 5, LockDelay: ptr(0.0)}); err != nil {
		return "", err
	}
	name := s.lockName("reset")
	other, err := s.openDirect(ctx, 10*time.Second)
	if err != nil {
		return "", err
	}
	defer other.Close(context.WithoutCancel(ctx))
	held, err := other.TryLock(ctx, name)
	if err != nil {
		return "", err
	}
	answer := w.callAsync(ctx, message{Op: "lock", Session: "s", Lock: "l", Name: name, Wait: 30})
	q, err := s.queueOf(ctx, name, 1)
	if err != nil {
		return "", err
	}
	s.px.Reset()
	if err := held.Unlock(ctx); err != nil {
		return "", err
	}
	r, err := answer()
	if err != nil {
		return "", err
	}
	if r.OK == nil || !*r.OK {
		return "", fmt.Errorf("waiting lock after its connection was reset: %s: %s", r.Code, r.Message)
	}
	if r.Holder != "" && r.Holder != q[0].Holder {
		return "", fmt.Errorf("granted as holder %s, but queued as %s: the place was not kept", r.Holder, q[0].Holder)
	}
	return "connections reset (RST) during a wait; granted from its place", nil
}

func caseFIFO(ctx context.Context, s *suite, w *worker) (string, error) {
	if err := s.connect(ctx, w, 2); err != nil {
		return "", err
	}
	const ttl = 1.0
	if _, err := w.open(ctx, message{Op: "open", Session: "s", TTL: ttl, LockDelay: ptr(0.0), Grace: 30}); err != nil {
		return "", err
	}
	name := s.lockName("fifo")
	first, err := s.openDirect(ctx, 10*time.Second)
	if err != nil {
		return "", err
	}
	defer first.Close(context.WithoutCancel(ctx))
	held, err := first.TryLock(ctx, name)
	if err != nil {
		return "", err
	}
	answer := w.callAsync(ctx, message{Op: "lock", Session: "s", Lock: "l", Name: name, Wait: 120})
	q, err := s.queueOf(ctx, name, 1)
	if err != nil {
		return "", err
	}
	mine := q[0].Holder
	third, err := s.openDirect(ctx, 10*time.Second)
	if err != nil {
		return "", err
	}
	defer third.Close(context.WithoutCancel(ctx))
	thirdGrant := make(chan error, 1)
	tctx, tcancel := context.WithCancel(ctx)
	defer tcancel()
	go func() {
		l, err := third.Lock(tctx, name)
		if err == nil {
			defer l.Unlock(context.WithoutCancel(ctx))
		}
		thirdGrant <- err
		<-tctx.Done()
	}()
	if _, err := s.queueOf(ctx, name, 2); err != nil {
		return "", err
	}
	if err := pause(ctx, 3*time.Duration(ttl*float64(time.Second))); err != nil {
		return "", err
	}
	leader, err := s.killLeader(ctx)
	if err != nil {
		return "", err
	}
	if err := s.restart(leader); err != nil {
		return "", err
	}
	q, err = s.queueOf(ctx, name, 2)
	if err != nil {
		return "", err
	}
	if q[0].Holder != mine {
		return "", fmt.Errorf("after 3×ttl and a failover the queue is %+v; the client (%s) is not first", q, mine)
	}
	if err := held.Unlock(ctx); err != nil {
		return "", err
	}
	r, err := answer()
	if err != nil {
		return "", err
	}
	if r.OK == nil || !*r.OK {
		return "", fmt.Errorf("waiting lock: %s: %s", r.Code, r.Message)
	}
	select {
	case err := <-thirdGrant:
		return "", fmt.Errorf("the client queued behind was granted first (%v)", err)
	default:
	}
	if _, err := w.do(ctx, message{Op: "unlock", Lock: "l"}); err != nil {
		return "", err
	}
	if err := <-thirdGrant; err != nil {
		return "", fmt.Errorf("the next in the queue: %w", err)
	}
	return fmt.Sprintf("place 1 of 2 kept across %gs (3×ttl) and a leader's kill; granted first", 3*ttl), nil
}

// killLeader kills the cluster's leader and returns its index.
func (s *suite) killLeader(ctx context.Context) (int, error) {
	lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	i, err := s.cl.Leader(lctx)
	if err != nil {
		return 0, err
	}
	var failed error
	if !s.tb.guard(func() { s.cl.Kill(i) }) {
		failed = fmt.Errorf("kill node %d: %s", i, strings.Join(s.tb.Messages(), "; "))
	}
	return i, failed
}

// restart starts node i again and waits for a leader.
func (s *suite) restart(i int) error {
	if !s.tb.guard(func() { s.cl.Restart(i) }) {
		return fmt.Errorf("restart node %d: %s", i, strings.Join(s.tb.Messages(), "; "))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := s.cl.Leader(ctx)
	return err
}

func caseWatch(ctx context.Context, s *suite, w *worker) (string, error) {
	if err := s.connect(ctx, w, 2); err != nil {
		return "", err
	}
	name := s.lockName("watch")
	from := w.mark()
	if _, err := w.do(ctx, message{Op: "watch", Watch: "w", Name: name}); err != nil {
		return "", err
	}
	actx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, _, err := w.await(actx, from, func(e event) bool { return e.Event == "lock_state" && e.Watch == "w" }); err != nil {
		return "", fmt.Errorf("no first state: %w", err)
	}
	other, err := s.openDirect(ctx, 10*time.Second)
	if err != nil {
		return "", err
	}
	defer other.Close(context.WithoutCancel(ctx))
	l, err := other.TryLock(ctx, name)
	if err != nil {
		return "", err
	}
	tok := uint64(l.Token())
	granted := time.Now()
	held, i, err := w.await(actx, from, func(e event) bool {
		return e.Event == "lock_state" && e.Watch == "w" && len(e.Holders) == 1 && e.Holders[0] == tok
	})
	if err != nil {
		return "", fmt.Errorf("the grant (token %d) was not reported: %w", tok, err)
	}
	if err := l.Unlock(ctx); err != nil {
		return "", err
	}
	released := time.Now()
	free, _, err := w.await(actx, i+1, func(e event) bool {
		return e.Event == "lock_state" && e.Watch == "w" && len(e.Holders) == 0
	})
	if err != nil {
		return "", fmt.Errorf("the release was not reported: %w", err)
	}
	w.do(ctx, message{Op: "stop", Watch: "w"})
	return fmt.Sprintf("grant reported %v after it, release %v after it",
		held.at.Sub(granted).Round(time.Millisecond), free.at.Sub(released).Round(time.Millisecond)), nil
}

func caseObserve(ctx context.Context, s *suite, w *worker) (string, error) {
	if err := s.connect(ctx, w, 2); err != nil {
		return "", err
	}
	name := s.lockName("election", "observe")
	var sessions []*session.Session
	defer func() {
		for _, ss := range sessions {
			ss.Close(context.WithoutCancel(ctx))
		}
	}()
	// A leader before the observation starts, reported first; then three
	// leaders in a row, each resigning at once, faster than any
	// observer's query: it learns of the middle ones from the history.
	values := []string{"0", "a", "b", "c"}
	var tokens []uint64
	actx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	from := w.mark()
	for i, v := range values {
		ss, err := s.openDirect(ctx, 10*time.Second)
		if err != nil {
			return "", err
		}
		sessions = append(sessions, ss)
		ld, err := ss.Campaign(ctx, name, v)
		if err != nil {
			return "", err
		}
		tokens = append(tokens, uint64(ld.Token()))
		if i == 0 {
			if _, err := w.do(ctx, message{Op: "observe", Watch: "o", Name: name}); err != nil {
				return "", err
			}
			if _, _, err := w.await(actx, from, func(e event) bool { return e.Event == "leader" && e.Watch == "o" }); err != nil {
				return "", fmt.Errorf("the current leader was not reported: %w", err)
			}
		}
		if v != "c" {
			if err := ld.Resign(ctx); err != nil {
				return "", err
			}
		}
	}
	if _, _, err := w.await(actx, from, func(e event) bool { return e.Event == "leader" && e.Watch == "o" && e.Value == "c" }); err != nil {
		return "", fmt.Errorf("leader c was not reported: %w", err)
	}
	w.do(ctx, message{Op: "stop", Watch: "o"})
	var got []string
	var gotTokens []uint64
	w.mu.Lock()
	for _, e := range w.events[from:] {
		if e.Event == "leader" && e.Watch == "o" {
			got = append(got, e.Value)
			gotTokens = append(gotTokens, e.Token)
		}
	}
	w.mu.Unlock()
	if fmt.Sprint(gotTokens) != fmt.Sprint(tokens) || fmt.Sprint(got) != fmt.Sprint(values) {
		return "", fmt.Errorf("reported leaders %v (tokens %v), want %v (tokens %v) in order, each once", got, gotTokens, values, tokens)
	}
	return fmt.Sprintf("leaders %v reported in order, each once", got), nil
}

func caseCampaign(ctx context.Context, s *suite, w *worker) (string, error) {
	if err := s.connect(ctx, w, 2); err != nil {
		return "", err
	}
	name := s.lockName("election", "campaign")
	if _, err := w.open(ctx, message{Op: "open", Session: "s", TTL: 5, LockDelay: ptr(0.0)}); err != nil {
		return "", err
	}
	first, err := s.openDirect(ctx, 10*time.Second)
	if err != nil {
		return "", err
	}
	defer first.Close(context.WithoutCancel(ctx))
	ld, err := first.Campaign(ctx, name, "first")
	if err != nil {
		return "", err
	}
	answer := w.callAsync(ctx, message{Op: "campaign", Session: "s", Lock: "l", Name: name, Value: "worker", Wait: 30})
	if _, err := s.queueOf(ctx, name, 1); err != nil {
		return "", err
	}
	if err := ld.Resign(ctx); err != nil {
		return "", err
	}
	r, err := answer()
	if err != nil {
		return "", err
	}
	if r.OK == nil || !*r.OK {
		return "", fmt.Errorf("campaign: %s: %s", r.Code, r.Message)
	}
	cur, err := session.CurrentLeader(ctx, s.direct, name)
	if err != nil {
		return "", err
	}
	if cur.Value != "worker" || uint64(cur.Token()) != r.Token {
		return "", fmt.Errorf("the election's leader is %q (token %d), want the worker's campaign (token %d)", cur.Value, cur.Token(), r.Token)
	}
	if _, err := w.do(ctx, message{Op: "unlock", Lock: "l"}); err != nil {
		return "", err
	}
	return fmt.Sprintf("elected after the leader resigned, with its value; token %d", r.Token), nil
}

// secureCluster is a second cluster of the run, started on first use:
// mutual TLS (--client-cert-auth) and ACLs, its certificates from
// raftlock tls init, its management token bootstrapped.
type secureCluster struct {
	cl     *proccluster.Cluster
	dir    string
	secret string
}

func (s *suite) secure(ctx context.Context) (*secureCluster, error) {
	if s.sec != nil {
		return s.sec, nil
	}
	sc := &secureCluster{}
	var failed error
	if !s.tb.guard(func() {
		cli := proccluster.Build(s.tb, "github.com/raftlock/raftlock/cmd/raftlock", "raftlock")
		sc.dir = filepath.Join(s.tb.TempDir(), "tls")
		args := []string{"tls", "init", sc.dir, "--client", "client"}
		for i := 1; i <= 3; i++ {
			args = append(args, "--node", fmt.Sprintf("n%d=127.0.0.1", i))
		}
		if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
			s.tb.Fatalf("raftlock %q: %v\n%s", args, err, out)
		}
		sc.cl = proccluster.StartTLS(s.tb, s.bin, sc.dir, 3, "--client-cert-auth", "--acl")
	}) {
		failed = fmt.Errorf("start the TLS and ACL cluster: %s", strings.Join(s.tb.Messages(), "; "))
	}
	if failed != nil {
		return nil, failed
	}
	lctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := sc.cl.Leader(lctx); err != nil {
		return nil, err
	}
	boot, err := sc.cl.Client().ACLBootstrap(lctx)
	if err != nil {
		return nil, fmt.Errorf("acl bootstrap: %w", err)
	}
	sc.secret = boot.Secret
	s.sec = sc
	return sc, nil
}

func caseSecure(ctx context.Context, s *suite, w *worker) (string, error) {
	sc, err := s.secure(ctx)
	if err != nil {
		return "", err
	}
	certs := message{Op: "connect", Endpoints: sc.cl.Addrs(), RequestTimeout: 5,
		CA: filepath.Join(sc.dir, "ca.pem"), Cert: filepath.Join(sc.dir, "client.pem"), Key: filepath.Join(sc.dir, "client-key.pem")}
	// Without the token: every call is unauthenticated.
	if _, err := w.do(ctx, certs); err != nil {
		return "", err
	}
	r, err := w.call(ctx, message{Op: "open", Session: "anon", TTL: 5, LockDelay: ptr(0.0)})
	if err := wantCode("open without a token", r, err, api.CodeUnauthenticated); err != nil {
		return "", err
	}
	withToken := certs
	withToken.ACLToken = sc.secret
	if _, err := w.do(ctx, withToken); err != nil {
		return "", err
	}
	if _, err := w.open(ctx, message{Op: "open", Session: "s", TTL: 5, LockDelay: ptr(0.0), Name: "secure"}); err != nil {
		return "", err
	}
	lr, err := w.do(ctx, message{Op: "lock", Session: "s", Lock: "l", Name: s.lockName("secure")})
	if err != nil {
		return "", err
	}
	if _, err := w.do(ctx, message{Op: "unlock", Lock: "l"}); err != nil {
		return "", err
	}
	if _, err := w.do(ctx, message{Op: "close", Session: "s"}); err != nil {
		return "", err
	}
	for what, text := range map[string]string{"stdout": w.stdout.String(), "stderr": w.stderr.String()} {
		// The suite sent the secret in its own requests, not the worker.
		if strings.Contains(text, sc.secret) {
			return "", fmt.Errorf("the ACL secret appears in the worker's %s", what)
		}
	}
	return fmt.Sprintf("over mutual TLS: unauthenticated without the token; with it, a session and lock (token %d); the secret in nothing the worker wrote", lr.Token), nil
}
