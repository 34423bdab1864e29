package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/raftlock/raftlock/api"

	"github.com/raftlock/raftlock/cmd/raftlock-bench/internal/bench"
	"github.com/raftlock/raftlock/session"
	"github.com/raftlock/raftlock/transport/client"
	"github.com/raftlock/raftlock/transport/stream"
)

// system is a raftlock cluster under test, reached over its HTTP API.
type system struct {
	addrs []string
	// hc is shared by every client of the benchmark: one connection pool,
	// large enough that no request waits for a connection or churns one.
	hc  *http.Client
	ttl time.Duration
	// api serves the cluster queries and the session load.
	api *client.Client
	// driver, if set, runs the clients of (a)-(c) in another process
	// (--driver).
	driver *bench.Driver
}

var _ bench.System = (*system)(nil)

// newSystem returns the system at addrs. With leaderFirst the leader's
// address is moved to the front, so that clients talk to the leader
// rather than through a forwarding follower (they still move on to the
// others when it fails).
func newSystem(ctx context.Context, addrs []string, ttl time.Duration, conns int, leaderFirst bool, proto string) (*system, error) {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     90 * time.Second,
	}
	var rt http.RoundTripper = tr
	switch proto {
	case "2":
		// One connection per node carries every client's requests.
		tr.Protocols = client.HTTP2Only()
	case "stream":
		// Likewise, over the stream protocol where a node serves it.
		rt = &stream.Transport{Fallback: tr, Dial: tr.DialContext}
	}
	s := &system{addrs: slices.Clone(addrs), ttl: ttl, hc: &http.Client{Transport: rt}}
	var err error
	if s.api, err = s.client(); err != nil {
		return nil, err
	}
	if !leaderFirst {
		return s, nil
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	info, err := s.api.Cluster(cctx)
	if err != nil {
		return nil, fmt.Errorf("find the leader: %w", err)
	}
	for _, m := range info.Members {
		if m.ID == info.Leader && m.HTTPAddr != "" {
			s.addrs = append([]string{m.HTTPAddr}, slices.DeleteFunc(s.addrs, func(a string) bool { return a == m.HTTPAddr })...)
		}
	}
	if s.api, err = s.client(); err != nil {
		return nil, err
	}
	return s, nil
}

// client returns a new API client on the shared connection pool.
func (s *system) client(addrs ...string) (*client.Client, error) {
	if len(addrs) == 0 {
		addrs = s.addrs
	}
	c, err := client.NewClient(addrs, client.WithHTTPClient(s.hc))
	if err != nil {
		return nil, fmt.Errorf("raftlock client: %w", err)
	}
	return c, nil
}

// Name implements bench.System: "raftlock", or "raftlock-python" and the
// like for a driver's clients.
func (s *system) Name() string {
	if s.driver != nil {
		return "raftlock-" + s.driver.Name
	}
	return "raftlock"
}

// NewWorker implements bench.System: a client with its own Session.
func (s *system) NewWorker(ctx context.Context, i int, lock string) (bench.Worker, error) {
	c, err := s.client()
	if err != nil {
		return nil, err
	}
	w := &worker{b: c, lock: lock, ttl: s.ttl, name: fmt.Sprintf("bench-%d", i)}
	if err := w.open(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

// Leader implements bench.System.
func (s *system) Leader(ctx context.Context) (string, uint64, error) {
	info, err := s.api.Cluster(ctx)
	if err != nil {
		return "", 0, fmt.Errorf("cluster info: %w", err)
	}
	if info.Leader == "" {
		return "", 0, errors.New("cluster info: no leader")
	}
	return info.Leader, info.Term, nil
}

// WaitMember implements bench.System: member id answers /v1/health and
// names a leader.
func (s *system) WaitMember(ctx context.Context, id string) error {
	info, err := s.api.Cluster(ctx)
	if err != nil {
		return fmt.Errorf("cluster info: %w", err)
	}
	addr := ""
	for _, m := range info.Members {
		if m.ID == id {
			addr = m.HTTPAddr
		}
	}
	if addr == "" {
		return fmt.Errorf("member %s: no HTTP address in the member table", id)
	}
	mc, err := s.client(addr)
	if err != nil {
		return err
	}
	for {
		h, err := mc.Health(ctx)
		if err == nil && h.OK && h.Leader != "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("member %s at %s not healthy: %w (last: %+v, %v)", id, addr, ctx.Err(), h, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// NewSessionLoad implements bench.System.
func (s *system) NewSessionLoad(o *bench.Options, lockPrefix string) bench.SessionLoad {
	if s.driver != nil {
		return bench.NewDriverSessions(s, o, lockPrefix)
	}
	return newKeeper(s.api, o.TTL, o.Workers, o.OpenRate, lockPrefix)
}

// openOptions are the options of every benchmark session: the same TTL as
// the etcd leases, and no lock-delay (etcd has none).
func openOptions(ttl time.Duration, name string) []session.Option {
	return []session.Option{session.TTL(ttl), session.LockDelay(api.NoLockDelay), session.Name(name)}
}
