package apitest

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/fsm"
)

// Call is one call of a method of the fake, as its log keeps it and its
// hook sees it.
type Call struct {
	// Method is the name of the method: "OpenSession", "Acquire", ...,
	// or the name a service built on the fake gave Do.
	Method string
	// Arg is the request as the caller passed it: an api.OpenRequest,
	// api.AcquireRequest or api.ReleaseRequest; the session id
	// (KeepAlive, CloseSession, SessionInfo), the lock name (LockState),
	// the prefix (Locks) or the sequencer's text (CheckSequencer); a
	// WatchRequest (WatchLock); what was given to Do.
	Arg any
	// At is when the call began, by the fake's clock.
	At time.Time
	// Err is the error the call answered, once Done.
	Err error
	// Done is true once the call has returned.
	Done bool
}

// WatchRequest is the Arg of a WatchLock call.
type WatchRequest struct {
	Name  string
	Index uint64
	Wait  time.Duration
}

// Hook is run at the start of every call, after the call is logged and
// before any injected fault or the call's own work, without the fake's
// lock held. It may block (on a gate, until ctx is done); a non-nil error
// is the call's answer and the state is left untouched.
type Hook func(ctx context.Context, c Call) error

// SetHook installs h for the calls that start from now on (nil: none).
func (b *Backend) SetHook(h Hook) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hook = h
}

// Fail makes the next calls of method answer errs, one error each, in
// order, leaving the state untouched. Method "*" matches every method;
// a method's own faults come before those of "*".
func (b *Backend) Fail(method string, errs ...error) { b.inject(method, false, errs) }

// FailApplied makes the next calls of method take effect and then answer
// errs, one error each (an outcome the caller cannot know, such as
// unknown_outcome after a leadership loss). An applied Acquire that has to
// wait keeps its place in the queue but does not wait.
func (b *Backend) FailApplied(method string, errs ...error) { b.inject(method, true, errs) }

func (b *Backend) inject(method string, apply bool, errs []error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, err := range errs {
		b.faults[method] = append(b.faults[method], fault{err: err, apply: apply})
	}
}

// ClearFaults drops every fault not yet answered.
func (b *Backend) ClearFaults() {
	b.mu.Lock()
	defer b.mu.Unlock()
	clear(b.faults)
}

// Calls returns how many calls of method have begun ("*": of every
// method), those answered by a hook or a fault included.
func (b *Backend) Calls(method string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, c := range b.log {
		if method == "*" || c.Method == method {
			n++
		}
	}
	return n
}

// Log returns the calls of method ("*": of every method), in the order
// they began.
func (b *Backend) Log(method string) []Call {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Call
	for _, c := range b.log {
		if method == "*" || c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// Answered returns how many calls of method ("*": of every method) have
// returned an error that matches target under errors.Is (for instance
// context.Canceled: the waits their callers gave up).
func (b *Backend) Answered(method string, target error) int {
	n := 0
	for _, c := range b.Log(method) {
		if c.Done && errors.Is(c.Err, target) {
			n++
		}
	}
	return n
}

// Grants returns how many grants the fake has made: holders it added to a
// lock, at once or from its queue, those of applied faults included (a
// retry answered with its holder's grant is none).
func (b *Backend) Grants() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.grants
}

// Waiting returns how many calls of method ("*": of every method) are now
// waiting in the fake for the state to change: acquires for their turn in
// a queue, watches for a change past their index. Calls that a hook holds
// are not counted, nor places whose request has gone (Peek counts those).
func (b *Backend) Waiting(method string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if method == "*" {
		n := 0
		for _, w := range b.waiting {
			n += w
		}
		return n
	}
	return b.waiting[method]
}

// SetTerm sets the Raft term that grants carry (1 at first).
func (b *Backend) SetTerm(term uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.term = term
}

// Index returns the fake's log index: the number of changes so far.
func (b *Backend) Index() uint64 {
	b.lock()
	defer b.unlock()
	return b.index
}

// Peek returns the state of a lock as LockState would answer it, without
// a call: nothing is counted, logged, hooked or failed.
func (b *Backend) Peek(name string) api.LockState {
	b.lock()
	defer b.unlock()
	return b.stateLocked(name)
}

// Dump returns the whole state (index, sessions, locks and their queues)
// as text: two dumps are equal exactly when nothing changed in between
// but deadlines (of leases and waits).
func (b *Backend) Dump() string {
	b.lock()
	defer b.unlock()
	var d struct {
		Index    uint64
		Sessions []api.Info
		Locks    []api.LockState
	}
	d.Index = b.index
	for _, s := range b.fsm.Sessions() {
		d.Sessions = append(d.Sessions, b.infoLocked(s.ID))
	}
	for _, l := range b.fsm.Locks("") {
		d.Locks = append(d.Locks, b.stateOf(l))
	}
	out, err := json.Marshal(d)
	if err != nil {
		panic(err) // not reached: the state is plain data
	}
	return string(out)
}

// Expire ends session id as the end of its lease would: its locks go into
// its lock-delay and its waits end. It reports whether the session was
// open.
func (b *Backend) Expire(id string) bool {
	b.lock()
	defer b.unlock()
	if _, ok := b.leases[id]; !ok {
		return false
	}
	b.endSessionLocked(id, true)
	return true
}

// Revoke revokes the grant of lock name held by holder, as an
// operator's revocation does (fsm.RevokeGrant): the grant ends at once,
// the lock waits out the session's ttl + lock-delay, and the session's
// keepalive answers name it until then. It reports whether such a grant
// was held.
func (b *Backend) Revoke(name, holder, reason string) bool {
	b.lock()
	defer b.unlock()
	l, ok := b.fsm.Lock(name)
	if !ok {
		return false
	}
	for _, h := range l.Holders {
		if h.Holder == holder {
			r := b.applyLocked(fsm.Command{Type: fsm.CmdRevokeGrant, RevokeGrant: &fsm.RevokeGrant{Lock: name,
				Session: h.Session, Holder: holder, Token: h.Token, Kind: fsm.RevokeKindAdmin, Reason: reason}})
			return r.Status == fsm.StatusOK
		}
	}
	return false
}

// Sweep applies what the clock has made due (expiries, ends of lock-delays
// and of waits) and wakes every blocked call to look at the clock again.
// Every call sweeps first, and with the real clock timers sweep on time; a
// test that moves an injected clock calls Sweep to let blocked calls see
// it.
func (b *Backend) Sweep() {
	b.lock()
	defer b.unlock()
	b.notifyLocked()
	b.timerDue = time.Time{} // re-arm even for the same deadline
}

// Do runs one call of a method the fake does not have, for services built
// on it (a transport.Service adds Cluster, ...): the call is logged and
// counted, the hook sees it, an injected fault answers it, and otherwise
// apply (nil: nothing) does the work. For a fault of FailApplied, apply
// runs with a ctx already done: it takes effect, and does not wait.
func (b *Backend) Do(ctx context.Context, method string, arg any, apply func(context.Context) error) error {
	b.mu.Lock()
	c := Call{Method: method, Arg: arg, At: b.now()}
	i := len(b.log)
	b.log = append(b.log, c)
	hook := b.hook
	b.mu.Unlock()
	err := b.serve(ctx, c, hook, apply)
	b.mu.Lock()
	b.log[i].Err, b.log[i].Done = err, true
	b.mu.Unlock()
	return err
}

func (b *Backend) serve(ctx context.Context, c Call, hook Hook, apply func(context.Context) error) error {
	if hook != nil {
		if err := hook(ctx, c); err != nil {
			return err
		}
	}
	if apply == nil {
		apply = func(context.Context) error { return nil }
	}
	b.mu.Lock()
	f, ok := b.takeFaultLocked(c.Method)
	b.mu.Unlock()
	if !ok {
		return apply(ctx)
	}
	if f.apply {
		done, cancel := context.WithCancel(ctx)
		cancel()
		_ = apply(done)
	}
	return f.err
}

func (b *Backend) takeFaultLocked(method string) (fault, bool) {
	for _, k := range []string{method, "*"} {
		if fs := b.faults[k]; len(fs) > 0 {
			b.faults[k] = fs[1:]
			return fs[0], true
		}
	}
	return fault{}, false
}

// first returns the first of the checks' errors (nil if none).
func first(checks ...error) error {
	for _, err := range checks {
		if err != nil {
			return err
		}
	}
	return nil
}

// call is Do for a method with a result: the zero result with an error.
func call[T any](b *Backend, ctx context.Context, method string, arg any, op func(context.Context) (T, error)) (T, error) {
	var out T
	err := b.Do(ctx, method, arg, func(ctx context.Context) error {
		var err error
		out, err = op(ctx)
		return err
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return out, nil
}
