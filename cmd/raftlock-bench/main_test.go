package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/cmd/raftlock-bench/internal/bench"
)

func TestParse(t *testing.T) {
	c, err := newCommand().Parse([]string{"--addr", "a:1, b:2", "--scenario", "c", "--sessions", "10", "--held-locks", "50",
		"--pids", "n1=10,n2=20", "--route", "given", "--ttl", "3s"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.Addrs, ",") != "a:1,b:2" || c.Scenario != bench.Sessions || c.SessionCount != 10 ||
		c.HeldLocks != 10 || c.PIDs["n2"] != 20 || c.Leader || c.TTL != 3*time.Second {
		t.Fatalf("parsed %+v", c)
	}
	c, err = newCommand().Parse(nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Scenario != bench.Uncontended || c.Clients != 1 || !c.Leader || c.Addrs[0] != "127.0.0.1:7001" {
		t.Fatalf("defaults %+v", c)
	}
	for _, bad := range [][]string{
		{"--scenario", "x"},
		{"--clients", "0"},
		{"--addr", ""},
		{"--ttl", "10ms"},
		{"--scenario", "failover"}, // needs --pids
		{"--pids", "n1=x"},
		{"--pids", "n1=1,n1=2"},
		{"--route", "sideways"},
		{"extra"},
	} {
		if _, err := newCommand().Parse(bad, &bytes.Buffer{}); err == nil {
			t.Errorf("parse %q: no error", bad)
		}
	}
}

// runJSON runs the benchmark with args and --json and decodes its result.
func runJSON(t *testing.T, args ...string) bench.Result {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := run(append(args, "--json"), &out, &errOut); code != 0 {
		t.Fatalf("run %q: exit %d\n%s", args, code, errOut.String())
	}
	t.Logf("%s", strings.TrimSpace(errOut.String()))
	var r bench.Result
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("result %q: %v", out.String(), err)
	}
	return r
}

// TestTinyRuns runs scenarios a, b and c briefly against three raftlockd
// processes.
func TestTinyRuns(t *testing.T) {
	cl := startCluster(t)
	common := []string{"--addr", cl.AddrList(), "--pids", cl.PIDList(), "--duration", "1s", "--warmup", "0s"}

	a := runJSON(t, append(common, "--scenario", "a", "--clients", "2")...)
	if a.Scenario != bench.Uncontended || a.Clients != 2 || a.Ops == 0 || a.Errors != 0 || a.Unit != "pairs/s" ||
		a.P50ms <= 0 || a.P99ms < a.P50ms {
		t.Errorf("uncontended: %+v", a)
	}
	if _, ok := a.Metrics[bench.MetricLeaderCPU]; !ok {
		t.Errorf("uncontended: no leader CPU: %+v", a.Metrics)
	}

	b := runJSON(t, append(common, "--scenario", "b", "--clients", "2")...)
	if b.Scenario != bench.Contended || b.Ops == 0 || b.Errors != 0 || b.Unit != "handoffs/s" {
		t.Errorf("contended: %+v", b)
	}

	c := runJSON(t, append(common, "--scenario", "c", "--sessions", "20", "--held-locks", "5",
		"--session-time", "1500ms", "--ttl", "1s", "--workers", "4")...)
	if c.Ops != 20 || c.Metrics[bench.MetricSpurious] != 0 || c.Metrics[bench.MetricHeldLocks] != 5 ||
		c.Metrics[bench.MetricKeepAlivesPerS] <= 0 {
		t.Errorf("sessions: %+v", c)
	}
	// Per-session bytes need the RSS to grow, which 20 sessions need not do.
	if _, ok := c.Metrics[bench.MetricLeaderRSSMB]; !ok {
		t.Errorf("sessions: no memory figure: %+v", c.Metrics)
	}
}

// TestFailoverProcesses kills the leader of three raftlockd processes
// once under load and restarts it with --restart-cmd.
func TestFailoverProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs real processes")
	}
	c := startCluster(t)
	r := runJSON(t, "--addr", c.AddrList(), "--pids", c.PIDList(), "--scenario", "d",
		"--clients", "2", "--rounds", "1", "--settle", "500ms", "--restart-cmd", c.RestartScript()+" {id}")
	if len(r.FailoverMs) != 1 || r.FailoverMs[0] <= 0 || r.Ops == 0 {
		t.Fatalf("failover: %+v", r)
	}
}

func TestCompare(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, rs ...bench.Result) string {
		var b bytes.Buffer
		b.WriteString("not json\n")
		for _, r := range rs {
			data, _ := json.Marshal(r)
			b.Write(append(data, '\n'))
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	e := write("etcd.jsonl", bench.Result{System: "etcd", Scenario: bench.Uncontended, Clients: 16, Rate: 1000, Unit: "pairs/s", P50ms: 10})
	r := write("raftlock.jsonl", bench.Result{System: "raftlock", Scenario: bench.Uncontended, Clients: 16, Rate: 1500, Unit: "pairs/s", P50ms: 5})
	var out, errOut bytes.Buffer
	if code := run([]string{"compare", e, r}, &out, &errOut); code != 0 {
		t.Fatalf("compare: exit %d: %s", code, errOut.String())
	}
	table := out.String()
	for _, want := range []string{"raftlock/etcd", "uncontended, 16 clients: pairs/s", "1000", "1500", "1.50", "0.50"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}

// compareRows runs compare on one file per set of results and returns the
// table's rows by their first column, each split into its columns.
func compareRows(t *testing.T, sets ...[]bench.Result) map[string][]string {
	t.Helper()
	dir := t.TempDir()
	var files []string
	for i, rs := range sets {
		var b bytes.Buffer
		for _, r := range rs {
			data, _ := json.Marshal(r)
			b.Write(append(data, '\n'))
		}
		p := filepath.Join(dir, fmt.Sprintf("set%d.jsonl", i))
		if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	var out, errOut bytes.Buffer
	if code := run(append([]string{"compare"}, files...), &out, &errOut); code != 0 {
		t.Fatalf("compare: exit %d: %s", code, errOut.String())
	}
	t.Logf("\n%s", out.String())
	rows := map[string][]string{}
	for _, line := range strings.Split(strings.TrimRight(out.String(), "\n"), "\n") {
		cols := regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(line), -1)
		rows[cols[0]] = cols
	}
	return rows
}

// TestCompareBestPeerIsChosenByTheRowsDirection: with three files the
// table has a column per system; per row the best peer is the one with
// the higher throughput or the lower latency (CPU, failover time), and
// the candidate is stated against it as "N× better/worse" beside the
// plain quotient; a peer without a run of the scenario reads n/a and the
// best peer is then chosen among the others.
func TestCompareBestPeerIsChosenByTheRowsDirection(t *testing.T) {
	unc := func(sys string, rate, p50, cpu float64) bench.Result {
		r := bench.Result{System: sys, Scenario: bench.Uncontended, Clients: 16, Rate: rate, Unit: "pairs/s", P50ms: p50, P99ms: 4 * p50}
		r.SetMetric(bench.MetricLeaderCPU, cpu)
		return r
	}
	fail := func(sys string, mean float64) bench.Result {
		r := bench.Result{System: sys, Scenario: bench.Failover, Clients: 16, Rate: 100, Unit: "pairs/s", FailoverMs: []float64{mean}}
		r.SetMetric(bench.MetricFailoverMeanMs, mean)
		return r
	}
	rows := compareRows(t,
		[]bench.Result{unc("etcd", 1000, 10, 80), fail("etcd", 1200)},
		[]bench.Result{unc("zookeeper", 800, 5, 90)},
		[]bench.Result{unc("raftlock", 1500, 8, 80), fail("raftlock", 600)},
	)
	want := map[string][]string{
		"scenario": {"scenario", "etcd", "zookeeper", "raftlock", "best peer", "raftlock/best", "raftlock vs best"},
		// Throughput: the higher is best (etcd's 1000, not ZooKeeper's 800).
		"uncontended, 16 clients: pairs/s": {"uncontended, 16 clients: pairs/s", "1000", "800", "1500", "etcd", "1.50", "1.50× better"},
		// Latency: the lower is best (ZooKeeper's 5 ms, not etcd's 10).
		"uncontended, 16 clients: p50 ms": {"uncontended, 16 clients: p50 ms", "10", "5", "8", "zookeeper", "1.60", "1.60× worse"},
		// CPU: the lower is best; a tie is "same".
		"uncontended, 16 clients: leader CPU %": {"uncontended, 16 clients: leader CPU %", "80", "90", "80", "etcd", "1.00", "same"},
		// ZooKeeper has no failover run: n/a, and etcd is the best peer.
		"failover, 1 rounds, 16 clients: mean ms to next grant": {"failover, 1 rounds, 16 clients: mean ms to next grant", "1200", "n/a", "600", "etcd", "0.50", "2.00× better"},
	}
	for name, w := range want {
		if got := rows[name]; !slices.Equal(got, w) {
			t.Errorf("row %q:\n got %q\nwant %q", name, got, w)
		}
	}
}
