package bench

import "testing"

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
