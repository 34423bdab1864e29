package node

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/fsm"

	"github.com/raftlock/raftlock/sequencer"
)

// Every malformed or out-of-range request gets its API code, and the
// replicated state does not change.
func TestBadInputIsRefusedAndStateUnchanged(t *testing.T) {
	// Slow Raft timeouts: the rule is about the state one leader keeps;
	// a leader change on a loaded machine would answer no_leader instead.
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 3*time.Second, 3*time.Second, 2*time.Second
	})
	// Every member's record first: one arriving while the cases run
	// would change the state they must leave alone.
	c.awaitRecords(t, fsm.Version, fsm.Version, fsm.Version)
	n, _ := c.leader()
	ctx := ctxT(t)
	s, err := n.OpenSession(ctx, api.OpenRequest{TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	other, err := n.OpenSession(ctx, api.OpenRequest{TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Acquire(ctx, api.AcquireRequest{Name: "held", Session: s.ID, Holder: "h"}); err != nil {
		t.Fatal(err)
	}
	before := n.fsm.Dump()
	before = before[:bytes.Index(before, []byte(`"now"`))] // ignore the clock

	acq := func(mut func(*api.AcquireRequest)) func() error {
		return func() error {
			r := api.AcquireRequest{Name: "x", Session: s.ID, Holder: "h2"}
			mut(&r)
			_, err := n.Acquire(ctx, r)
			return err
		}
	}
	cases := []struct {
		name string
		call func() error
		code api.Code
	}{
		{"empty name", acq(func(r *api.AcquireRequest) { r.Name = "" }), api.CodeInvalidArgument},
		{"2 KiB name", acq(func(r *api.AcquireRequest) { r.Name = strings.Repeat("a", 2048) }), api.CodeInvalidArgument},
		{"513-byte name", acq(func(r *api.AcquireRequest) { r.Name = strings.Repeat("a", 513) }), api.CodeInvalidArgument},
		{"control character", acq(func(r *api.AcquireRequest) { r.Name = "a\x00b" }), api.CodeInvalidArgument},
		{"newline", acq(func(r *api.AcquireRequest) { r.Name = "a\nb" }), api.CodeInvalidArgument},
		{"invalid utf-8", acq(func(r *api.AcquireRequest) { r.Name = "a\xffb" }), api.CodeInvalidArgument},
		{"empty holder", acq(func(r *api.AcquireRequest) { r.Holder = "" }), api.CodeInvalidArgument},
		{"bad mode", acq(func(r *api.AcquireRequest) { r.Mode = 7 }), api.CodeInvalidArgument},
		{"negative wait", acq(func(r *api.AcquireRequest) { r.Wait = -time.Second }), api.CodeInvalidArgument},
		{"huge wait", acq(func(r *api.AcquireRequest) { r.Wait = 24 * time.Hour }), api.CodeInvalidArgument},
		{"oversize value", acq(func(r *api.AcquireRequest) { r.Value = strings.Repeat("v", api.MaxValueBytes+1) }), api.CodeTooLarge},
		{"unknown session", acq(func(r *api.AcquireRequest) { r.Session = "00000000000000000000000000000000" }), api.CodeSessionNotFound},
		{"busy", acq(func(r *api.AcquireRequest) { r.Name = "held"; r.Session = other.ID }), api.CodeLockBusy},
		{"negative ttl", func() error { _, err := n.OpenSession(ctx, api.OpenRequest{TTL: -time.Second}); return err }, api.CodeInvalidArgument},
		{"huge ttl", func() error { _, err := n.OpenSession(ctx, api.OpenRequest{TTL: 1000 * time.Hour}); return err }, api.CodeInvalidArgument},
		{"tiny ttl", func() error { _, err := n.OpenSession(ctx, api.OpenRequest{TTL: time.Millisecond}); return err }, api.CodeInvalidArgument},
		{"huge lock-delay", func() error {
			_, err := n.OpenSession(ctx, api.OpenRequest{LockDelay: 2 * api.MaxLockDelay})
			return err
		}, api.CodeInvalidArgument},
		{"negative lock-delay", func() error {
			_, err := n.OpenSession(ctx, api.OpenRequest{LockDelay: -2 * time.Second})
			return err
		}, api.CodeInvalidArgument},
		{"session name with control char", func() error { _, err := n.OpenSession(ctx, api.OpenRequest{Name: "a\tb"}); return err }, api.CodeInvalidArgument},
		{"release by non-holder", func() error {
			return n.Release(ctx, api.ReleaseRequest{Name: "held", Session: other.ID, Holder: "h"})
		}, api.CodeNotHolder},
		{"release by unknown session", func() error {
			return n.Release(ctx, api.ReleaseRequest{Name: "held", Session: "nope", Holder: "h"})
		}, api.CodeSessionNotFound},
		{"keepalive unknown", func() error { _, err := n.KeepAlive(ctx, "nope"); return err }, api.CodeSessionNotFound},
		{"close unknown", func() error { return n.CloseSession(ctx, "nope") }, api.CodeSessionNotFound},
		{"info unknown", func() error { _, err := n.SessionInfo(ctx, "nope"); return err }, api.CodeSessionNotFound},
		{"lock bad name", func() error { _, err := n.LockState(ctx, ""); return err }, api.CodeInvalidArgument},
		{"sequencer garbage", func() error { _, err := n.CheckSequencer(ctx, "garbage"); return err }, api.CodeInvalidArgument},
		{"sequencer token 0", func() error { _, err := n.CheckSequencer(ctx, "rl1:x:0:held"); return err }, api.CodeInvalidArgument},
	}
	for _, tc := range cases {
		if got := api.CodeOf(tc.call()); got != tc.code {
			t.Errorf("%s: code %q, want %q", tc.name, got, tc.code)
		}
	}
	after := n.fsm.Dump()
	after = after[:bytes.Index(after, []byte(`"now"`))]
	if !bytes.Equal(before, after) {
		t.Fatalf("state changed by refused requests:\nbefore %s\nafter  %s", before, after)
	}
	// Lock-delay: zero takes the default, NoLockDelay asks for none.
	for req, want := range map[api.OpenRequest]time.Duration{
		{}:                           api.DefaultLockDelay,
		{LockDelay: api.NoLockDelay}: 0,
		{LockDelay: 3 * time.Second}: 3 * time.Second,
	} {
		info, err := n.OpenSession(ctx, req)
		if err != nil || info.LockDelay != want {
			t.Fatalf("open %+v: lock-delay %v %v, want %v", req, info.LockDelay, err, want)
		}
		if got, _ := n.fsm.Session(info.ID); time.Duration(got.LockDelay) != want {
			t.Fatalf("replicated lock-delay %v, want %v", time.Duration(got.LockDelay), want)
		}
	}
	// Still serving.
	g, err := n.Acquire(ctx, api.AcquireRequest{Name: "x", Session: other.ID, Holder: "h", Mode: sequencer.Shared})
	if err != nil || g.Token == 0 {
		t.Fatalf("acquire after bad input: %+v %v", g, err)
	}
}

// node.New refuses a Config whose durations are out of range, naming the
// field, the value and the range, before it touches the data directory: a
// negative FailoverGrace other than NoFailoverGrace, and the Raft timeouts
// hashicorp/raft would refuse at start.
func TestNewRefusesOutOfRangeDurations(t *testing.T) {
	for _, tc := range []struct {
		name string
		mut  func(*Config)
		want string
	}{
		{"negative grace", func(c *Config) { c.FailoverGrace = -10 * time.Second },
			"FailoverGrace -10s out of range [0s, 5m0s]"},
		{"grace of -2ns", func(c *Config) { c.FailoverGrace = NoFailoverGrace - 1 }, "FailoverGrace -2ns out of range [0s, 5m0s]"},
		{"huge grace", func(c *Config) { c.FailoverGrace = MaxFailoverGrace + time.Second }, "FailoverGrace 5m1s out of range [0s, 5m0s]"},
		{"negative heartbeat", func(c *Config) { c.HeartbeatTimeout = -time.Second }, "HeartbeatTimeout -1s out of range [5ms, 1m0s]"},
		{"tiny election", func(c *Config) { c.ElectionTimeout = time.Millisecond }, "ElectionTimeout 1ms out of range [5ms, 1m0s]"},
		{"heartbeat above election", func(c *Config) { c.HeartbeatTimeout = 2 * time.Second },
			"ElectionTimeout 500ms must be at least HeartbeatTimeout 2s"},
		{"lease above heartbeat", func(c *Config) { c.LeaderLeaseTimeout = time.Second },
			"LeaderLeaseTimeout 1s must not exceed HeartbeatTimeout 500ms"},
		{"negative expiry interval", func(c *Config) { c.ExpiryInterval = -time.Millisecond },
			"ExpiryInterval -1ms out of range [1ms, 1s]"},
		{"negative expiries per tick", func(c *Config) { c.MaxExpiriesPerTick = -1 }, "MaxExpiriesPerTick -1 must be positive"},
	} {
		dir := filepath.Join(t.TempDir(), "data")
		cfg := Config{ID: "n1", DataDir: dir, RaftBind: "127.0.0.1:0", Wire: testWire{}}
		tc.mut(&cfg)
		n, err := New(cfg)
		if err == nil {
			n.Shutdown(ctxT(t))
			t.Errorf("%s: New accepted the config", tc.name)
			continue
		}
		if !errors.Is(err, api.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New: %v, want invalid_argument %q", tc.name, err, tc.want)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s: New touched the data dir (%v)", tc.name, err)
		}
	}
}

// A zero FailoverGrace takes the default, NoFailoverGrace becomes no grace
// at all, and any other value in range is kept.
func TestFillResolvesFailoverGrace(t *testing.T) {
	for in, want := range map[time.Duration]time.Duration{
		0:                DefaultFailoverGrace,
		NoFailoverGrace:  0,
		2 * time.Second:  2 * time.Second,
		MaxFailoverGrace: MaxFailoverGrace,
	} {
		cfg := Config{ID: "n1", DataDir: "d", RaftBind: "127.0.0.1:0", FailoverGrace: in, Wire: testWire{}}
		if err := cfg.fill(); err != nil || cfg.FailoverGrace != want {
			t.Errorf("fill(FailoverGrace %v) = %v, %v; want %v", in, cfg.FailoverGrace, err, want)
		}
	}
}

// With NoFailoverGrace a new leader restarts every session's deadline at
// now+ttl exactly, with no extra grace; with the zero value it adds
// DefaultFailoverGrace. The clock is frozen so that deadlines are exact.
func TestNoFailoverGraceRestartsDeadlinesAtNowPlusTTL(t *testing.T) {
	frozen := time.Unix(1_700_000_000, 0)
	const ttl = 30 * time.Second
	for _, tc := range []struct {
		grace time.Duration
		want  time.Time
	}{
		{NoFailoverGrace, frozen.Add(ttl)},
		{0, frozen.Add(ttl + DefaultFailoverGrace)},
	} {
		c := newTestCluster(t, 1, func(cfg *Config) {
			cfg.FailoverGrace = tc.grace
			cfg.Now = func() time.Time { return frozen }
		})
		s := mustOpen(t, c, api.OpenRequest{TTL: ttl})
		c.stop(0)
		c.start(0) // a new leadership: Reset from the replicated sessions
		n, _ := c.leader()
		if got, ok := n.leadership().leases.Deadline(s.ID); !ok || !got.Equal(tc.want) {
			t.Errorf("FailoverGrace %v: deadline after failover %v (tracked %v), want %v", tc.grace, got, ok, tc.want)
		}
		c.stopAll()
	}
}
