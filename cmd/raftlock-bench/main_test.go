package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/cmd/raftlock-bench/internal/bench"
)

func TestParse(t *testing.T) {
	c, err := command.Parse([]string{"--addr", "a:1, b:2", "--scenario", "c", "--sessions", "10", "--held-locks", "50",
		"--pids", "n1=10,n2=20", "--route", "given", "--ttl", "3s"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.Addrs, ",") != "a:1,b:2" || c.Scenario != bench.Sessions || c.SessionCount != 10 ||
		c.HeldLocks != 10 || c.PIDs["n2"] != 20 || c.Leader || c.TTL != 3*time.Second {
		t.Fatalf("parsed %+v", c)
	}
	c, err = command.Parse(nil, &bytes.Buffer{})
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
		if _, err := command.Parse(bad, &bytes.Buffer{}); err == nil {
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
