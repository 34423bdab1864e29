package session

import (
	"context"
	"errors"
	"fmt"

	"github.com/raftlock/raftlock/sequencer"
)

// This file is the leader-election recipe: a campaign is a blocking
// exclusive Lock on the election's name whose value is the candidate's
// (e.g. its address); the leader is the lock's holder, and every term of
// leadership carries the grant's fencing sequencer.

// ErrElectionNoLeader is returned by CurrentLeader when nobody leads the
// election now.
var ErrElectionNoLeader = errors.New("election has no leader")

// Leader is the current leader of an election.
type Leader struct {
	// Election is the election's (the lock's) name.
	Election string
	// Value is what the leader campaigned with.
	Value string
	// Session is the leader's session id.
	Session string
	// Sequencer fences the leader's term: resources that check it reject
	// an earlier leader once they have seen this one.
	Sequencer sequencer.Sequencer
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

// Observe streams the leaders of the election name; see the package
// function Observe.
func (s *Session) Observe(ctx context.Context, name string) (<-chan Leader, error) {
	return Observe(ctx, s.b, name)
}

// CurrentLeader returns the current leader of the election name (a
// linearizable read on the cluster's leader), or ErrElectionNoLeader.
func CurrentLeader(ctx context.Context, b Backend, name string) (Leader, error) {
	if b == nil {
		return Leader{}, Errorf(CodeInvalidArgument, "leader: nil backend")
	}
	st, err := b.Lock(ctx, name)
	if err != nil {
		return Leader{}, fmt.Errorf("leader of %s: %w", name, err)
	}
	ld, ok := leaderOf(st)
	if !ok {
		return Leader{}, fmt.Errorf("leader of %s: %w", name, ErrElectionNoLeader)
	}
	return ld, nil
}

// Observe streams the leaders of the election name: the current one (if
// any), then each new leader as it is elected, in order of election, so
// tokens increase. Periods without a leader are not reported. Like Watch,
// it rides on blocking queries and survives failovers; the channel is
// closed when ctx is done.
func Observe(ctx context.Context, b Backend, name string) (<-chan Leader, error) {
	states, err := Watch(ctx, b, name)
	if err != nil {
		return nil, err
	}
	out := make(chan Leader)
	go func() {
		defer close(out)
		var last sequencer.Token
		for st := range states {
			ld, ok := leaderOf(st)
			if !ok || ld.Token() <= last {
				continue
			}
			select {
			case out <- ld:
				last = ld.Token()
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// leaderOf reads the leader out of an election lock's state: its exclusive
// holder.
func leaderOf(st LockState) (Leader, bool) {
	if st.Mode != sequencer.Exclusive || len(st.Holders) != 1 {
		return Leader{}, false
	}
	h := st.Holders[0]
	return Leader{
		Election:  st.Name,
		Value:     h.Value,
		Session:   h.Session,
		Sequencer: sequencer.Sequencer{Name: st.Name, Mode: sequencer.Exclusive, Token: h.Token},
	}, true
}
