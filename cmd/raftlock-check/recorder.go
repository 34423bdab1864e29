package main

import (
	"context"
	"errors"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/sequencer"
)

// recorder is a api.Backend that reports every call it passes on to
// the real backend, with its call and return times and its outcome, to the
// checker. The client's Session runs on it, so the history holds exactly
// the requests the cluster saw: keepalives, retries and the clean-up of
// abandoned acquires included.
type recorder struct {
	inner api.Backend
	link  *link
	// node names the node a read-only recorder talks to.
	node string
	// naive marks the recorder of the naive waiter's acquires.
	naive bool
}

// codeWaitCancelled is the code of a waiting acquire whose wait its own
// holder ended (a release by the queued holder). Spelled out here rather
// than taken from the session package so that the checker also builds
// against a cluster that predates it.
const codeWaitCancelled api.Code = "wait_cancelled"

var _ api.Backend = (*recorder)(nil)

// unlockIntent marks the context of a release sent by Lock.Unlock.
type unlockIntent struct{}

// verifyIntent marks the context of a read asked for by msgVerify.
type verifyIntent struct{}

func (r *recorder) begin(m message) uint64 {
	m.T, m.ID, m.At = msgCall, r.link.nextID(), monoNow()
	r.link.send(m)
	return m.ID
}

func (r *recorder) end(id uint64, m message) {
	m.T, m.ID, m.At = msgRet, id, monoNow()
	r.link.send(m)
}

// outcome classifies the error of a call. Only answers that say what the
// cluster did are definite; a call that gave up (its context ended) or
// failed otherwise may or may not have taken effect.
func outcome(err error) (result, text string) {
	if err == nil {
		return resOK, ""
	}
	text = err.Error()
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return resUnknown, text
	}
	switch api.CodeOf(err) {
	case api.CodeLockBusy:
		return resBusy, text
	case api.CodeSessionNotFound:
		return resNotFound, text
	case api.CodeWaitTimeout:
		return resWaitTimeout, text
	case api.CodeNotHolder:
		return resNotHolder, text
	case codeWaitCancelled:
		return resWaitCancelled, text
	case api.CodeInvalidArgument:
		return resInvalid, text
	case api.CodeNoLeader:
		// Only a single-attempt call returns it (the Go client retries
		// no_leader until its ctx ends, which is caught above).
		return resNoLeader, text
	}
	return resUnknown, text
}

// failedUnlessNotFound maps the outcome of a call whose failure matters
// only when it says the session is gone.
func failedUnlessNotFound(err error) (string, string) {
	res, text := outcome(err)
	if res != resOK && res != resNotFound {
		res = resFailed
	}
	return res, text
}

// OpenSession implements api.Backend.
func (r *recorder) OpenSession(ctx context.Context, req api.OpenRequest) (api.Info, error) {
	id := r.begin(message{Kind: kindOpen})
	info, err := r.inner.OpenSession(ctx, req)
	m := message{Kind: kindOpen}
	m.Result, m.Err = failedUnlessNotFound(err)
	if err == nil {
		m.Session, m.TTL, m.LockDelay = info.ID, int64(info.TTL), int64(info.LockDelay)
	}
	r.end(id, m)
	return info, err
}

// KeepAlive implements api.Backend.
func (r *recorder) KeepAlive(ctx context.Context, sid string) (api.KeepAliveAnswer, error) {
	id := r.begin(message{Kind: kindKeepAlive, Session: sid})
	a, err := r.inner.KeepAlive(ctx, sid)
	m := message{Kind: kindKeepAlive, TTL: int64(a.TTL)}
	m.Result, m.Err = failedUnlessNotFound(err)
	r.end(id, m)
	return a, err
}

// CloseSession implements api.Backend.
func (r *recorder) CloseSession(ctx context.Context, sid string) error {
	id := r.begin(message{Kind: kindClose, Session: sid})
	err := r.inner.CloseSession(ctx, sid)
	m := message{Kind: kindClose}
	m.Result, m.Err = outcome(err)
	r.end(id, m)
	return err
}

// SessionInfo implements api.Backend; it is not recorded.
func (r *recorder) SessionInfo(ctx context.Context, sid string) (api.Info, error) {
	return r.inner.SessionInfo(ctx, sid)
}

// Acquire implements api.Backend.
func (r *recorder) Acquire(ctx context.Context, req api.AcquireRequest) (api.Grant, error) {
	m0 := message{Kind: kindAcquire, Lock: req.Name, Session: req.Session, Holder: req.Holder,
		Wait: req.Wait > 0, WaitFor: int64(max(req.Wait, 0)), Naive: r.naive, Permits: req.Permits, MaxHold: int64(req.MaxHold)}
	if req.Mode == sequencer.Shared {
		m0.Mode = modeShared
	}
	id := r.begin(m0)
	actx, attempts := withAttempts(ctx)
	g, err := r.inner.Acquire(actx, req)
	m := message{Kind: kindAcquire}
	m.Attempts, m.Unsure = attempts.counts()
	m.Result, m.Err = outcome(err)
	if err == nil {
		m.Token, m.Slot = uint64(g.Token), g.Slot
	}
	r.end(id, m)
	return g, err
}

// Release implements api.Backend.
func (r *recorder) Release(ctx context.Context, req api.ReleaseRequest) error {
	id := r.begin(message{Kind: kindRelease, Lock: req.Name, Session: req.Session, Holder: req.Holder,
		Unlock: ctx.Value(unlockIntent{}) != nil})
	actx, attempts := withAttempts(ctx)
	err := r.inner.Release(actx, req)
	m := message{Kind: kindRelease}
	m.Attempts, m.Unsure = attempts.counts()
	m.Result, m.Err = outcome(err)
	r.end(id, m)
	return err
}

// LockState implements api.Backend: a read of one lock.
func (r *recorder) LockState(ctx context.Context, name string) (api.LockState, error) {
	id := r.begin(message{Kind: kindRead, Lock: name, Node: r.node, Verify: ctx.Value(verifyIntent{}) != nil})
	st, err := r.inner.LockState(ctx, name)
	m := message{Kind: kindRead, Result: resOK}
	if err != nil {
		m.Result, m.Err = resFailed, err.Error()
	}
	for _, h := range st.Holders {
		m.Holders = append(m.Holders, holderInfo{Handle: h.SessionHandle, Holder: h.Holder, Token: uint64(h.Token), Slot: h.Slot})
	}
	if err == nil {
		m.Queue, m.Index = queueOf(st), st.Index
	}
	r.end(id, m)
	return st, err
}

// Locks implements api.Backend; it is not recorded.
func (r *recorder) Locks(ctx context.Context, prefix string) ([]api.LockState, error) {
	return r.inner.Locks(ctx, prefix)
}

// CheckSequencer implements api.Backend; it is not recorded.
func (r *recorder) CheckSequencer(ctx context.Context, seq string) (api.SequencerCheck, error) {
	return r.inner.CheckSequencer(ctx, seq)
}

// WatchLock implements api.Backend; it is not recorded (the workload
// does not watch).
func (r *recorder) WatchLock(ctx context.Context, name string, index uint64, wait time.Duration) (api.LockState, error) {
	return r.inner.WatchLock(ctx, name, index, wait)
}
