package node

import (
	"bytes"
	"testing"
	"time"

	gometrics "github.com/hashicorp/go-metrics/compat"
	gmprom "github.com/hashicorp/go-metrics/compat/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// sinkCalls feeds a sink what hashicorp/raft reports: samples, counters
// and gauges, with and without labels, names that flatten ('.', '-', '/',
// ' ', '='), and a key reported both ways.
func sinkCalls(s gometrics.MetricSink) {
	peer := []gometrics.Label{{Name: "peer_id", Value: "n2"}}
	for i := range 700 { // past a summary's buffer of 500
		v := float32(i%97) / 7
		s.AddSample([]string{"raft", "commitTime"}, v)
		s.AddSampleWithLabels([]string{"raft", "replication", "appendEntries", "rpc"}, v, peer)
		s.AddSample([]string{"raft", "replication", "appendEntries", "rpc", "n-2"}, v)
		s.IncrCounter([]string{"raft", "apply"}, 1)
		s.IncrCounterWithLabels([]string{"raft", "replication", "appendEntries", "logs"}, 2, peer)
		s.SetGauge([]string{"raft", "commitNumLogs"}, float32(i))
	}
	s.SetGaugeWithLabels([]string{"raft/x y=z", "peers"}, 3, peer)
	s.IncrCounter([]string{"raft", "state", "leader"}, 1)
	s.EmitKey([]string{"raft", "ignored"}, 1)
}

// gatherText is the Prometheus text of what c collects.
func gatherText(t *testing.T, c prometheus.Collector) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&buf, mf); err != nil {
			t.Fatal(err)
		}
	}
	return buf.String()
}

// TestRaftSinkServesWhatTheGoMetricsPrometheusSinkServes pins the cheaper
// sink to go-metrics' Prometheus sink: the same calls give the same
// /metrics text (names, help, labels, types, counts, sums, quantiles).
func TestRaftSinkServesWhatTheGoMetricsPrometheusSinkServes(t *testing.T) {
	ref, err := gmprom.NewPrometheusSinkFrom(gmprom.PrometheusOpts{Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	ours := newRaftMetricsSink()
	sinkCalls(ref)
	sinkCalls(ours)
	want, got := gatherText(t, ref), gatherText(t, ours)
	if got != want {
		t.Fatalf("raft sink serves\n%s\ngo-metrics' Prometheus sink serves\n%s", got, want)
	}
	if want == "" {
		t.Fatal("nothing gathered")
	}
}

// TestRaftSinkDropsSeriesNotUpdatedForAMinute pins the expiry of
// go-metrics' Prometheus sink: a series not written for 60 s is no longer
// served, one written since is.
func TestRaftSinkDropsSeriesNotUpdatedForAMinute(t *testing.T) {
	now := time.Unix(1000, 0)
	s := newRaftMetricsSink()
	s.now = func() time.Time { return now }
	s.AddSample([]string{"raft", "old"}, 1)
	now = now.Add(30 * time.Second)
	s.AddSample([]string{"raft", "new"}, 1)
	now = now.Add(31 * time.Second)
	text := gatherText(t, s)
	if bytes.Contains([]byte(text), []byte("raft_old")) || !bytes.Contains([]byte(text), []byte("raft_new")) {
		t.Fatalf("after 61 s serves\n%s\nwant raft_new only", text)
	}
}

// BenchmarkRaftSinkSample is one labelled sample, as raft reports several
// per log entry: the cheaper sink and go-metrics' Prometheus sink.
func BenchmarkRaftSinkSample(b *testing.B) {
	ref, err := gmprom.NewPrometheusSinkFrom(gmprom.PrometheusOpts{Registerer: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	peer := []gometrics.Label{{Name: "peer_id", Value: "n2"}}
	for _, c := range []struct {
		name string
		sink gometrics.MetricSink
	}{{"raftMetricsSink", newRaftMetricsSink()}, {"gometrics-prometheus", ref}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				c.sink.AddSampleWithLabels([]string{"raft", "replication", "appendEntries", "rpc"}, float32(i%100), peer)
			}
		})
	}
}
