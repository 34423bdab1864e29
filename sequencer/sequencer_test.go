package sequencer

import (
	"errors"
	"strings"
	"testing"
)

func TestStringParseRoundTrip(t *testing.T) {
	tests := []struct {
		seq  Sequencer
		text string
	}{
		{Sequencer{Name: "a", Mode: Exclusive, Token: 1}, "rl1:x:1:a"},
		{Sequencer{Name: "jobs/leader", Mode: Shared, Token: 42}, "rl1:s:42:jobs/leader"},
		{Sequencer{Name: "ns:with:colons", Mode: Exclusive, Token: 7}, "rl1:x:7:ns:with:colons"},
		{Sequencer{Name: "trailing:", Mode: Shared, Token: 3}, "rl1:s:3:trailing:"},
		{Sequencer{Name: "héllo wörld/日本", Mode: Exclusive, Token: 99}, "rl1:x:99:héllo wörld/日本"},
		{Sequencer{Name: "max", Mode: Exclusive, Token: 18446744073709551615}, "rl1:x:18446744073709551615:max"},
		{Sequencer{Name: strings.Repeat("n", MaxNameBytes), Mode: Shared, Token: 10}, "rl1:s:10:" + strings.Repeat("n", MaxNameBytes)},
	}
	for _, tc := range tests {
		if got := tc.seq.String(); got != tc.text {
			t.Errorf("%#v.String() = %q, want %q", tc.seq, got, tc.text)
		}
		got, err := Parse(tc.text)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.text, err)
			continue
		}
		if got != tc.seq {
			t.Errorf("Parse(%q) = %#v, want %#v", tc.text, got, tc.seq)
		}
	}
}

func TestParseRejects(t *testing.T) {
	tests := []struct {
		name, text string
	}{
		{"empty", ""},
		{"only prefix", "rl1"},
		{"too few fields", "rl1:x:5"},
		{"bad prefix", "rl2:x:5:a"},
		{"uppercase prefix", "RL1:x:5:a"},
		{"empty prefix", ":x:5:a"},
		{"bad mode", "rl1:e:5:a"},
		{"long mode", "rl1:exclusive:5:a"},
		{"uppercase mode", "rl1:X:5:a"},
		{"empty mode", "rl1::5:a"},
		{"token zero", "rl1:x:0:a"},
		{"leading zeros", "rl1:x:007:a"},
		{"leading zero on zero", "rl1:x:00:a"},
		{"negative", "rl1:x:-5:a"},
		{"plus sign", "rl1:x:+5:a"},
		{"hex", "rl1:x:0x10:a"},
		{"letters", "rl1:x:abc:a"},
		{"underscore", "rl1:x:1_000:a"},
		{"fraction", "rl1:x:1.5:a"},
		{"space in token", "rl1:x: 5:a"},
		{"empty token", "rl1:x::a"},
		{"overflow", "rl1:x:18446744073709551616:a"},
		{"empty name", "rl1:x:5:"},
		{"name too long", "rl1:x:5:" + strings.Repeat("n", MaxNameBytes+1)},
		{"name control char", "rl1:x:5:a\nb"},
		{"name NUL", "rl1:x:5:a\x00"},
		{"name DEL", "rl1:x:5:a\x7f"},
		{"name invalid UTF-8", "rl1:x:5:a\xff"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse(tc.text)
			if err == nil {
				t.Fatalf("Parse(%q) = %#v, want error", tc.text, s)
			}
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Parse(%q) error %v does not wrap ErrMalformed", tc.text, err)
			}
			if s != (Sequencer{}) {
				t.Fatalf("Parse(%q) returned non-zero %#v with error", tc.text, s)
			}
		})
	}
}

func TestModeStringParse(t *testing.T) {
	for _, m := range []Mode{Exclusive, Shared} {
		got, err := ParseMode(m.String())
		if err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v; want %v", m.String(), got, err, m)
		}
	}
	if m, err := ParseMode(""); err != nil || m != Exclusive {
		t.Errorf(`ParseMode("") = %v, %v; want exclusive`, m, err)
	}
	if _, err := ParseMode("bogus"); err == nil {
		t.Error(`ParseMode("bogus") succeeded`)
	}
	if got := Mode(9).String(); got != "mode(9)" {
		t.Errorf("Mode(9).String() = %q", got)
	}
}

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"rl1:x:1:a", "rl1:s:42:jobs/leader", "rl1:x:7:a:b:c", "rl1:x:0:a", "rl1:x:01:a",
		"rl1:x:-1:a", "rl1:q:1:a", "rl1:x:1:", "", ":::", "rl1:x:18446744073709551616:a",
		"rl1:x:1:a\x00", "rl1:s:9:\xff",
		"rl1:p0:5:sem", "rl1:p0/1:5:sem", "rl1:p255/256:5:sem", "rl1:p256/256:5:sem", "rl1:p01/2:5:sem", "rl1:p/2:5:sem", "rl1:p-1/2:5:s", "rl1:P1/2:5:s", "rl1:p1/1:5:s", "rl1:p0/257:5:s",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		s, err := Parse(text)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Parse(%q) error %v does not wrap ErrMalformed", text, err)
			}
			return
		}
		if got := s.String(); got != text {
			t.Fatalf("Parse(%q).String() = %q: not a round trip", text, got)
		}
		if err := s.validate(); err != nil {
			t.Fatalf("Parse(%q) = %#v, which does not validate: %v", text, s, err)
		}
		again, err := Parse(s.String())
		if err != nil || again != s {
			t.Fatalf("re-Parse(%q) = %#v, %v; want %#v", s.String(), again, err, s)
		}
	})
}
