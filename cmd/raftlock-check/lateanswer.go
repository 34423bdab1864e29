package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/transport/client"
)

// faultLateAnswer holds one grant's answer on its way to a client while
// the rest of that client's traffic (keepalives, reads, writes) flows: a
// proxy, a load balancer or a retrying driver that delivers one response
// late. Meanwhile the grant is revoked by an operator, and after the
// revoked grant's TTL + lock-delay it may be granted to another client.
// The answer is held for up to TTL + lock-delay + lateAnswerExtra, but no
// longer than its request may still wait for it (less lateAnswerMargin):
// the Go client asks a waiting acquire again every lockPollSlice (10 s),
// so its answers come at most that late, shorter than the TTL + lock-delay
// of the checker's sessions. A client must not trust the revoked grant
// whose answer came late: its Lost() must close before the next grant
// (check 5), and if the answer came after that grant, at once (the
// late-grant rule of checkLostBeforeRegrant); the fencing check judges
// its writes.
//
// The answer is held in the client process, by a layer above the Go
// client's transport (lateAnswers): the checker arms every Go client
// (msgLateArm), and the first acquire granted to one of them whose
// request may last at least lateAnswerMin more is held.
const faultLateAnswer = "late-answer"

// lateAnswerExtra is how much longer than the TTL + lock-delay an answer
// is held at most (the next grant comes after the revoked grant's TTL +
// lock-delay); lateAnswerCatch bounds the wait for an answer to hold.
const (
	lateAnswerExtra  = 4 * time.Second
	lateAnswerCatch  = 20 * time.Second
	lateAnswerMin    = 3 * time.Second
	lateAnswerMargin = 500 * time.Millisecond
	// lateAnswerAfterNewer is how long after the next grant of the lock
	// (the slot) a held answer is let go, if its hold lasts that long:
	// more than a keepalive interval of the checker's sessions (ttl/3).
	lateAnswerAfterNewer = time.Second
)

// lateAnswers is the client process's layer that holds one acquire's
// answer (see faultLateAnswer). It is safe for concurrent use.
type lateAnswers struct {
	inner http.RoundTripper
	link  *link

	mu    sync.Mutex
	armed *lateArm
	held  map[uint64]*lateArm
	// caught names the grant of each answer held, by its arm's id; pin
	// is the one msgLatePin named: a hold of it starts pinned (pins).
	caught map[uint64]lateGrantKey
	pin    lateGrantKey
}

// lateGrantKey names a grant by its lock and token.
type lateGrantKey struct {
	lock  string
	token uint64
}

// pins reports whether a hold of lock's grant token is that of the
// answer msgLatePin named (and forgets it): the workload then holds it pinned, as if
// the checker had pinned it (msgPin), until Lost() closes or msgUnpin, so
// that a client that trusts the late grant keeps it with Lost() open
// beyond lateGrantSlack even when its writes are refused.
func (la *lateAnswers) pins(lock string, token uint64) bool {
	la.mu.Lock()
	defer la.mu.Unlock()
	if la.pin != (lateGrantKey{lock, token}) {
		return false
	}
	la.pin = lateGrantKey{}
	return true
}

// lateArm is one msgLateArm: the answer it caught is held until release
// is closed (msgLateRelease) or max passed.
type lateArm struct {
	id      uint64
	max     time.Duration
	release chan struct{}
	once    sync.Once
}

func (a *lateArm) free() { a.once.Do(func() { close(a.release) }) }

func newLateAnswers(inner http.RoundTripper, l *link) *lateAnswers {
	return &lateAnswers{inner: inner, link: l, held: map[uint64]*lateArm{}, caught: map[uint64]lateGrantKey{}}
}

// handle takes msgLateArm and msgLateRelease.
func (la *lateAnswers) handle(m message) {
	la.mu.Lock()
	defer la.mu.Unlock()
	switch m.T {
	case msgLateArm:
		if la.armed != nil {
			la.armed.free()
		}
		la.armed = &lateArm{id: m.ID, max: time.Duration(m.WaitFor), release: make(chan struct{})}
	case msgLatePin:
		la.pin = la.caught[m.ID]
		delete(la.caught, m.ID)
	case msgLateRelease:
		if la.armed != nil && (m.ID == 0 || la.armed.id == m.ID) {
			la.armed = nil
		}
		if a := la.held[m.ID]; a != nil {
			a.free()
			delete(la.held, m.ID)
		}
	}
}

// take returns the armed hold if req, a granted acquire, may be held (its
// request lasts longer than the hold), and disarms it.
func (la *lateAnswers) take(req *http.Request) *lateArm {
	la.mu.Lock()
	defer la.mu.Unlock()
	a := la.armed
	if a == nil {
		return nil
	}
	if d, ok := req.Context().Deadline(); ok {
		left := time.Until(d)
		if left < lateAnswerMin {
			return nil
		}
		a.max = min(a.max, left-lateAnswerMargin)
	}
	la.armed = nil
	la.held[a.id] = a
	return a
}

// RoundTrip passes req on and, for the answer it arms, holds a granted
// acquire's answer (see faultLateAnswer).
func (la *lateAnswers) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := la.inner.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK || req.Method != http.MethodPost || req.URL.Path != "/v1/acquire" {
		return resp, err
	}
	a := la.take(req)
	if a == nil {
		return resp, nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		la.handle(message{T: msgLateRelease, ID: a.id})
		return nil, fmt.Errorf("late answer: read the answer: %w", err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	var g api.GrantReply
	if err := json.Unmarshal(body, &g); err != nil || g.Token == 0 {
		la.handle(message{T: msgLateRelease, ID: a.id})
		return resp, nil
	}
	la.mu.Lock()
	la.caught[a.id] = lateGrantKey{g.Name, uint64(g.Token)}
	la.mu.Unlock()
	caught := message{T: msgLateCaught, ID: a.id, At: monoNow(), Lock: g.Name, Token: g.Token, WaitFor: int64(a.max),
		Holder: holderOf(req)}
	if g.Slot != nil {
		caught.Slot = *g.Slot
	}
	la.link.send(caught)
	t := time.NewTimer(a.max)
	defer t.Stop()
	select {
	case <-a.release:
	case <-t.C:
	case <-req.Context().Done():
		// Its caller gave up: the answer never arrives.
		la.handle(message{T: msgLateRelease, ID: a.id})
		return nil, req.Context().Err()
	}
	la.handle(message{T: msgLateRelease, ID: a.id})
	return resp, nil
}

// lateAnswer injects faultLateAnswer: it arms every Go client (not a
// worker's) that is not paused, takes the first answer one of them holds
// (armLateAnswer), revokes that grant, lets the answer go
// lateAnswerAfterNewer after another client was granted the lock (the
// slot), or once the client's hold ran out, and then watches the holder as
// after a revoke-grant (watchRevoked).
func (in *injector) lateAnswer(ctx context.Context) (FaultRec, error) {
	hold := in.cfg.TTL + in.cfg.LockDelay + lateAnswerExtra
	c, caught, err := in.armLateAnswer(ctx, hold)
	if err != nil {
		return FaultRec{}, err
	}
	p := in.cs.procs[c]
	caughtAt := caught.At
	if caughtAt == 0 {
		caughtAt = monoNow()
	}
	release := func() { p.send(message{T: msgLateRelease, ID: caught.ID}) }
	var req api.RevokeRequest
	err = in.cl.adminCall(ctx, func(ctx context.Context, cl *client.Client) error {
		st, err := cl.LockState(ctx, caught.Lock)
		if err != nil {
			return err
		}
		for _, h := range st.Holders {
			// One entry may grant several holders one token: the holder id,
			// where the request's body named it, picks the grant.
			if uint64(h.Token) == caught.Token && h.Slot == caught.Slot && (caught.Holder == "" || h.Holder == caught.Holder) {
				req = api.RevokeRequest{Name: caught.Lock, Holder: h.Holder, SessionHandle: h.SessionHandle,
					Reason: fmt.Sprintf("raftlock-check: late answer to client%d", c)}
				return nil
			}
		}
		return fmt.Errorf("token %d no longer holds %s", caught.Token, caught.Lock)
	})
	if err != nil {
		release()
		return FaultRec{}, fmt.Errorf("%w: find client%d's held grant: %v", errSkipped, c, err)
	}
	newer := in.track.grantAbove(caught.Lock, caught.Slot, caught.Token)
	lostCh := in.track.lostOf(c, caught.Lock, caught.Token)
	rec := FaultRec{Kind: faultLateAnswer, Target: fmt.Sprintf("client%d", c), Start: caughtAt,
		Lock: caught.Lock, Token: caught.Token}
	rec.ActCall, rec.ActReturn = monoNow(), pending
	in.hist.beginFault(rec)
	err = in.cl.adminCall(ctx, func(ctx context.Context, cl *client.Client) error {
		_, err := cl.RevokeGrant(ctx, req)
		return err
	})
	ret, aerr := actOutcome(err)
	if aerr != nil {
		release()
		return FaultRec{}, fmt.Errorf("%w: revoke client%d's held grant: %v", errSkipped, c, aerr)
	}
	rec.ActReturn = ret
	in.hist.beginFault(rec)
	// A client that trusts the late grant holds it pinned, until the
	// msgUnpin below.
	p.send(message{T: msgLatePin, ID: caught.ID})
	t := time.NewTimer(time.Duration(caught.WaitFor) - time.Duration(monoNow()-caughtAt))
	defer t.Stop()
	select {
	case <-newer:
		// A little later than the next grant, within the hold: by then
		// the client's keepalive answers no longer name the revocation
		// (its delay ended), so only the client's own rule for late
		// answers can distrust the grant.
		after := time.NewTimer(lateAnswerAfterNewer)
		select {
		case <-after.C:
		case <-t.C:
		case <-ctx.Done():
		}
		after.Stop()
	case <-t.C:
	case <-ctx.Done():
	}
	release()
	rec.Note = fmt.Sprintf("(the answer granting %s token %d held %v, the grant revoked meanwhile; ", caught.Lock, caught.Token,
		time.Duration(monoNow()-caughtAt).Round(100*time.Millisecond))
	hd := message{Lock: caught.Lock, Token: caught.Token}
	rec.Note += in.watchRevoked(ctx, c, hd, newer, lostCh, rec.ActCall) + ")"
	p.send(message{T: msgUnpin})
	rec.End = monoNow()
	return rec, nil
}

// armLateAnswer arms every Go client that is not paused to hold the
// answer of its next granted acquire, for at most hold, and returns the
// first that caught one within lateAnswerCatch, with what it caught. The
// others are disarmed; one that caught an answer all the same lets it go
// at once (a late answer of a grant nobody revoked changes nothing).
func (in *injector) armLateAnswer(ctx context.Context, hold time.Duration) (int, message, error) {
	type armed struct {
		c   int
		m   message
		err error
	}
	var eligible []int
	for c := range in.cfg.Clients - in.cfg.WorkerClients {
		if !in.cs.procs[c].isPaused() {
			eligible = append(eligible, c)
		}
	}
	if len(eligible) == 0 {
		return 0, message{}, fmt.Errorf("%w: no Go client that is not paused", errSkipped)
	}
	actx, cancel := context.WithTimeout(ctx, lateAnswerCatch)
	defer cancel()
	answers := make(chan armed, len(eligible))
	for _, c := range eligible {
		go func() {
			m, err := in.cs.procs[c].request(actx, message{T: msgLateArm, WaitFor: int64(hold)})
			answers <- armed{c, m, err}
		}()
	}
	first := armed{err: errors.New("none")}
	for range eligible {
		a := <-answers
		if a.err == nil && first.err != nil {
			first = a
			cancel() // the others give up
			continue
		}
		p := in.cs.procs[a.c]
		if a.err == nil {
			p.send(message{T: msgLateRelease, ID: a.m.ID})
		} else {
			p.send(message{T: msgLateRelease}) // disarm
		}
	}
	if first.err != nil {
		return 0, message{}, fmt.Errorf("%w: no acquire of %d Go clients granted within %s", errSkipped, len(eligible), lateAnswerCatch)
	}
	return first.c, first.m, nil
}

// holderOf returns the holder id an acquire request's body names, or ""
// if its body cannot be read again.
func holderOf(req *http.Request) string {
	if req.GetBody == nil {
		return ""
	}
	body, err := req.GetBody()
	if err != nil {
		return ""
	}
	defer body.Close()
	var b api.AcquireBody
	if json.NewDecoder(body).Decode(&b) != nil {
		return ""
	}
	return b.Holder
}
