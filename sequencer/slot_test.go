package sequencer

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestSlotSequencerStringParseRoundTrip(t *testing.T) {
	for _, s := range []Sequencer{
		{Name: "sem", Mode: Exclusive, Token: 7, Semaphore: true, Slot: 0},
		{Name: "a:b", Mode: Exclusive, Token: 1, Semaphore: true, Slot: MaxSlots - 1},
	} {
		text := s.String()
		got, err := Parse(text)
		if err != nil || got != s {
			t.Fatalf("Parse(%q) = %+v, %v; want %+v", text, got, err, s)
		}
	}
	if got := (Sequencer{Name: "sem", Mode: Exclusive, Token: 9, Semaphore: true, Slot: 2}).String(); got != "rl1:p2:9:sem" {
		t.Fatalf("String = %q", got)
	}
	// A plain lock's forms stay byte-identical.
	if got := (Sequencer{Name: "a", Mode: Exclusive, Token: 3}).String(); got != "rl1:x:3:a" {
		t.Fatalf("String = %q", got)
	}
}

func TestSlotSequencerInvalidIsMalformed(t *testing.T) {
	f := NewFence()
	for _, s := range []Sequencer{
		{Name: "sem", Mode: Shared, Token: 7, Semaphore: true},
		{Name: "sem", Mode: Exclusive, Token: 7, Semaphore: true, Slot: MaxSlots},
		{Name: "sem", Mode: Exclusive, Token: 7, Slot: 1},
	} {
		if err := f.Check(s); !errors.Is(err, ErrMalformed) {
			t.Fatalf("Check(%+v) = %v, want malformed", s, err)
		}
	}
}

// TestFileFenceKeepsSlotMarksAcrossReopen pins the persisted slot marks: a
// slot grant seen before a restart still makes an older grant of that
// slot stale after it; a file with slot marks is version 3, one without
// stays version 2.
func TestFileFenceKeepsSlotMarksAcrossReopen(t *testing.T) {
	f, path := openTemp(t)
	if err := f.CheckString("rl1:x:3:plain"); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path); !strings.Contains(string(data), `"raftlock-fence/2"`) {
		t.Fatalf("a fence without slots wrote %s", data)
	}
	for _, s := range []string{"rl1:p0:10:sem", "rl1:p1:11:sem", "rl1:p0:20:sem"} {
		if err := f.CheckString(s); err != nil {
			t.Fatal(err)
		}
	}
	data, _ := os.ReadFile(path)
	if !strings.Contains(string(data), `"raftlock-fence/3"`) {
		t.Fatalf("a fence with slot marks wrote %s", data)
	}
	f.Close()
	g, err := OpenFileFence(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.CheckString("rl1:p0:10:sem"); !errors.Is(err, ErrStale) {
		t.Fatalf("old slot 0 grant after reopen: %v, want stale", err)
	}
	if err := g.CheckString("rl1:p1:11:sem"); err != nil {
		t.Fatalf("slot 1's holder after reopen: %v", err)
	}
	if g.HighestSlot("sem", 0) != 20 || g.Highest("sem") != 20 {
		t.Fatalf("marks after reopen: slot 0 %d, any %d", g.HighestSlot("sem", 0), g.Highest("sem"))
	}
}

func TestFileFenceRefusesCorruptSlotMarks(t *testing.T) {
	assertCorruptRefused(t, []corruptCase{
		{"slot above the highest", `{"format":"raftlock-fence/3","highest":{"a":5},"highest_exclusive":{},"highest_slot":{"a":{"0":6}}}`},
		{"slot out of range", `{"format":"raftlock-fence/3","highest":{"a":5},"highest_exclusive":{},"highest_slot":{"a":{"256":1}}}`},
		{"zero slot token", `{"format":"raftlock-fence/3","highest":{"a":5},"highest_exclusive":{},"highest_slot":{"a":{"1":0}}}`},
		{"slots without highest", `{"format":"raftlock-fence/3","highest":{},"highest_exclusive":{},"highest_slot":{"a":{"1":1}}}`},
		{"slots in a version 2 file", `{"format":"raftlock-fence/2","highest":{"a":5},"highest_exclusive":{},"highest_slot":{"a":{"1":1}}}`},
	})
}
