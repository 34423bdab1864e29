package sequencer

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func openTemp(t *testing.T) (*FileFence, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fence.json")
	f, err := OpenFileFence(path)
	if err != nil {
		t.Fatalf("OpenFileFence: %v", err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f, path
}

func TestFileFenceOrdering(t *testing.T) {
	f, _ := openTemp(t)
	testFenceOrdering(t, f)
}

func TestFileFenceBadInput(t *testing.T) {
	f, _ := openTemp(t)
	testFenceBadInput(t, f)
}

func TestFileFenceConcurrent(t *testing.T) {
	f, path := openTemp(t)
	testFenceConcurrent(t, f, 40)
	// What is on disk equals what is in memory.
	g, err := OpenFileFence(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for _, name := range []string{"c/0", "c/1", "c/2"} {
		if f.Highest(name) != g.Highest(name) {
			t.Errorf("%s: memory %d, disk %d", name, f.Highest(name), g.Highest(name))
		}
	}
}

func TestFileFenceCreatesFile(t *testing.T) {
	_, path := openTemp(t)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("state file not created: %v", err)
	}
}

func TestFileFenceSurvivesReopen(t *testing.T) {
	f, path := openTemp(t)
	for _, s := range []Sequencer{seq("a", 5), seq("a", 9), seq("b", 3), {Name: "with:colon", Mode: Shared, Token: 4}} {
		if err := f.Check(s); err != nil {
			t.Fatalf("Check(%v): %v", s, err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Check(seq("a", 10)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Check after Close = %v, want ErrClosed", err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	g, err := OpenFileFence(path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer g.Close()
	for name, want := range map[string]Token{"a": 9, "b": 3, "with:colon": 4, "c": 0} {
		if got := g.Highest(name); got != want {
			t.Errorf("after reopen Highest(%q) = %d, want %d", name, got, want)
		}
	}
	if err := g.Check(seq("a", 8)); !errors.Is(err, ErrStale) {
		t.Fatalf("lower token after reopen: %v, want ErrStale", err)
	}
	if err := g.CheckString("rl1:x:9:a"); err != nil {
		t.Fatalf("equal token after reopen: %v", err)
	}
	if err := g.Check(seq("a", 11)); err != nil {
		t.Fatalf("higher token after reopen: %v", err)
	}
	g.Close()
	h, err := OpenFileFence(path)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if got := h.Highest("a"); got != 11 {
		t.Fatalf("after second reopen Highest(a) = %d, want 11", got)
	}
}

func TestFileFenceCorrupt(t *testing.T) {
	tests := []corruptCase{
		{"empty", ""},
		{"garbage", "not json at all"},
		{"truncated", `{"format":"raftlock-fence/1","highest":{"a":`},
		{"wrong format", `{"format":"other/9","highest":{}}`},
		{"no format", `{"highest":{"a":1}}`},
		{"no highest", `{"format":"raftlock-fence/1"}`},
		{"unknown field", `{"format":"raftlock-fence/1","highest":{},"extra":1}`},
		{"negative token", `{"format":"raftlock-fence/1","highest":{"a":-1}}`},
		{"fractional token", `{"format":"raftlock-fence/1","highest":{"a":1.5}}`},
		{"string token", `{"format":"raftlock-fence/1","highest":{"a":"1"}}`},
		{"zero token", `{"format":"raftlock-fence/1","highest":{"a":0}}`},
		{"overflowing token", `{"format":"raftlock-fence/1","highest":{"a":18446744073709551616}}`},
		{"empty name", `{"format":"raftlock-fence/1","highest":{"":1}}`},
		{"control char in name", `{"format":"raftlock-fence/1","highest":{"a\u0001":1}}`},
		{"trailing data", `{"format":"raftlock-fence/1","highest":{}} {}`},
		{"array", `[]`},
	}
	assertCorruptRefused(t, tests)
}

func TestFileFenceOpenErrors(t *testing.T) {
	if _, err := OpenFileFence(""); err == nil {
		t.Error("empty path accepted")
	}
	if _, err := OpenFileFence(filepath.Join(t.TempDir(), "missing-dir", "fence.json")); err == nil {
		t.Error("path in a missing directory accepted")
	}
	if _, err := OpenFileFence(t.TempDir()); err == nil {
		t.Error("a directory accepted as the state file")
	}
}

func TestFileFenceWriteFailureDoesNotAdmit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := OpenFileFence(filepath.Join(dir, "fence.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Check(seq("a", 5)); err != nil {
		t.Fatal(err)
	}
	// Removing the directory makes every later write fail, even as root.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	err = f.Check(seq("a", 6))
	if err == nil || errors.Is(err, ErrStale) || errors.Is(err, ErrMalformed) {
		t.Fatalf("Check with unwritable state = %v, want an I/O error", err)
	}
	if got := f.Highest("a"); got != 5 {
		t.Fatalf("Highest after failed write = %d, want 5 (not recorded)", got)
	}
	if err := f.Check(seq("new", 1)); err == nil {
		t.Fatal("new lock admitted without being persisted")
	}
	if got := f.Highest("new"); got != 0 {
		t.Fatalf("Highest(new) after failed write = %d, want 0", got)
	}
	// Tokens already durable are still admitted without I/O.
	if err := f.Check(seq("a", 5)); err != nil {
		t.Fatalf("equal token: %v", err)
	}
}

func TestFileFenceRemovesLeftoverTemps(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "fence.json")
	leftover := filepath.Join(dir, ".fence.json.tmp-123456")
	other := filepath.Join(dir, "unrelated.json")
	for _, p := range []string{leftover, other} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f, err := OpenFileFence(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := os.Stat(leftover); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("leftover temporary file not removed: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("unrelated file removed: %v", err)
	}
	if err := f.Check(seq("a", 1)); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file %s left after a write", e.Name())
		}
	}
}

func TestFileFenceCorruptNewFormat(t *testing.T) {
	tests := []corruptCase{
		{"truncated", `{"format":"raftlock-fence/2","highest":{"a":2},"highest_exclusive":{"a":`},
		{"no highest_exclusive", `{"format":"raftlock-fence/2","highest":{"a":1}}`},
		{"null highest_exclusive", `{"format":"raftlock-fence/2","highest":{"a":1},"highest_exclusive":null}`},
		{"no highest", `{"format":"raftlock-fence/2","highest_exclusive":{}}`},
		{"unknown field", `{"format":"raftlock-fence/2","highest":{},"highest_exclusive":{},"extra":1}`},
		{"exclusive above highest", `{"format":"raftlock-fence/2","highest":{"a":5},"highest_exclusive":{"a":6}}`},
		{"exclusive without highest", `{"format":"raftlock-fence/2","highest":{"a":5},"highest_exclusive":{"b":1}}`},
		{"zero exclusive token", `{"format":"raftlock-fence/2","highest":{"a":5},"highest_exclusive":{"a":0}}`},
		{"zero token", `{"format":"raftlock-fence/2","highest":{"a":0},"highest_exclusive":{}}`},
		{"negative exclusive token", `{"format":"raftlock-fence/2","highest":{"a":5},"highest_exclusive":{"a":-1}}`},
		{"string exclusive token", `{"format":"raftlock-fence/2","highest":{"a":5},"highest_exclusive":{"a":"5"}}`},
		{"overflowing exclusive token", `{"format":"raftlock-fence/2","highest":{"a":5},"highest_exclusive":{"a":18446744073709551616}}`},
		{"empty name", `{"format":"raftlock-fence/2","highest":{"":1},"highest_exclusive":{}}`},
		{"control char in exclusive name", `{"format":"raftlock-fence/2","highest":{"a\u0001":1},"highest_exclusive":{"a\u0001":1}}`},
		{"trailing data", `{"format":"raftlock-fence/2","highest":{},"highest_exclusive":{}} {}`},
		{"highest_exclusive in an old file", `{"format":"raftlock-fence/1","highest":{"a":5},"highest_exclusive":{"a":5}}`},
		{"future format", `{"format":"raftlock-fence/5","highest":{},"highest_exclusive":{}}`},
		{"format not a string", `{"format":2,"highest":{},"highest_exclusive":{}}`},
	}
	assertCorruptRefused(t, tests)
}

// corruptCase is a state file that OpenFileFence must refuse.
type corruptCase struct{ name, content string }

// assertCorruptRefused checks that OpenFileFence refuses every case with an
// error wrapping ErrCorrupt that names the file, and leaves the file as it
// was for an operator to inspect.
func assertCorruptRefused(t *testing.T, cases []corruptCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "fence.json")
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			f, err := OpenFileFence(path)
			if err == nil {
				f.Close()
				t.Fatalf("OpenFileFence accepted %q", tc.content)
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q does not name the file", err)
			}
			data, _ := os.ReadFile(path)
			if string(data) != tc.content {
				t.Fatalf("corrupt file was modified")
			}
		})
	}
}
