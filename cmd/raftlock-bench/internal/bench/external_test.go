package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// fakeExt is an ExternalSystem whose driver is a shell script.
type fakeExt struct{ d *Driver }

func (f fakeExt) Name() string { return "raftlock-fake" }
func (f fakeExt) NewWorker(context.Context, int, string) (Worker, error) {
	return nil, errors.New("clients run in the driver")
}
func (f fakeExt) Leader(context.Context) (string, uint64, error) {
	return "", 0, errors.New("no cluster")
}
func (f fakeExt) WaitMember(context.Context, string) error { return nil }
func (f fakeExt) NewSessionLoad(o *Options, p string) SessionLoad {
	return NewDriverSessions(f, o, p)
}
func (f fakeExt) Driver() *Driver { return f.d }
func (f fakeExt) Addrs() []string { return []string{"127.0.0.1:1"} }

// A driver that checks its flags, counts only between measure and stop,
// and answers stats as the protocol says.
const fakeDriver = `#!/bin/sh
case " $* " in *" --addr 127.0.0.1:1 "*) ;; *) echo "bad flags: $*" >&2; exit 3;; esac
case " $* " in
*" --mode pairs "*)
  echo '{"event":"ready"}'
  while read -r cmd; do
    case $cmd in
    measure) measured=1 ;;
    stop) [ "$measured" = 1 ] && echo '{"event":"result","pairs":3,"errors":1,"lat_us":[1000,2000,3000]}' ;;
    esac
  done ;;
*" --mode sessions "*)
  echo '{"event":"ready","lat_us":[500,700],"errors":0}'
  while read -r cmd n; do
    case $cmd in
    hold) echo '{"event":"held"}' ;;
    stats) echo '{"event":"stats","expired":1,"jeopardy":2}' ;;
    esac
  done ;;
esac
`

func writeDriver(t *testing.T) *Driver {
	t.Helper()
	p := filepath.Join(t.TempDir(), "driver")
	if err := os.WriteFile(p, []byte(fakeDriver), 0o755); err != nil {
		t.Fatal(err)
	}
	return &Driver{Name: "fake", Argv: []string{p}}
}

func TestDriverPairsCountFromMeasureToStop(t *testing.T) {
	o := &Options{Scenario: Uncontended, Clients: 2, Duration: 50 * time.Millisecond, TTL: 15 * time.Second, Lock: "t"}
	r, err := Run(context.Background(), fakeExt{writeDriver(t)}, o)
	if err != nil {
		t.Fatal(err)
	}
	if r.System != "raftlock-fake" || r.Ops != 3 || r.Errors != 1 || r.P50ms != 2 || r.P99ms != 3 || r.Unit != "pairs/s" {
		t.Fatalf("result %+v", r)
	}
	if _, ok := r.Metrics[MetricClientCPUPerOp]; !ok {
		t.Fatalf("no client CPU per pair: %v", r.Metrics)
	}
}

func TestDriverSessionsReportTheClientsLapses(t *testing.T) {
	o := &Options{Scenario: Sessions, SessionCount: 2, HeldLocks: 2, SessionTime: 50 * time.Millisecond,
		TTL: 15 * time.Second, Workers: 4, Lock: "t"}
	r, err := Run(context.Background(), fakeExt{writeDriver(t)}, o)
	if err != nil {
		t.Fatal(err)
	}
	if r.Ops != 2 || r.Metrics[MetricLapsed] != 3 || r.P50ms != 0.5 {
		t.Fatalf("result %+v", r)
	}
}

func TestDriverFailoverIsRefused(t *testing.T) {
	o := &Options{Scenario: Failover, Clients: 1, Lock: "t"}
	if _, err := Run(context.Background(), fakeExt{writeDriver(t)}, o); err == nil {
		t.Fatal("failover run by a driver: no error")
	}
}

func TestKeepAliveCostTakesTheIdleLeaderOff(t *testing.T) {
	r := Result{}
	r.SetMetric(MetricLeaderCPU, 50)
	r.SetMetric(MetricKeepAlivesPerS, 1000)
	reportKeepAliveCost(&r, 0.1, true)
	if got := r.Metrics[MetricLeaderCPUPerKeepAlive]; got != 400 {
		t.Fatalf("µs per keepalive %v, want 400 ((0.5-0.1) cores / 1000/s)", got)
	}
	r2 := Result{}
	r2.SetMetric(MetricLeaderCPU, 50)
	r2.SetMetric(MetricKeepAlivesPerS, 1000)
	reportKeepAliveCost(&r2, 0, false)
	if got := r2.Metrics[MetricLeaderCPUPerKeepAlive]; got != 500 {
		t.Fatalf("without a baseline %v, want 500", got)
	}
}
