package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/raftlock/raftlock/cmd/raftlock-bench/internal/bench"
)

// system is an etcd cluster under test.
type system struct {
	all []string // every endpoint
	// endpoints are those the benchmark clients use.
	endpoints []string
	ttl       time.Duration
	// admin asks the cluster for its leader and members.
	admin *clientv3.Client
	// members maps member ids to names and client endpoints (host:port),
	// read once: the benchmark does not change membership, and a member
	// list request can hang on a dead member.
	members map[uint64]member
}

// member is one etcd member.
type member struct {
	name, endpoint string
}

var _ bench.System = (*system)(nil)

// newSystem connects to the cluster at addrs. With leaderOnly the
// benchmark clients get only the leader's endpoint.
func newSystem(ctx context.Context, addrs []string, ttl time.Duration, leaderOnly bool) (*system, error) {
	s := &system{all: slices.Clone(addrs), endpoints: slices.Clone(addrs), ttl: ttl}
	var err error
	if s.admin, err = newClient(s.all); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := s.readMembers(cctx); err != nil {
		s.Close()
		return nil, err
	}
	if !leaderOnly {
		return s, nil
	}
	id, _, err := s.leader(cctx)
	if err != nil {
		s.Close()
		return nil, err
	}
	s.endpoints = []string{s.members[id].endpoint}
	return s, nil
}

// readMembers fills s.members.
func (s *system) readMembers(ctx context.Context) error {
	ml, err := s.admin.MemberList(ctx)
	if err != nil {
		return fmt.Errorf("etcd member list: %w", err)
	}
	s.members = map[uint64]member{}
	for _, m := range ml.Members {
		if len(m.ClientURLs) == 0 {
			return fmt.Errorf("etcd member %s (%x): no client URL", m.Name, m.ID)
		}
		ep := strings.TrimPrefix(strings.TrimPrefix(m.ClientURLs[0], "http://"), "https://")
		s.members[m.ID] = member{name: m.Name, endpoint: ep}
	}
	return nil
}

// newClient returns an etcd client of endpoints, logging nothing.
func newClient(endpoints []string) (*clientv3.Client, error) {
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("etcd client of %v: %w", endpoints, err)
	}
	return c, nil
}

// Close closes the admin client.
func (s *system) Close() error { return s.admin.Close() }

// Name implements bench.System.
func (s *system) Name() string { return "etcd" }

// NewWorker implements bench.System: its own client, session and mutex.
func (s *system) NewWorker(ctx context.Context, i int, lock string) (bench.Worker, error) {
	c, err := newClient(s.endpoints)
	if err != nil {
		return nil, err
	}
	w := &worker{c: c, ttl: int(s.ttl / time.Second), lock: "/" + lock}
	if err := w.open(ctx); err != nil {
		_ = c.Close()
		return nil, err
	}
	return w, nil
}

// leader returns the leader's member id and term as the members answering
// a status request see it. They are asked in parallel and the latest term
// wins; once one has named a leader the others get statusGrace more, so
// that a dead member does not hold the answer up.
func (s *system) leader(ctx context.Context) (uint64, uint64, error) {
	type answer struct {
		ep  string
		st  *clientv3.StatusResponse
		err error
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	answers := make(chan answer, len(s.all))
	for _, ep := range s.all {
		go func() {
			st, err := s.admin.Status(ctx, ep)
			answers <- answer{ep, st, err}
		}()
	}
	var (
		leader, term uint64
		errs         []error
		grace        <-chan time.Time
	)
	for range s.all {
		var a answer
		select {
		case a = <-answers:
		case <-grace:
			return leader, term, nil
		}
		switch {
		case a.err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", a.ep, a.err))
		case a.st.Leader == 0:
			errs = append(errs, fmt.Errorf("%s: no leader", a.ep))
		case a.st.RaftTerm >= term:
			leader, term = a.st.Leader, a.st.RaftTerm
			if grace == nil {
				grace = time.After(statusGrace)
			}
		}
	}
	if leader == 0 {
		return 0, 0, fmt.Errorf("etcd leader: %w", errors.Join(errs...))
	}
	return leader, term, nil
}

// statusGrace is how long leader waits for the other members once one
// has named a leader.
const statusGrace = 50 * time.Millisecond

// Leader implements bench.System: the leader's member name.
func (s *system) Leader(ctx context.Context) (string, uint64, error) {
	id, term, err := s.leader(ctx)
	if err != nil {
		return "", 0, err
	}
	m, ok := s.members[id]
	if !ok {
		return "", 0, fmt.Errorf("etcd leader %x is not in the member list", id)
	}
	return m.name, term, nil
}

// WaitMember implements bench.System: member name answers a status
// request and knows a leader.
func (s *system) WaitMember(ctx context.Context, name string) error {
	ep := ""
	for _, m := range s.members {
		if m.name == name {
			ep = m.endpoint
		}
	}
	if ep == "" {
		return fmt.Errorf("etcd member %s: not in the member list", name)
	}
	for {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := s.admin.Status(sctx, ep)
		cancel()
		if err == nil && st.Leader != 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("etcd member %s at %s not healthy: %w (last error: %v)", name, ep, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// NewSessionLoad implements bench.System.
func (s *system) NewSessionLoad(o *bench.Options, lockPrefix string) bench.SessionLoad {
	return newLeases(s.endpoints, o.TTL, o.Workers, o.OpenRate, "/"+lockPrefix)
}
