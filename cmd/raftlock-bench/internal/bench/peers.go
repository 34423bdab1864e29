package bench

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// Set is one system's results, named for the table's header.
type Set struct {
	Name    string
	Results []Result
}

// TablePeers writes the comparison of a candidate (raftlock) with its
// peers (etcd, ZooKeeper): one row per figure with every system's value,
// the best peer of the row and the candidate against it. The best peer is
// the one with the higher value in a throughput row and the lower value
// in a latency, CPU, memory or expiry row (rows without a direction, such
// as keepalives/s, have none). "cand/best" is the plain quotient of the
// two values (for a latency row "raftlock p50 / best p50"); the last
// column says it in words, as "N× better" or "N× worse" with N >= 1.
// Runs are matched by scenario and client count and shown in the order
// (a) to (d), fewer clients first; a system without a run of the row's
// scenario reads "n/a", a figure a run did not measure "-".
func TablePeers(w io.Writer, peers []Set, cand Set) error {
	all := append(slices.Clone(peers), cand)
	byKey := make([]map[string]Result, len(all))
	keys := map[string]Result{}
	for i, set := range all {
		byKey[i] = map[string]Result{}
		for _, r := range set.Results {
			byKey[i][key(r)] = r
			if _, ok := keys[key(r)]; !ok || i == len(all)-1 {
				keys[key(r)] = r // the candidate's run names the rows
			}
		}
	}
	refs := slices.SortedFunc(maps.Values(keys), func(a, b Result) int {
		return cmp.Or(cmp.Compare(scenarioRank(a.Scenario), scenarioRank(b.Scenario)), cmp.Compare(a.Clients, b.Clients))
	})

	header := []string{"scenario"}
	for _, set := range all {
		header = append(header, set.Name)
	}
	header = append(header, "best peer", cand.Name+"/best", cand.Name+" vs best")
	rows := [][]string{header}
	for _, ref := range refs {
		k := key(ref)
		for _, rw := range rowsOf(ref) {
			line := []string{rw.what}
			vals := make([]float64, len(all))
			has := make([]bool, len(all))
			for i := range all {
				r, ran := byKey[i][k]
				if !ran {
					line = append(line, "n/a")
					continue
				}
				vals[i], has[i] = rw.get(r)
				line = append(line, cell(vals[i], has[i]))
			}
			best := bestPeer(rw.better, vals[:len(peers)], has[:len(peers)])
			c := len(all) - 1
			if best < 0 || !has[c] {
				line = append(line, "-", "-", "-")
			} else {
				line = append(line, all[best].Name, ratio(vals[c], true, vals[best], true), verdict(rw.better, vals[c], vals[best]))
			}
			rows = append(rows, line)
		}
	}
	return writeAligned(w, rows)
}

// bestPeer returns the index of the best of vals (those with has), by the
// row's direction; -1 if the row has no direction or no value.
func bestPeer(d direction, vals []float64, has []bool) int {
	best := -1
	for i, v := range vals {
		if !has[i] {
			continue
		}
		switch {
		case d == neither:
			return -1
		case best < 0,
			d == higherBetter && v > vals[best],
			d == lowerBetter && v < vals[best]:
			best = i
		}
	}
	return best
}

// verdict says how the candidate's value c compares with the best peer's
// b: "N× better", "N× worse" (N >= 1, two decimals) or "same".
func verdict(d direction, c, b float64) string {
	if c == b {
		return "same"
	}
	better := (d == higherBetter) == (c > b)
	word := "worse"
	if better {
		word = "better"
	}
	lo, hi := min(c, b), max(c, b)
	if lo <= 0 {
		return word
	}
	f := fmt.Sprintf("%.2f", hi/lo)
	if f == "1.00" {
		return "same"
	}
	return f + "× " + word
}

// writeAligned writes rows as columns: the first left-aligned, the others
// right-aligned, two spaces apart.
func writeAligned(w io.Writer, rows [][]string) error {
	var width []int
	for _, r := range rows {
		for i, s := range r {
			if i >= len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], len([]rune(s)))
		}
	}
	for _, r := range rows {
		var b strings.Builder
		for i, s := range r {
			pad := strings.Repeat(" ", width[i]-len([]rune(s)))
			if i == 0 {
				b.WriteString(s + pad)
			} else {
				b.WriteString("  " + pad + s)
			}
		}
		if _, err := fmt.Fprintln(w, b.String()); err != nil {
			return fmt.Errorf("write table: %w", err)
		}
	}
	return nil
}
