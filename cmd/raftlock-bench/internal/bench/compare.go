package bench

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

// ReadResults reads JSON result lines (as printed with --json); other lines
// are skipped.
func ReadResults(r io.Reader) ([]Result, error) {
	var out []Result
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var res Result
		if err := json.Unmarshal([]byte(line), &res); err != nil {
			return nil, fmt.Errorf("result line %q: %w", line, err)
		}
		out = append(out, res)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	return out, nil
}

// row is one line of the comparison table.
type row struct {
	what string
	get  func(Result) (float64, bool)
	// better is the row's direction: higherBetter (throughput),
	// lowerBetter (latency, CPU, memory, expiries) or neither (a load
	// figure such as keepalives/s, set by the scenario, not by the system).
	better direction
}

// direction says which value of a row is the better one.
type direction int

// Row directions.
const (
	neither direction = iota
	higherBetter
	lowerBetter
)

func rate(r Result) (float64, bool) { return r.Rate, true }
func p50(r Result) (float64, bool)  { return r.P50ms, true }
func p99(r Result) (float64, bool)  { return r.P99ms, true }
func metric(name string) func(Result) (float64, bool) {
	return func(r Result) (float64, bool) { v, ok := r.Metrics[name]; return v, ok }
}

// rowsOf returns the table rows of a scenario run.
func rowsOf(r Result) []row {
	switch r.Scenario {
	case Uncontended, Contended:
		name := fmt.Sprintf("%s, %d client", r.Scenario, r.Clients)
		if r.Clients != 1 {
			name += "s"
		}
		return []row{
			{name + ": " + r.Unit, rate, higherBetter},
			{name + ": p50 ms", p50, lowerBetter},
			{name + ": p99 ms", p99, lowerBetter},
			{name + ": leader CPU %", metric(MetricLeaderCPU), lowerBetter},
			{name + ": client CPU µs/op", metric(MetricClientCPUPerOp), lowerBetter},
			{name + ": servers CPU µs/op", metric(MetricServersCPUPerOp), lowerBetter},
		}
	case Sessions:
		name := fmt.Sprintf("sessions, %.0f", r.Metrics[MetricSessions])
		return []row{
			{name + ": spurious expiries", metric(MetricSpurious), lowerBetter},
			{name + ": client-side lapses", metric(MetricLapsed), lowerBetter},
			{name + ": keepalives/s", metric(MetricKeepAlivesPerS), neither},
			{name + ": leader CPU %", metric(MetricLeaderCPU), lowerBetter},
			{name + ": bytes/session", metric(MetricBytesPerSession), lowerBetter},
			{name + ": bytes/held lock", metric(MetricBytesPerLock), lowerBetter},
			{name + ": opens/s", rate, higherBetter},
			{name + ": open p99 ms", p99, lowerBetter},
			{name + ": leader CPU µs/keepalive", metric(MetricLeaderCPUPerKeepAlive), lowerBetter},
		}
	case Ceiling:
		return []row{{fmt.Sprintf("in-process ceiling, %d clients: %s", r.Clients, r.Unit), rate, neither}}
	case Failover:
		name := fmt.Sprintf("failover, %d rounds, %d clients", len(r.FailoverMs), r.Clients)
		return []row{
			{name + ": mean ms to next grant", metric(MetricFailoverMeanMs), lowerBetter},
			{name + ": p50 ms to next grant", metric(MetricFailoverP50Ms), lowerBetter},
			{name + ": max ms", metric(MetricFailoverMaxMs), lowerBetter},
			{name + ": mean ms to a new leader named", metric(MetricNewLeaderMeanMs), lowerBetter},
			{name + ": pairs/s", rate, higherBetter},
		}
	}
	return nil
}

// scenarioRank orders the scenarios in the table as (a) to (d).
func scenarioRank(s string) int {
	return slices.Index([]string{Uncontended, Ceiling, Contended, Sessions, Failover}, s)
}

// key identifies the runs of the two systems that are compared.
func key(r Result) string { return fmt.Sprintf("%s/%d", r.Scenario, r.Clients) }

// Table writes the comparison of base (e.g. etcd) and cand (e.g.
// raftlock) results: one row per figure with both values and cand/base.
// Runs are matched by scenario and client count, and shown in the order
// (a) to (d), fewer clients first.
func Table(w io.Writer, base, cand []Result) error {
	byKey := map[string]Result{}
	baseName, candName := "baseline", "candidate"
	for _, b := range base {
		byKey[key(b)] = b
		baseName = b.System
	}
	for _, c := range cand {
		candName = c.System
	}
	rows := [][4]string{{"scenario", baseName, candName, candName + "/" + baseName}}
	cand = slices.Clone(cand)
	slices.SortStableFunc(cand, func(a, b Result) int {
		return cmp.Or(cmp.Compare(scenarioRank(a.Scenario), scenarioRank(b.Scenario)), cmp.Compare(a.Clients, b.Clients))
	})
	for _, c := range cand {
		b, ok := byKey[key(c)]
		for _, rw := range rowsOf(c) {
			cv, cok := rw.get(c)
			var bv float64
			bok := false
			if ok {
				bv, bok = rw.get(b)
			}
			rows = append(rows, [4]string{rw.what, cell(bv, bok), cell(cv, cok), ratio(cv, cok, bv, bok)})
		}
	}
	var width [4]int
	for _, r := range rows {
		for i, s := range r {
			width[i] = max(width[i], len(s))
		}
	}
	for _, r := range rows {
		if _, err := fmt.Fprintf(w, "%-*s  %*s  %*s  %*s\n", width[0], r[0], width[1], r[1], width[2], r[2], width[3], r[3]); err != nil {
			return fmt.Errorf("write table: %w", err)
		}
	}
	return nil
}

func cell(v float64, ok bool) string {
	if !ok {
		return "-"
	}
	return formatMetric(v)
}

func ratio(c float64, cok bool, b float64, bok bool) string {
	if !cok || !bok || b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", c/b)
}
