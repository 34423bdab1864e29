package api

import (
	"errors"
	"strings"
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

// Resolve fills in a default only for a duration not given: an explicit
// TTL of zero (the wire's "ttl":"0s") is refused in the same form as any
// other TTL out of range, an explicit zero LockDelay is none, and a Go
// caller's zero still takes the default. A resolved request resolves to
// itself.
func TestOpenRequestResolveTakesExplicitDurationsAsGiven(t *testing.T) {
	for _, tc := range []struct {
		name      string
		req       OpenRequest
		ttl, ld   time.Duration
		wantError string
	}{
		{"omitted", OpenRequest{}, DefaultTTL, DefaultLockDelay, ""},
		{"Go NoLockDelay", OpenRequest{LockDelay: NoLockDelay}, DefaultTTL, 0, ""},
		{"explicit zero ttl", OpenRequest{}.Explicit(true, false), 0, 0, "ttl 0s out of range [1s, 5m0s]"},
		{"explicit zero ttl, lock-delay too", OpenRequest{}.Explicit(true, true), 0, 0, "ttl 0s out of range [1s, 5m0s]"},
		{"explicit negative ttl", OpenRequest{TTL: -time.Nanosecond}.Explicit(true, false), 0, 0, "ttl -1ns out of range [1s, 5m0s]"},
		{"ttl too high", OpenRequest{TTL: MaxTTL + 1}, 0, 0, "ttl 5m0.000000001s out of range [1s, 5m0s]"},
		{"explicit zero lock-delay", OpenRequest{TTL: time.Second}.Explicit(true, true), time.Second, 0, ""},
		{"explicit -1ns lock-delay is no sentinel", OpenRequest{LockDelay: NoLockDelay}.Explicit(false, true), 0, 0,
			"lock_delay -1ns out of range [0s, 1m0s]"},
		{"lock-delay too high", OpenRequest{LockDelay: MaxLockDelay + time.Second}.Explicit(false, true), 0, 0,
			"lock_delay 1m1s out of range [0s, 1m0s]"},
	} {
		r := tc.req
		err := r.Resolve()
		if tc.wantError != "" {
			checkRefusal(t, tc.name, 0, err, tc.wantError)
			continue
		}
		if err != nil || r.TTL != tc.ttl || r.LockDelay != tc.ld {
			t.Errorf("%s: Resolve = %v, ttl %v, lock-delay %v; want ttl %v, lock-delay %v", tc.name, err, r.TTL, r.LockDelay, tc.ttl, tc.ld)
			continue
		}
		again := r
		if err := again.Resolve(); err != nil || again != r {
			t.Errorf("%s: resolving %+v again = %+v, %v; want itself", tc.name, r, again, err)
		}
	}
}

// Text the contract checks must be valid UTF-8: lock names, holders,
// session names, session ids and values; two byte strings are never taken
// for one.
func TestTextMustBeValidUTF8(t *testing.T) {
	for what, err := range map[string]error{
		"lock name":    ValidateLockName("inv\xff"),
		"prefix":       CheckPrefix("inv\xff"),
		"holder":       CheckLockRef("a", "s1", "h\xfe"),
		"session":      CheckSessionID("s\xff"),
		"session name": (&OpenRequest{Name: "n\xc3"}).Resolve(),
		"value":        CheckValue("v\xff"),
		"acquire":      (&AcquireRequest{Name: "inv\xff", Session: "s1", Holder: "h"}).Resolve(),
		"release":      ReleaseRequest{Name: "a", Session: "s1", Holder: "h\xff"}.Check(),
	} {
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeInvalidArgument || !strings.Contains(e.Message, "not valid UTF-8") {
			t.Errorf("%s with invalid UTF-8: %v; want invalid_argument, not valid UTF-8", what, err)
		}
	}
	for what, err := range map[string]error{
		"lock name U+FFFD": ValidateLockName("inv\uFFFD"),
		"value newline":    CheckValue("line 1\nline 2 \U0001F600"),
	} {
		if err != nil {
			t.Errorf("%s: %v; want accepted", what, err)
		}
	}
}

// TestLockNamesRefuseBidiControls pins issue 27 item 9: a lock name with a
// bidirectional embedding, override or isolate character (which makes
// "xss/\u202egnp.exe" display as "xss/exe.png") is invalid_argument, in
// an acquire and a release as in a read; other non-ASCII names pass.
func TestLockNamesRefuseBidiControls(t *testing.T) {
	for _, r := range []rune{0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069} {
		name := "xss/" + string(r) + "gnp.exe"
		if err := ValidateLockName(name); CodeOf(err) != CodeInvalidArgument || !strings.Contains(err.Error(), "bidirectional") {
			t.Errorf("%U: %v, want invalid_argument", r, err)
		}
		if err := CheckLockRef(name, "0123456789abcdef0123456789abcdef", "h"); CodeOf(err) != CodeInvalidArgument {
			t.Errorf("%U in an acquire or release: %v, want invalid_argument", r, err)
		}
	}
	for _, name := range []string{"ünïcode/路径", "a\u200fb", "שלום/x", "x\u2065y"} {
		if err := ValidateLockName(name); err != nil {
			t.Errorf("%q: %v", name, err)
		}
	}
}

// TestEveryNameAndIDRefusesBidiControls pins issue 40 item 15: session
// names, holder ids, token names and revocation reasons are shown on the
// status page and in `lock get` as lock names are, so a bidirectional
// control character is invalid_argument in each, naming the field.
func TestEveryNameAndIDRefusesBidiControls(t *testing.T) {
	for _, r := range []rune{0x202A, 0x202E, 0x2066, 0x2069} {
		text := "ops/" + string(r) + "gnp.exe"
		open := OpenRequest{Name: text}
		acquire := AcquireRequest{Name: "a", Session: "0123456789abcdef0123456789abcdef", Holder: text}
		for what, err := range map[string]error{
			"session name": open.Resolve(),
			"holder":       acquire.Resolve(),
			"release":      ReleaseRequest{Name: "a", Session: "0123456789abcdef0123456789abcdef", Holder: text}.Check(),
			"reason":       CheckText("reason", text, 1, MaxRevokeReasonBytes),
		} {
			if CodeOf(err) != CodeInvalidArgument || !strings.Contains(err.Error(), "bidirectional") {
				t.Errorf("%s with %U: %v, want invalid_argument naming the bidirectional control", what, r, err)
			}
		}
	}
	open := OpenRequest{Name: "ünïcode a\u200fb"}
	if err := open.Resolve(); err != nil {
		t.Errorf("a session name of other non-ASCII text: %v", err)
	}
}
