package session

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/raftlock/raftlock/api"

	"github.com/raftlock/raftlock/sequencer"
)

// This file is the leader-election recipe: a campaign is a blocking
// exclusive Lock on the election's name whose value is the candidate's
// (e.g. its address); the leader is the lock's holder, and every term of
// leadership carries the grant's fencing sequencer.

// ErrElectionNoLeader is returned by CurrentLeader when nobody leads the
// election now.
var ErrElectionNoLeader = errors.New("election has no leader")

// Leader is a leader of an election: the current one (CurrentLeader), or
// one Observe reports.
type Leader struct {
	// Election is the election's (the lock's) name.
	Election string
	// Value is what the leader campaigned with.
	Value string
	// SessionHandle is the handle of the leader's session
	// (api.SessionHandle; never its id, a secret) while it leads at the
	// answer that reports it; empty for a leader Observe learns of from the
	// lock's history after it stopped leading. A session knows itself by
	// Session.Handle.
	SessionHandle string
	// SessionName is the name of the leader's session, from the lock's
	// grant history (empty from a server that keeps none).
	SessionName string
	// Sequencer fences the leader's term: resources that check it reject
	// an earlier leader once they have seen this one.
	Sequencer sequencer.Sequencer
	// Gap is set on a leader Observe reports when leaders elected between
	// the previous one it reported (or Observe's start) and this one may be
	// missing from its reports (see Observe). Always false from
	// CurrentLeader.
	Gap bool
}

// Token returns the fencing token of the leader's term.
func (l Leader) Token() sequencer.Token { return l.Sequencer.Token }

// Leadership is this session's term as leader of an election. Lost is
// closed when the leadership can no longer be trusted (the session expired,
// or Resign was called); act as leader only while it is open, and pass
// Sequencer to the resources you write.
type Leadership struct {
	*Lock
}

// Resign gives the leadership up; the next campaigner is elected at once
// (no lock-delay after a resignation).
func (l *Leadership) Resign(ctx context.Context) error {
	return l.Unlock(ctx)
}

// Campaign blocks until this session leads the election name, or ctx ends.
// The value is published to observers as Leader.Value. Campaigners are
// elected in the order they began to campaign (FIFO); one that gives up
// (ctx) leaves the queue.
func (s *Session) Campaign(ctx context.Context, name, value string) (*Leadership, error) {
	l, err := s.Lock(ctx, name, Value(value))
	if err != nil {
		return nil, fmt.Errorf("campaign %s: %w", name, err)
	}
	return &Leadership{Lock: l}, nil
}

// Leader returns the current leader of the election name; see
// CurrentLeader.
func (s *Session) Leader(ctx context.Context, name string) (Leader, error) {
	return CurrentLeader(ctx, s.b, name)
}

// Observe streams the leaders of the election name, with its timers on the
// session's Clock; see the package function Observe.
func (s *Session) Observe(ctx context.Context, name string, opts ...WatchOption) (<-chan Leader, error) {
	return observe(ctx, s.b, s.clock, name, opts)
}

// CurrentLeader returns the current leader of the election name (a
// linearizable read on the cluster's leader), or ErrElectionNoLeader.
func CurrentLeader(ctx context.Context, b api.Backend, name string) (Leader, error) {
	if b == nil {
		return Leader{}, api.Errorf(api.CodeInvalidArgument, "leader: nil backend")
	}
	st, err := b.LockState(ctx, name)
	if err != nil {
		return Leader{}, fmt.Errorf("leader of %s: %w", name, err)
	}
	ld, ok := leaderOf(st)
	if !ok {
		return Leader{}, fmt.Errorf("leader of %s: %w", name, ErrElectionNoLeader)
	}
	return ld, nil
}

// Observe streams the leaders of the election name: first the current one
// (if any), then every leader elected after it, in grant order: each once,
// tokens increasing. Periods without a leader are not reported.
//
// It rides on Watch, so it survives failovers, and a leader is reported as
// soon as an answer shows it (a frozen node delays an answer by at most
// Watch's 15 s), even a leader already gone by then: each answer carries
// the lock's grant history (LockState.Grants), and Observe reports every
// exclusive grant in it after the last leader it reported. The history
// holds the lock's last 32 grants, and is kept while the lock is free
// until newer free histories push it out (DESIGN.md, "Grant history").
//
// The promise: a leader reported with Gap false is the first leader
// elected after the previous one reported (for the first report: the
// leader when Observe's first answer was read, or the first elected after
// it), so none in between was skipped. When an answer's history no longer
// reaches back that far (the lock granted more than 32 times, shared
// grants included, between two answers; or its free history dropped),
// leaders in between may be missing, and the next leader reported has Gap
// set. A server from before histories (answers with GrantsSince 0) gets the
// old behaviour: Observe reports the leader each answer shows, and may skip
// leaders without setting Gap. The channel is closed when ctx is done.
// With OnWatchError the caller learns of every query that failed.
func Observe(ctx context.Context, b api.Backend, name string, opts ...WatchOption) (<-chan Leader, error) {
	return observe(ctx, b, RealClock(), name, opts)
}

// observe is Observe with its timers on clock.
func observe(ctx context.Context, b api.Backend, clock Clock, name string, opts []WatchOption) (<-chan Leader, error) {
	states, err := watch(ctx, b, clock, name, opts)
	if err != nil {
		return nil, fmt.Errorf("observe %s: %w", name, err)
	}
	out := make(chan Leader)
	go func() {
		defer close(out)
		var (
			started bool
			// known: every leader with a token up to known was reported,
			// came before Observe started, or is counted in gap.
			known sequencer.Token
			gap   bool
		)
		for st := range states {
			var next []Leader
			if !started {
				started = true
				if ld, ok := leaderOf(st); ok {
					next = append(next, ld)
				}
			} else {
				var missing bool
				next, missing = electedAfter(st, known)
				gap = gap || missing
			}
			for _, ld := range next {
				ld.Gap = gap
				select {
				case out <- ld:
					gap = false
					known = max(known, ld.Token())
				case <-ctx.Done():
					return
				}
			}
			// Every grant of the lock up to the answer's index is in this
			// answer, or was dropped before it (then gap says so).
			known = max(known, sequencer.Token(st.Index))
		}
	}()
	return out, nil
}

// electedAfter returns the leaders of an election lock's state elected
// after token known, in grant order, and whether some may be missing: the
// state's history does not reach back to known. A state without history (a
// server from before histories) gives its current leader only, and cannot
// tell.
func electedAfter(st api.LockState, known sequencer.Token) ([]Leader, bool) {
	if st.GrantsSince == 0 {
		if ld, ok := leaderOf(st); ok && ld.Token() > known {
			return []Leader{ld}, false
		}
		return nil, false
	}
	var out []Leader
	for _, g := range st.Grants {
		if g.Mode == sequencer.Exclusive && g.Token > known {
			out = append(out, pastLeader(st, g))
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Token() < out[j].Token() })
	return out, st.GrantsSince > known+1
}

// pastLeader is the leader an exclusive grant of an election lock's history
// made; SessionHandle is set while that grant still holds the lock.
func pastLeader(st api.LockState, g api.PastGrant) Leader {
	ld := Leader{Election: st.Name, Value: g.Value, SessionName: g.SessionName,
		Sequencer: sequencer.Sequencer{Name: st.Name, Mode: sequencer.Exclusive, Token: g.Token}}
	for _, h := range st.Holders {
		if h.Token == g.Token && h.Holder == g.Holder {
			ld.SessionHandle = h.SessionHandle
		}
	}
	return ld
}

// leaderOf reads the leader out of an election lock's state: its exclusive
// holder, with its session's name from the history when it is there.
func leaderOf(st api.LockState) (Leader, bool) {
	if st.Mode != sequencer.Exclusive || len(st.Holders) != 1 {
		return Leader{}, false
	}
	h := st.Holders[0]
	ld := Leader{
		Election:      st.Name,
		Value:         h.Value,
		SessionHandle: h.SessionHandle,
		SessionName:   h.SessionName,
		Sequencer:     sequencer.Sequencer{Name: st.Name, Mode: sequencer.Exclusive, Token: h.Token},
	}
	for _, g := range st.Grants {
		if g.Token == h.Token && g.Holder == h.Holder {
			ld.SessionName = g.SessionName
		}
	}
	return ld, true
}
