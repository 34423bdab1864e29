package api

import (
	"errors"
	"testing"
	"time"
)

// A duration outside [min, max] is an invalid_argument error naming the
// setting, the value and the range, in the same form whichever bound it
// misses; the bounds themselves are accepted.
func TestCheckDurationRefusesOutOfRangeInOneForm(t *testing.T) {
	const min, max = time.Second, time.Minute
	for _, tc := range []struct {
		d    time.Duration
		want string // "" = accepted
	}{
		{-time.Second, "--x -1s out of range [1s, 1m0s]"},
		{0, "--x 0s out of range [1s, 1m0s]"},
		{min - 1, "--x 999.999999ms out of range [1s, 1m0s]"},
		{min, ""},
		{30 * time.Second, ""},
		{max, ""},
		{max + 1, "--x 1m0.000000001s out of range [1s, 1m0s]"},
		{time.Hour, "--x 1h0m0s out of range [1s, 1m0s]"},
	} {
		err := CheckDuration("--x", tc.d, min, max)
		checkRefusal(t, "CheckDuration", tc.d, err, tc.want)
	}
}

// With no upper bound (Unbounded), the range prints as [min, ∞) and every
// duration from min up is accepted.
func TestCheckDurationUnboundedPrintsOpenRange(t *testing.T) {
	checkRefusal(t, "CheckNonNegative", -time.Nanosecond, CheckNonNegative("--timeout", -time.Nanosecond),
		"--timeout -1ns out of range [0s, ∞)")
	for _, d := range []time.Duration{0, time.Nanosecond, 1000 * time.Hour, Unbounded} {
		checkRefusal(t, "CheckNonNegative", d, CheckNonNegative("--timeout", d), "")
	}
}

// The named helpers carry the contract's ranges: TTL [MinTTL, MaxTTL] (zero
// refused), lock-delay [0, MaxLockDelay], wait [0, MaxWait], watch wait
// [0, MaxWatchWait] (zero meaning none or try once where it is accepted).
func TestNamedDurationCheckersUseTheContractRanges(t *testing.T) {
	for _, tc := range []struct {
		name     string
		check    func(string, time.Duration) error
		min, max time.Duration
	}{
		{"CheckTTL", CheckTTL, MinTTL, MaxTTL},
		{"CheckLockDelay", CheckLockDelay, 0, MaxLockDelay},
		{"CheckWait", CheckWait, 0, MaxWait},
		{"CheckWatchWait", CheckWatchWait, 0, MaxWatchWait},
	} {
		rng := "[" + tc.min.String() + ", " + tc.max.String() + "]"
		refused := func(d time.Duration) string { return "f " + d.String() + " out of range " + rng }
		cases := map[time.Duration]string{
			-time.Second:              refused(-time.Second),
			tc.min:                    "",
			tc.max:                    "",
			tc.max + time.Millisecond: refused(tc.max + time.Millisecond),
			tc.min - time.Millisecond: refused(tc.min - time.Millisecond),
		}
		if tc.min > 0 {
			cases[0] = refused(0)
		}
		for d, want := range cases {
			checkRefusal(t, tc.name, d, tc.check("f", d), want)
		}
	}
}

// checkRefusal asserts err is nil when want is empty, and otherwise an
// invalid_argument *Error whose message is want.
func checkRefusal(t *testing.T, name string, d time.Duration, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Errorf("%s(%v) = %v, want accepted", name, d, err)
		}
		return
	}
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("%s(%v) = %#v, want an invalid_argument *Error", name, d, err)
		return
	}
	if e.Message != want {
		t.Errorf("%s(%v) message %q, want %q", name, d, e.Message, want)
	}
}
