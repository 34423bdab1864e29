package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/raftlock/raftlock/cmd/raftlock-bench/internal/bench"
)

// driverCommands are --driver's built-in programs, relative to the
// repository's root (run from there, or give --driver-cmd).
var driverCommands = map[string]string{
	"python": "python3 clients/python/bench/raftlock_bench.py",
	"java":   "clients/java/bench-driver",
}

// newDriver returns the driver of --driver name (--driver-cmd overriding
// its program), nil for "go" (the clients run in this process).
func newDriver(name, cmd string) (*bench.Driver, error) {
	if name == "go" || name == "" {
		if cmd != "" {
			return nil, fmt.Errorf("--driver-cmd needs --driver NAME (not go)")
		}
		return nil, nil
	}
	if cmd == "" {
		cmd = driverCommands[name]
	}
	if cmd == "" {
		return nil, fmt.Errorf("--driver %q: want go, python or java, or give the program with --driver-cmd", name)
	}
	return &bench.Driver{Name: name, Argv: strings.Fields(cmd)}, nil
}

var (
	_ bench.ExternalSystem   = (*system)(nil)
	_ bench.KeepAliveCounter = (*system)(nil)
)

// Driver implements bench.ExternalSystem.
func (s *system) Driver() *bench.Driver { return s.driver }

// Addrs implements bench.ExternalSystem.
func (s *system) Addrs() []string { return s.addrs }

// KeepAlivesServed implements bench.KeepAliveCounter: the sum of every
// node's raftlock_keepalives_total (each counts those it served as the
// leader).
func (s *system) KeepAlivesServed(ctx context.Context) (int64, error) {
	var sum int64
	for _, a := range s.addrs {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+a+"/metrics", nil)
		if err != nil {
			return 0, fmt.Errorf("metrics of %s: %w", a, err)
		}
		resp, err := s.hc.Do(req)
		if err != nil {
			return 0, fmt.Errorf("metrics of %s: %w", a, err)
		}
		v, err := counterOf(resp, "raftlock_keepalives_total")
		resp.Body.Close()
		if err != nil {
			return 0, fmt.Errorf("metrics of %s: %w", a, err)
		}
		sum += v
	}
	return sum, nil
}

// counterOf reads one counter from a Prometheus text exposition.
func counterOf(resp *http.Response, name string) (int64, error) {
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), name+" ")
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return 0, fmt.Errorf("%s %q: %w", name, v, err)
		}
		return int64(f), nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no %s", name)
}
