package fenceproxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/raftlock/raftlock/sequencer"
)

// openStore opens the store at path, closed when the test ends.
func openStore(t *testing.T, path string, o StoreOptions) *Store {
	t.Helper()
	st, err := OpenStore(path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// storeVerdict names a check's outcome as the shared vectors do.
func storeVerdict(st *Store, text string) string {
	s, err := sequencer.Parse(text)
	if err == nil {
		err = st.Check(s)
	}
	switch {
	case err == nil:
		return "admit"
	case errors.Is(err, sequencer.ErrStale):
		return "stale"
	case errors.Is(err, sequencer.ErrMalformed):
		return "malformed"
	}
	return "error: " + err.Error()
}

// The store gives every shared fence vector's verdicts, also when it is
// reopened (its log replayed) after every step, and when every raise
// compacts the log into the snapshot.
func TestStoreGivesTheSharedVectorsVerdictsAcrossReopens(t *testing.T) {
	raw, err := os.ReadFile("../../testdata/fence-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var vs struct {
		Vectors []struct {
			Name  string
			Steps []struct{ Sequencer, Verdict string }
		}
	}
	if err := json.Unmarshal(raw, &vs); err != nil {
		t.Fatal(err)
	}
	for _, compact := range []int64{0, 1} {
		for _, v := range vs.Vectors {
			path := filepath.Join(t.TempDir(), "fence.json")
			for i, step := range v.Steps {
				st, err := OpenStore(path, StoreOptions{CompactBytes: compact})
				if err != nil {
					t.Fatalf("%s, step %d: %v", v.Name, i, err)
				}
				if got := storeVerdict(st, step.Sequencer); got != step.Verdict {
					t.Errorf("compact %d: %s, step %d (%q): %s, want %s", compact, v.Name, i, step.Sequencer, got, step.Verdict)
				}
				st.Close()
			}
		}
	}
}

// A record cut short at the log's end (an append a crash interrupted,
// never acknowledged) is dropped at open; every record before it is kept,
// and appends go on after them.
func TestStoreDropsATornTailAndKeepsEveryAcknowledgedRaise(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fence.json")
	st := openStore(t, path, StoreOptions{})
	for _, seq := range []string{"rl1:x:5:a", "rl1:x:6:b", "rl1:x:7:a"} {
		if got := storeVerdict(st, seq); got != "admit" {
			t.Fatalf("%s: %s", seq, got)
		}
	}
	st.Close()
	for _, tail := range []string{`0badc0de {"name":"a","marks":{"highest":9`, "\x00\x00\x00\x00", "12345678 {}\n"} {
		f, err := os.OpenFile(path+".log", os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(tail)
		f.Close()
		st = openStore(t, path, StoreOptions{})
		if m, _ := st.Marks("a"); m.Highest != 7 {
			t.Fatalf("tail %q: a's highest %d, want 7", tail, m.Highest)
		}
		if got := storeVerdict(st, "rl1:x:5:b"); got != "stale" {
			t.Fatalf("tail %q: b at 5: %s, want stale", tail, got)
		}
		st.Close()
	}
	st = openStore(t, path, StoreOptions{})
	if got := storeVerdict(st, "rl1:x:8:b"); got != "admit" {
		t.Fatal(got)
	}
	st.Close()
	st = openStore(t, path, StoreOptions{})
	if got := storeVerdict(st, "rl1:x:7:b"); got != "stale" {
		t.Fatalf("the raise appended after a dropped tail was lost: %s", got)
	}
}

// A damaged record followed by an intact one is no crash's doing: the
// store refuses to open rather than forget a raise.
func TestStoreRefusesADamagedRecordBeforeAnIntactOne(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fence.json")
	st := openStore(t, path, StoreOptions{})
	for _, seq := range []string{"rl1:x:5:a", "rl1:x:6:b"} {
		if got := storeVerdict(st, seq); got != "admit" {
			t.Fatal(got)
		}
	}
	st.Close()
	data, err := os.ReadFile(path + ".log")
	if err != nil {
		t.Fatal(err)
	}
	data[20] ^= 1
	if err := os.WriteFile(path+".log", data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenStore(path, StoreOptions{}); !errors.Is(err, sequencer.ErrCorrupt) {
		t.Fatalf("open: %v, want ErrCorrupt", err)
	}
}

// A state file of an older proxy (FileFence's) is the store's snapshot:
// what it refused stays refused.
func TestStoreReadsAFileFenceStateFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fence.json")
	ff, err := sequencer.OpenFileFence(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []string{"rl1:p2/3:54:pool", "rl1:p0/1:68:pool", "rl1:x:9:a"} {
		if err := ff.CheckString(seq); err != nil {
			t.Fatal(err)
		}
	}
	ff.Close()
	st := openStore(t, path, StoreOptions{})
	for seq, want := range map[string]string{"rl1:p2/3:54:pool": "stale", "rl1:x:8:a": "stale", "rl1:p0/1:68:pool": "admit", "rl1:x:10:a": "admit"} {
		if got := storeVerdict(st, seq); got != want {
			t.Errorf("%s: %s, want %s", seq, got, want)
		}
	}
}

// Past MaxNames a new name is refused with ErrFull and nothing of it is
// kept; the names it keeps still raise their marks.
func TestStoreRefusesNewNamesPastMaxNames(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fence.json")
	st := openStore(t, path, StoreOptions{MaxNames: 2})
	for _, seq := range []string{"rl1:x:5:a", "rl1:x:6:b"} {
		if got := storeVerdict(st, seq); got != "admit" {
			t.Fatal(got)
		}
	}
	if err := st.Check(sequencer.Sequencer{Mode: sequencer.Exclusive, Token: 7, Name: "c"}); !errors.Is(err, ErrFull) {
		t.Fatalf("a third name: %v, want ErrFull", err)
	}
	if got := storeVerdict(st, "rl1:x:8:a"); got != "admit" {
		t.Fatalf("a kept name: %s", got)
	}
	if n := st.Names(); n != 2 {
		t.Fatalf("%d names, want 2", n)
	}
}

// However many raises come, the state stays bounded: the log is compacted
// into the snapshot once it outgrows its limit, and the snapshot holds one
// entry per name.
func TestStoreStateStaysBoundedUnderManyRaises(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fence.json")
	st := openStore(t, path, StoreOptions{CompactBytes: 16 << 10})
	for i := 1; i <= 5000; i++ {
		seq := fmt.Sprintf("rl1:x:%d:jobs/%d", i, i%50)
		if got := storeVerdict(st, seq); got != "admit" {
			t.Fatalf("%s: %s", seq, got)
		}
	}
	snap, _ := os.Stat(path)
	log, _ := os.Stat(path + ".log")
	if snap.Size() > 8<<10 || log.Size() > 16<<10+200 {
		t.Fatalf("snapshot %d bytes, log %d bytes: not bounded", snap.Size(), log.Size())
	}
	st.Close()
	st = openStore(t, path, StoreOptions{})
	for i := 4951; i <= 5000; i++ {
		if m, _ := st.Marks(fmt.Sprintf("jobs/%d", i%50)); m.Highest != sequencer.Token(i) {
			t.Fatalf("jobs/%d: highest %d, want %d", i%50, m.Highest, i)
		}
	}
}
