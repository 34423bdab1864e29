// Package bench is the system-neutral half of the raftlock and etcd
// benchmarks: the command-line options, the load drivers of the four
// scenarios, latency percentiles, /proc probes and the one-line result
// format. It imports only the standard library so that the nested etcd
// benchmark module can share it without depending on raftlock's packages.
package bench

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Scenario names.
const (
	Uncontended = "uncontended" // (a) every client its own lock
	Contended   = "contended"   // (b) every client on one lock
	Sessions    = "sessions"    // (c) many sessions kept alive
	Failover    = "failover"    // (d) kill -9 of the leader under load
	// Ceiling is not run by the binaries: it names the in-process
	// ceiling's line (node's BenchmarkCluster, three nodes in one process
	// without HTTP) that bench-vs-peers.sh adds to raftlock's results.
	Ceiling = "ceiling"
)

// Options are the command-line options both benchmark binaries share.
type Options struct {
	// Addrs are the cluster's client addresses (host:port).
	Addrs []string
	// Scenario is one of Uncontended, Contended, Sessions, Failover.
	Scenario string
	// Clients is the number of concurrent clients of (a), (b) and (d).
	Clients int
	// Duration is the measured time of (a) and (b); (d) runs until its
	// rounds are done.
	Duration time.Duration
	// Warmup runs the load unmeasured before Duration starts.
	Warmup time.Duration
	// TTL is the session (lease) TTL of every scenario.
	TTL time.Duration
	// SessionCount is the number of sessions of (c); HeldLocks of them take
	// one lock each; SessionTime is how long they are kept alive.
	SessionCount int
	HeldLocks    int
	SessionTime  time.Duration
	// Workers bounds the concurrent requests of (c) (opens, keepalives,
	// acquires, closes).
	Workers int
	// PIDs maps member ids to the PIDs of their server processes.
	PIDs map[string]int
	// Rounds is the number of leader kills of (d); RestartCmd, if set, is
	// run (sh -c, "{id}" replaced by the killed member's id) to restart the
	// killed member and must print its new PID as its last line.
	Rounds     int
	RestartCmd string
	// Settle is the load time before each kill of (d).
	Settle time.Duration
	// Lock is the lock name (prefix) the benchmark uses.
	Lock string
	// JSON prints the result as one JSON line on stdout (the text line then
	// goes to stderr).
	JSON bool
	// Label is copied into the result (e.g. a run id).
	Label string
	// IdleBaseline, when > 0, is how long (c) measures the idle leader's
	// CPU before the opens: the baseline taken off the keepalive
	// window's leader CPU for the CPU per keepalive.
	IdleBaseline time.Duration
	// OpenRate, when > 0, paces the opens of (c): at most this many
	// sessions a second, spread evenly. Keepalives fall due when their
	// session was opened, so this fixes how they arrive at the leader
	// (OpenRate = sessions / (TTL/3): evenly over each interval),
	// whichever client opens them.
	OpenRate float64
}

// Register defines the options' flags on fs with their defaults.
func (o *Options) Register(fs *flag.FlagSet, defaultAddr string) {
	fs.Func("addr", "cluster addresses host:port,... (default "+defaultAddr+")", func(v string) error {
		o.Addrs = splitList(v)
		if len(o.Addrs) == 0 {
			return errors.New("empty address list")
		}
		return nil
	})
	o.Addrs = splitList(defaultAddr)
	fs.StringVar(&o.Scenario, "scenario", Uncontended, "uncontended (a), contended (b), sessions (c) or failover (d)")
	fs.IntVar(&o.Clients, "clients", 1, "concurrent clients, each with its own session (a, b, d)")
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "measured time (a, b)")
	fs.DurationVar(&o.Warmup, "warmup", time.Second, "unmeasured load before the measurement (a, b)")
	fs.DurationVar(&o.TTL, "ttl", 15*time.Second, "session/lease TTL")
	fs.IntVar(&o.SessionCount, "sessions", 20000, "sessions kept alive (c)")
	fs.IntVar(&o.HeldLocks, "held-locks", -1, "how many of the sessions take one lock each (c; -1: all)")
	fs.DurationVar(&o.SessionTime, "session-time", 30*time.Second, "how long the sessions are kept alive (c)")
	fs.IntVar(&o.Workers, "workers", 64, "concurrent requests when opening, keeping alive and closing sessions (c)")
	fs.Func("pids", "member=PID,... of the server processes (CPU and memory of the leader; needed by failover)", func(v string) error {
		m, err := ParsePIDs(v)
		o.PIDs = m
		return err
	})
	fs.IntVar(&o.Rounds, "rounds", 1, "leader kills (d)")
	fs.StringVar(&o.RestartCmd, "restart-cmd", "", "shell command restarting a killed member ({id} is replaced); its last output line is the new PID (d)")
	fs.DurationVar(&o.Settle, "settle", 3*time.Second, "load time before each kill (d)")
	fs.StringVar(&o.Lock, "lock", "bench", "lock name prefix")
	fs.BoolVar(&o.JSON, "json", false, "print the result as one JSON line on stdout (the text line goes to stderr)")
	fs.StringVar(&o.Label, "label", "", "free text copied into the result")
	fs.Float64Var(&o.OpenRate, "open-rate", 0, "sessions opened per second at most, spread evenly (c; 0: as fast as --workers go)")
	fs.DurationVar(&o.IdleBaseline, "idle-baseline", 0, "measure the idle leader's CPU this long before the opens, for leader_cpu_us_per_keepalive (c; 0: no baseline)")
}

// Validate checks the options after parsing and fills derived defaults.
func (o *Options) Validate() error {
	switch o.Scenario {
	case "a":
		o.Scenario = Uncontended
	case "b":
		o.Scenario = Contended
	case "c":
		o.Scenario = Sessions
	case "d":
		o.Scenario = Failover
	}
	switch o.Scenario {
	case Uncontended, Contended, Sessions, Failover:
	default:
		return fmt.Errorf("--scenario %q: want uncontended, contended, sessions or failover (or a, b, c, d)", o.Scenario)
	}
	if len(o.Addrs) == 0 {
		return errors.New("--addr: no address")
	}
	if o.Clients < 1 {
		return fmt.Errorf("--clients %d: want at least 1", o.Clients)
	}
	if o.Duration <= 0 {
		return fmt.Errorf("--duration %v: want > 0", o.Duration)
	}
	if o.Warmup < 0 {
		return fmt.Errorf("--warmup %v: want >= 0", o.Warmup)
	}
	if o.TTL < time.Second {
		return fmt.Errorf("--ttl %v: want at least 1s", o.TTL)
	}
	if o.SessionCount < 1 {
		return fmt.Errorf("--sessions %d: want at least 1", o.SessionCount)
	}
	if o.HeldLocks < 0 || o.HeldLocks > o.SessionCount {
		o.HeldLocks = o.SessionCount
	}
	if o.SessionTime <= 0 {
		return fmt.Errorf("--session-time %v: want > 0", o.SessionTime)
	}
	if o.Workers < 1 {
		return fmt.Errorf("--workers %d: want at least 1", o.Workers)
	}
	if o.OpenRate < 0 || math.IsNaN(o.OpenRate) || math.IsInf(o.OpenRate, 0) {
		return fmt.Errorf("--open-rate %v: want a number of sessions per second, or 0", o.OpenRate)
	}
	if o.Rounds < 1 {
		return fmt.Errorf("--rounds %d: want at least 1", o.Rounds)
	}
	if o.Scenario == Failover && len(o.PIDs) == 0 {
		return errors.New("--scenario failover needs --pids member=PID,member=PID")
	}
	if o.Lock == "" {
		return errors.New("--lock: empty")
	}
	return nil
}

// ParsePIDs parses "n1=123,n2=456".
func ParsePIDs(s string) (map[string]int, error) {
	m := map[string]int{}
	for _, part := range splitList(s) {
		id, p, ok := strings.Cut(part, "=")
		if !ok || id == "" {
			return nil, fmt.Errorf("--pids: %q is not member=PID", part)
		}
		pid, err := strconv.Atoi(p)
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("--pids: %q: bad PID", part)
		}
		if _, dup := m[id]; dup {
			return nil, fmt.Errorf("--pids: member %q twice", id)
		}
		m[id] = pid
	}
	return m, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
