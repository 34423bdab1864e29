package api

import (
	"strings"
	"testing"
)

// Read allows reads under its prefix, write allows reads and writes under
// its prefix, admin allows everything; nothing else is allowed.
func TestRulesAllowReadUnderWriteUnderAdminEverything(t *testing.T) {
	rules, err := ParseRules([]string{"write:jobs/", "read:cfg/"})
	if err != nil {
		t.Fatal(err)
	}
	admin, _ := ParseRules([]string{"admin"})
	every, _ := ParseRules([]string{"read:"})
	for _, tc := range []struct {
		rules Rules
		a     Access
		name  string
		want  bool
	}{
		{rules, AccessWrite, "jobs/a", true},
		{rules, AccessRead, "jobs/a", true},
		{rules, AccessRead, "cfg/x", true},
		{rules, AccessWrite, "cfg/x", false},
		{rules, AccessRead, "job", false},
		{rules, AccessRead, "other", false},
		{rules, AccessAdmin, "", false},
		{rules, AccessRead, "jobs/", true}, // a listing of the prefix itself
		{rules, AccessRead, "", false},     // a listing of everything
		{every, AccessRead, "", true},
		{every, AccessWrite, "x", false},
		{admin, AccessAdmin, "", true},
		{admin, AccessWrite, "anything", true},
		{nil, AccessRead, "x", false},
	} {
		if got := tc.rules.Allows(tc.a, tc.name); got != tc.want {
			t.Errorf("%v.Allows(%s, %q) = %v, want %v", tc.rules.Strings(), tc.a, tc.name, got, tc.want)
		}
	}
}

func TestParseRulesRefusesWhatItCannotRead(t *testing.T) {
	for _, rs := range [][]string{nil, {}, {"root"}, {"read"}, {"admin:x"}, {"write:\x00"}, {"READ:x"}} {
		if _, err := ParseRules(rs); err == nil {
			t.Errorf("ParseRules(%q) accepted", rs)
		}
	}
	in := []string{"read:", "write:a/", "admin"}
	rs, err := ParseRules(in)
	if err != nil || strings.Join(rs.Strings(), " ") != strings.Join(in, " ") {
		t.Errorf("ParseRules(%q) = %v, %v; want a round trip", in, rs.Strings(), err)
	}
}

func TestParseBearerTakesOnlyBearerTokens(t *testing.T) {
	for h, want := range map[string]string{"Bearer abc": "abc", "bearer abc": "abc", "Bearer   abc": "abc"} {
		if got, err := ParseBearer(h); err != nil || got != want {
			t.Errorf("ParseBearer(%q) = %q, %v; want %q", h, got, err, want)
		}
	}
	for _, h := range []string{"", "Bearer", "Bearer ", "Basic abc", "abc", "Bearer a b", "Bearer a\tb", "Bearer " + strings.Repeat("x", MaxSecretLen+1)} {
		if _, err := ParseBearer(h); err == nil || err.(*Error).Code != CodeUnauthenticated {
			t.Errorf("ParseBearer(%q) = %v, want unauthenticated", h, err)
		}
	}
}

// FuzzParseBearer: any header value either yields a secret that is not
// empty, has no space and is at most MaxSecretLen, or is unauthenticated;
// a yielded secret is found again in "Bearer " + secret.
func FuzzParseBearer(f *testing.F) {
	for _, s := range []string{"", "Bearer abc", "bearer  x", "Basic x", "Bearer", "Bearer \x00", "Bearer a b", "BEARER 0123"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		s, err := ParseBearer(h)
		if err != nil {
			if e, ok := err.(*Error); !ok || e.Code != CodeUnauthenticated {
				t.Fatalf("ParseBearer(%q): %v, want unauthenticated", h, err)
			}
			return
		}
		if s == "" || len(s) > MaxSecretLen || strings.ContainsAny(s, " \t\r\n") {
			t.Fatalf("ParseBearer(%q) = %q", h, s)
		}
		if again, err := ParseBearer("Bearer " + s); err != nil || again != s {
			t.Fatalf("ParseBearer(Bearer %q) = %q, %v", s, again, err)
		}
	})
}
