package bench

import (
	"slices"
	"strings"
	"testing"
)

// TestVerdictStatesAFactorOfAtLeastOne: the candidate against the best
// peer reads "N× better" or "N× worse" with N >= 1 whichever way the row
// points; equal values (or a factor that rounds to 1.00) read "same", and
// a zero value gives the word without a factor.
func TestVerdictStatesAFactorOfAtLeastOne(t *testing.T) {
	for _, c := range []struct {
		d    direction
		c, b float64
		want string
	}{
		{higherBetter, 300, 100, "3.00× better"},
		{higherBetter, 100, 300, "3.00× worse"},
		{lowerBetter, 100, 300, "3.00× better"},
		{lowerBetter, 300, 100, "3.00× worse"},
		{lowerBetter, 5, 5, "same"},
		{higherBetter, 1000, 1001, "same"},
		{lowerBetter, 0, 2, "better"},
		{lowerBetter, 2, 0, "worse"},
	} {
		if got := verdict(c.d, c.c, c.b); got != c.want {
			t.Errorf("verdict(%v, %v, %v) = %q, want %q", c.d, c.c, c.b, got, c.want)
		}
	}
	if i := bestPeer(neither, []float64{1, 2}, []bool{true, true}); i != -1 {
		t.Errorf("a row without direction has best peer %d", i)
	}
	if i := bestPeer(lowerBetter, []float64{1, 2}, []bool{false, true}); i != 1 {
		t.Errorf("best of the peers with a value: %d, want 1", i)
	}
}

// The in-process ceiling's line (raftlock's alone) is a row of its own
// after the uncontended runs, n/a for the peers and without a best peer.
func TestCeilingRowFollowsTheUncontendedRuns(t *testing.T) {
	peer := Set{Name: "etcd", Results: []Result{{Scenario: Uncontended, Clients: 64, Rate: 100, Unit: "pairs/s"}}}
	cand := Set{Name: "raftlock", Results: []Result{
		{Scenario: Contended, Clients: 16, Rate: 50, Unit: "handoffs/s"},
		{Scenario: Ceiling, Clients: 64, Rate: 9000, Unit: "pairs/s"},
		{Scenario: Uncontended, Clients: 64, Rate: 200, Unit: "pairs/s"},
	}}
	var out strings.Builder
	if err := TablePeers(&out, []Set{peer}, cand); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	at := func(prefix string) int {
		for i, l := range lines {
			if strings.HasPrefix(l, prefix) {
				return i
			}
		}
		t.Fatalf("no row %q in\n%s", prefix, out.String())
		return -1
	}
	ceiling := at("in-process ceiling, 64 clients: pairs/s")
	if !(at("uncontended, 64 clients: pairs/s") < ceiling && ceiling < at("contended, 16 clients")) {
		t.Fatalf("the ceiling row is not between (a) and (b):\n%s", out.String())
	}
	if f := strings.Fields(lines[ceiling]); !slices.Contains(f, "9000") || !slices.Contains(f, "n/a") {
		t.Fatalf("ceiling row %q", lines[ceiling])
	}
}
