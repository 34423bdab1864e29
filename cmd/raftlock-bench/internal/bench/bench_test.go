package bench

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestPercentiles(t *testing.T) {
	var l Latencies
	if p := l.Percentiles(0.5); p[0] != 0 {
		t.Fatalf("empty: %v", p)
	}
	for i := 100; i >= 1; i-- {
		l.Add(time.Duration(i) * time.Millisecond)
	}
	var m Latencies
	m.Merge(&l)
	p := m.Percentiles(0.5, 0.99, 1)
	if p[0] != 50*time.Millisecond || p[1] != 99*time.Millisecond || p[2] != 100*time.Millisecond {
		t.Fatalf("percentiles %v", p)
	}
}

func TestOptionsValidate(t *testing.T) {
	o := Options{Addrs: []string{"x:1"}, Scenario: "b", Clients: 1, Duration: time.Second, TTL: time.Second,
		SessionCount: 5, HeldLocks: -1, SessionTime: time.Second, Workers: 1, Rounds: 1, Lock: "l"}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if o.Scenario != Contended || o.HeldLocks != 5 {
		t.Fatalf("validated %+v", o)
	}
	o.Scenario = "d"
	if err := o.Validate(); err == nil {
		t.Fatal("failover without --pids: no error")
	}
	m, err := ParsePIDs(" n1=1, n2=2 ")
	if err != nil || len(m) != 2 || m["n2"] != 2 {
		t.Fatalf("ParsePIDs: %v %v", m, err)
	}
}

func TestResultLine(t *testing.T) {
	r := Result{System: "etcd", Scenario: Uncontended, Clients: 16, Rate: 1315.04, Unit: "pairs/s", P50ms: 2.5, P99ms: 9.25, Ops: 13150}
	r.SetMetric(MetricLeaderCPU, 55.5)
	r.Notes = []string{"note"}
	line := r.Line()
	for _, want := range []string{"etcd     uncontended clients 16", "1315.0 pairs/s", "p50     2.50ms", "leader_cpu_pct=55.5", "[note]"} {
		if !strings.Contains(line, want) {
			t.Errorf("line %q lacks %q", line, want)
		}
	}
	var out, errOut bytes.Buffer
	if err := r.Print(&out, &errOut, true); err != nil {
		t.Fatal(err)
	}
	rs, err := ReadResults(&out)
	if err != nil || len(rs) != 1 || rs[0].Rate != r.Rate || rs[0].Metrics[MetricLeaderCPU] != 55.5 {
		t.Fatalf("round trip: %+v %v", rs, err)
	}
	if !strings.Contains(errOut.String(), "pairs/s") {
		t.Fatalf("text line not on stderr: %q", errOut.String())
	}
}

func TestForEach(t *testing.T) {
	var sum atomic.Int64
	failed, err := ForEach(context.Background(), 100, 7, func(_ context.Context, i int) error {
		sum.Add(int64(i))
		if i%10 == 0 {
			return errors.New("tenth")
		}
		return nil
	})
	if sum.Load() != 4950 || failed != 10 || err == nil {
		t.Fatalf("sum %d failed %d err %v", sum.Load(), failed, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ForEach(ctx, 5, 2, func(context.Context, int) error { return nil }); err == nil {
		t.Fatal("cancelled: no error")
	}
}

// Paced, call i starts no earlier than i/rate after the start (a lower
// bound, which sleeping guarantees whatever the load), every call is made
// once, and an invalid rate is refused.
func TestForEachPacedStartsCallINoEarlierThanIOverRate(t *testing.T) {
	const n, rate = 20, 400.0
	var starts [n]time.Duration
	var calls atomic.Int64
	begin := time.Now()
	failed, err := ForEachPaced(context.Background(), n, 4, rate, func(_ context.Context, i int) error {
		starts[i] = time.Since(begin)
		calls.Add(1)
		return nil
	})
	if failed != 0 || err != nil || calls.Load() != n {
		t.Fatalf("failed %d err %v calls %d", failed, err, calls.Load())
	}
	for i, s := range starts {
		if due := time.Duration(float64(i) * float64(time.Second) / rate); s < due {
			t.Errorf("call %d started %v in, before %v", i, s, due)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ForEachPaced(ctx, 5, 2, 1, func(context.Context, int) error { return nil }); err == nil {
		t.Fatal("cancelled: no error")
	}
	o := Options{Addrs: []string{"x:1"}, Scenario: "c", Clients: 1, Duration: time.Second, TTL: time.Second,
		SessionCount: 5, HeldLocks: -1, SessionTime: time.Second, Workers: 1, Rounds: 1, Lock: "l"}
	for _, bad := range []float64{-1, math.NaN(), math.Inf(1)} {
		o.OpenRate = bad
		if err := o.Validate(); err == nil {
			t.Errorf("--open-rate %v: no error", bad)
		}
	}
}

func TestProcProbes(t *testing.T) {
	pid := os.Getpid()
	if _, err := ProcCPU(pid); err != nil {
		t.Fatal(err)
	}
	if rss, err := ProcRSS(pid); err != nil || rss <= 0 {
		t.Fatalf("rss %d %v", rss, err)
	}
	p := StartCPUProbe(pid, map[string]int{"n1": pid})
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
	}
	var r Result
	p.Finish(&r)
	for _, k := range []string{MetricLeaderCPU, MetricServersCPU, MetricClientCPU, MetricMachineBusy} {
		if _, ok := r.Metrics[k]; !ok {
			t.Errorf("no %s in %v", k, r.Metrics)
		}
	}
	if _, err := ProcCPU(1 << 30); err == nil {
		t.Error("no error for a missing process")
	}
}

func TestRestart(t *testing.T) {
	pid, err := Restart(context.Background(), "echo starting {id}; echo 4242", "n2")
	if err != nil || pid != 4242 {
		t.Fatalf("Restart: %d %v", pid, err)
	}
	if _, err := Restart(context.Background(), "echo no-pid", "n2"); err == nil {
		t.Fatal("no PID: no error")
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{1556, 985, 1910, 1248, 912}, 1248},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		in := append([]float64(nil), c.in...)
		if got := median(in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
		if !slices.Equal(in, c.in) {
			t.Errorf("median reordered its input: %v", in)
		}
	}
}
