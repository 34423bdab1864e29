package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/raftlock/raftlock/cmd/raftlock-bench/internal/bench"
)

// system is a ZooKeeper ensemble under test.
type system struct {
	all []string // every server's client address
	// endpoints are those the benchmark clients use.
	endpoints []string
	ttl       time.Duration
	// ids maps each address to its member id, "z" and the server's myid
	// (as in --pids), read once with the conf word.
	ids map[string]string
}

var _ bench.System = (*system)(nil)

// newSystem finds the ensemble's servers at addrs. With leaderOnly the
// benchmark clients get only the leader's address.
func newSystem(ctx context.Context, addrs []string, ttl time.Duration, leaderOnly bool) (*system, error) {
	s := &system{all: slices.Clone(addrs), endpoints: slices.Clone(addrs), ttl: ttl, ids: map[string]string{}}
	for _, a := range addrs {
		out, err := fourLetter(ctx, a, "conf")
		if err != nil {
			return nil, fmt.Errorf("%w (is conf in 4lw.commands.whitelist?)", err)
		}
		id, err := parseServerID(out)
		if err != nil {
			return nil, fmt.Errorf("zookeeper %s: %w", a, err)
		}
		s.ids[a] = "z" + strconv.Itoa(id)
	}
	if !leaderOnly {
		return s, nil
	}
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	addr, _, err := s.leaderAddr(lctx)
	if err != nil {
		return nil, err
	}
	s.endpoints = []string{addr}
	return s, nil
}

// Name implements bench.System.
func (s *system) Name() string { return "zookeeper" }

// leaderAddr asks every server for srvr in parallel and returns the
// address and epoch of the server that calls itself leader (the highest
// epoch if two do). Once one has answered leader the others get
// statusGrace more, so that a dead server does not hold the answer up.
func (s *system) leaderAddr(ctx context.Context) (string, uint64, error) {
	type answer struct {
		addr string
		st   srvrStatus
		err  error
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	answers := make(chan answer, len(s.all))
	for _, a := range s.all {
		go func() {
			out, err := fourLetter(ctx, a, "srvr")
			var st srvrStatus
			if err == nil {
				st, err = parseSrvr(out)
			}
			answers <- answer{a, st, err}
		}()
	}
	var (
		leader string
		epoch  uint64
		errs   []error
		grace  <-chan time.Time
	)
	for range s.all {
		var a answer
		select {
		case a = <-answers:
		case <-grace:
			return leader, epoch, nil
		case <-ctx.Done():
			return "", 0, fmt.Errorf("zookeeper leader: %w", ctx.Err())
		}
		switch {
		case a.err != nil:
			errs = append(errs, a.err)
		case a.st.Mode == "leader" || a.st.Mode == "standalone":
			if leader == "" || a.st.Epoch() > epoch {
				leader, epoch = a.addr, a.st.Epoch()
			}
			if grace == nil {
				grace = time.After(statusGrace)
			}
		}
	}
	if leader == "" {
		errs = append(errs, errors.New("no server is leader"))
		return "", 0, fmt.Errorf("zookeeper leader: %w", errors.Join(errs...))
	}
	return leader, epoch, nil
}

// statusGrace is how long leaderAddr waits for the other servers once one
// has answered leader.
const statusGrace = 50 * time.Millisecond

// Leader implements bench.System: the leader's member id and its epoch.
func (s *system) Leader(ctx context.Context) (string, uint64, error) {
	addr, epoch, err := s.leaderAddr(ctx)
	if err != nil {
		return "", 0, err
	}
	return s.ids[addr], epoch, nil
}

// WaitMember implements bench.System: member id serves again, as leader
// or follower.
func (s *system) WaitMember(ctx context.Context, id string) error {
	addr := ""
	for a, i := range s.ids {
		if i == id {
			addr = a
		}
	}
	if addr == "" {
		return fmt.Errorf("zookeeper member %s: not among --addr", id)
	}
	for {
		out, err := fourLetter(ctx, addr, "srvr")
		if err == nil {
			if _, err = parseSrvr(out); err == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("zookeeper member %s at %s not serving: %w (last error: %v)", id, addr, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// NewWorker implements bench.System: its own connection (session) and a
// lock on the node /name.
func (s *system) NewWorker(ctx context.Context, i int, name string) (bench.Worker, error) {
	c, err := connect(ctx, s.endpoints, s.ttl, workerBuffer, nil, nil)
	if err != nil {
		return nil, err
	}
	path := "/" + name
	if err := ensurePath(c, path); err != nil {
		c.Close()
		return nil, fmt.Errorf("zookeeper worker %d: %w", i, err)
	}
	return &worker{c: c, l: &lock{c: c, path: path}}, nil
}

// NewSessionLoad implements bench.System.
func (s *system) NewSessionLoad(o *bench.Options, lockPrefix string) bench.SessionLoad {
	return newConns(s.endpoints, o.TTL, o.Workers, o.OpenRate, "/"+lockPrefix)
}

// Buffer sizes of a connection (the library's default is 1.5 MB each way
// per connection, too much for 20000 sessions): lock children lists of
// the benchmark stay far below these.
const (
	workerBuffer  = 64 << 10
	sessionBuffer = 8 << 10
)

// sessionTimeout bounds the wait for a new session.
const sessionTimeout = 30 * time.Second

// connect opens a session with servers and waits until it is established.
// obs, if set, is told of the connection's pings; onEvent, if set, of the
// connection's events (from the library's goroutine: it must not block).
func connect(ctx context.Context, servers []string, ttl time.Duration, buffer int, obs pingObserver, onEvent zk.EventCallback) (*zk.Conn, error) {
	has := make(chan struct{})
	var once sync.Once
	dial := func(network, addr string, timeout time.Duration) (net.Conn, error) {
		c, err := net.DialTimeout(network, addr, timeout)
		if err != nil || obs == nil {
			return c, err
		}
		return &pingConn{Conn: c, obs: obs}, nil
	}
	c, _, err := zk.Connect(servers, ttl,
		zk.WithLogger(nopLogger{}), zk.WithLogInfo(false),
		zk.WithMaxBufferSize(buffer), zk.WithMaxConnBufferSize(buffer),
		zk.WithDialer(dial),
		zk.WithEventCallback(func(ev zk.Event) {
			if ev.Type == zk.EventSession && ev.State == zk.StateHasSession {
				once.Do(func() { close(has) })
			}
			if onEvent != nil {
				onEvent(ev)
			}
		}))
	if err != nil {
		return nil, fmt.Errorf("zookeeper connect %v: %w", servers, err)
	}
	ctx, cancel := context.WithTimeout(ctx, sessionTimeout)
	defer cancel()
	select {
	case <-has:
		return c, nil
	case <-ctx.Done():
		c.Close()
		return nil, fmt.Errorf("zookeeper session with %v: %w", servers, ctx.Err())
	}
}

// nopLogger silences the client library.
type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}
