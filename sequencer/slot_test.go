package sequencer

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSlotSequencerStringParseRoundTrip(t *testing.T) {
	for _, s := range []Sequencer{
		{Name: "sem", Mode: Exclusive, Token: 7, Semaphore: true, Slot: 0, Permits: 1},
		{Name: "a:b", Mode: Exclusive, Token: 1, Semaphore: true, Slot: MaxSlots - 1, Permits: MaxSlots},
	} {
		text := s.String()
		got, err := Parse(text)
		if err != nil || got != s {
			t.Fatalf("Parse(%q) = %+v, %v; want %+v", text, got, err, s)
		}
	}
	if got := (Sequencer{Name: "sem", Mode: Exclusive, Token: 9, Semaphore: true, Slot: 2, Permits: 3}).String(); got != "rl1:p2/3:9:sem" {
		t.Fatalf("String = %q", got)
	}
	// A plain lock's forms stay byte-identical.
	if got := (Sequencer{Name: "a", Mode: Exclusive, Token: 3}).String(); got != "rl1:x:3:a" {
		t.Fatalf("String = %q", got)
	}
}

// TestSlotSequencerWithoutPermitsIsRefusedClearly pins the refusal of the
// p<slot> form of unreleased builds: malformed, with an error that says the
// permits are missing.
func TestSlotSequencerWithoutPermitsIsRefusedClearly(t *testing.T) {
	_, err := Parse("rl1:p2:54:pool")
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "permits") {
		t.Fatalf("Parse of the old slot form = %v, want malformed naming the permits", err)
	}
}

func TestSlotSequencerInvalidIsMalformed(t *testing.T) {
	f := NewFence()
	for _, s := range []Sequencer{
		{Name: "sem", Mode: Shared, Token: 7, Semaphore: true, Permits: 2},
		{Name: "sem", Mode: Exclusive, Token: 7, Semaphore: true, Slot: MaxSlots, Permits: MaxSlots},
		{Name: "sem", Mode: Exclusive, Token: 7, Semaphore: true, Slot: 0},
		{Name: "sem", Mode: Exclusive, Token: 7, Semaphore: true, Slot: 2, Permits: 2},
		{Name: "sem", Mode: Exclusive, Token: 7, Semaphore: true, Slot: 0, Permits: MaxSlots + 1},
		{Name: "sem", Mode: Exclusive, Token: 7, Slot: 1},
		{Name: "sem", Mode: Exclusive, Token: 7, Permits: 1},
	} {
		if err := f.Check(s); !errors.Is(err, ErrMalformed) {
			t.Fatalf("Check(%+v) = %v, want malformed", s, err)
		}
	}
}

// TestFenceRefusesAnEarlierTenureNamingBothTokens pins the tenure rule's
// refusal: the paused holder of slot 2 of a semaphore of 3, offered after
// a grant of the name as a semaphore of 1, is stale, and the error names
// both tokens and the change of permits.
func TestFenceRefusesAnEarlierTenureNamingBothTokens(t *testing.T) {
	f := NewFence()
	if err := f.CheckString("rl1:p0/1:68:pool"); err != nil {
		t.Fatal(err)
	}
	err := f.CheckString("rl1:p2/3:54:pool")
	if !errors.Is(err, ErrStale) {
		t.Fatalf("the paused holder of the semaphore of 3: %v, want stale", err)
	}
	for _, want := range []string{"54", "68", "semaphore of 3", "semaphore of 1", "kind or permits changed"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if f.Current(Sequencer{Name: "pool", Mode: Exclusive, Token: 54, Semaphore: true, Slot: 2, Permits: 3}) {
		t.Error("Current admits the earlier tenure's holder")
	}
}

// TestFileFenceKeepsSlotMarksAcrossReopen pins the persisted slot and
// tenure marks: a slot grant seen before a restart still makes an older
// grant of that slot stale after it, and a grant of an earlier tenure
// stays stale; a file with slot marks is version 4, one without stays
// version 2.
func TestFileFenceKeepsSlotMarksAcrossReopen(t *testing.T) {
	f, path := openTemp(t)
	if err := f.CheckString("rl1:x:3:plain"); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path); !strings.Contains(string(data), `"raftlock-fence/2"`) {
		t.Fatalf("a fence without slots wrote %s", data)
	}
	for _, s := range []string{"rl1:p2/3:5:sem", "rl1:s:8:sem", "rl1:p0/3:10:sem", "rl1:p1/3:11:sem", "rl1:p0/3:20:sem"} {
		if err := f.CheckString(s); err != nil {
			t.Fatal(err)
		}
	}
	data, _ := os.ReadFile(path)
	if !strings.Contains(string(data), `"raftlock-fence/4"`) || !strings.Contains(string(data), `"config"`) || !strings.Contains(string(data), `"other"`) {
		t.Fatalf("a fence with slot marks wrote %s", data)
	}
	f.Close()
	g, err := OpenFileFence(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.CheckString("rl1:p0/3:10:sem"); !errors.Is(err, ErrStale) {
		t.Fatalf("old slot 0 grant after reopen: %v, want stale", err)
	}
	if err := g.CheckString("rl1:p2/3:5:sem"); !errors.Is(err, ErrStale) {
		t.Fatalf("a slot grant of an earlier tenure after reopen: %v, want stale", err)
	}
	if err := g.CheckString("rl1:s:12:sem"); !errors.Is(err, ErrStale) {
		t.Fatalf("a reader below the semaphore's grants after reopen: %v, want stale", err)
	}
	if err := g.CheckString("rl1:p1/3:11:sem"); err != nil {
		t.Fatalf("slot 1's holder after reopen: %v", err)
	}
	if g.HighestSlot("sem", 0) != 20 || g.Highest("sem") != 20 {
		t.Fatalf("marks after reopen: slot 0 %d, any %d", g.HighestSlot("sem", 0), g.Highest("sem"))
	}
}

// TestFileFenceReadsVersion3Conservatively pins the reading of a version 3
// file, whose slot marks do not say their permits: when the highest token
// is a slot's, every grant below it is refused (it may be of another
// tenure), and the next tenure is admitted; when it is a plain grant's,
// plain grants above the highest slot token keep the mode rules.
func TestFileFenceReadsVersion3Conservatively(t *testing.T) {
	dir := t.TempDir()
	open := func(name, content string) *FileFence {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := OpenFileFence(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Close() })
		return f
	}
	f := open("slot.json", `{"format":"raftlock-fence/3","highest":{"pool":54},"highest_exclusive":{},"highest_slot":{"pool":{"0":50,"2":54}}}`)
	for _, s := range []string{"rl1:p0/3:50:pool", "rl1:p0/1:50:pool", "rl1:s:53:pool"} {
		if err := f.CheckString(s); !errors.Is(err, ErrStale) {
			t.Errorf("%s below a version 3 slot mark: %v, want stale", s, err)
		}
	}
	if err := f.CheckString("rl1:p0/1:68:pool"); err != nil {
		t.Fatalf("the next tenure: %v", err)
	}
	if err := f.CheckString("rl1:p2/3:54:pool"); !errors.Is(err, ErrStale) {
		t.Fatalf("the paused holder of before: %v, want stale", err)
	}
	g := open("plain.json", `{"format":"raftlock-fence/3","highest":{"db":30},"highest_exclusive":{"db":20},"highest_slot":{"db":{"0":10}}}`)
	if err := g.CheckString("rl1:s:25:db"); err != nil {
		t.Fatalf("a reader above the writer and the slot: %v", err)
	}
	for _, s := range []string{"rl1:s:9:db", "rl1:p1/2:11:db"} {
		if err := g.CheckString(s); !errors.Is(err, ErrStale) {
			t.Errorf("%s: %v, want stale", s, err)
		}
	}
}

func TestFileFenceRefusesCorruptSlotMarks(t *testing.T) {
	assertCorruptRefused(t, []corruptCase{
		{"slot above the highest", `{"format":"raftlock-fence/3","highest":{"a":5},"highest_exclusive":{},"highest_slot":{"a":{"0":6}}}`},
		{"slot out of range", `{"format":"raftlock-fence/3","highest":{"a":5},"highest_exclusive":{},"highest_slot":{"a":{"256":1}}}`},
		{"zero slot token", `{"format":"raftlock-fence/3","highest":{"a":5},"highest_exclusive":{},"highest_slot":{"a":{"1":0}}}`},
		{"slots without highest", `{"format":"raftlock-fence/3","highest":{},"highest_exclusive":{},"highest_slot":{"a":{"1":1}}}`},
		{"slots in a version 2 file", `{"format":"raftlock-fence/2","highest":{"a":5},"highest_exclusive":{},"highest_slot":{"a":{"1":1}}}`},
		{"config in a version 3 file", `{"format":"raftlock-fence/3","highest":{"a":5},"highest_exclusive":{},"config":{"a":2}}`},
		{"zero config", `{"format":"raftlock-fence/4","highest":{"a":5},"highest_exclusive":{},"config":{"a":0}}`},
		{"config above the permits limit", `{"format":"raftlock-fence/4","highest":{"a":5},"highest_exclusive":{},"config":{"a":257}}`},
		{"config without highest", `{"format":"raftlock-fence/4","highest":{},"highest_exclusive":{},"config":{"a":2}}`},
		{"other above the highest", `{"format":"raftlock-fence/4","highest":{"a":5},"highest_exclusive":{},"other":{"a":6}}`},
		{"zero other", `{"format":"raftlock-fence/4","highest":{"a":5},"highest_exclusive":{},"other":{"a":0}}`},
		{"other without highest", `{"format":"raftlock-fence/4","highest":{},"highest_exclusive":{},"other":{"a":1}}`},
	})
}
