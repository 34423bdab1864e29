package sequencer

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// fenceImpl makes a fresh fence of one implementation for a test. reopen
// returns the same fence reloaded from its durable state: the FileFence
// reopened from its file, the in-memory Fence itself.
type fenceImpl struct {
	name string
	open func(t *testing.T) (f fence, reopen func() fence)
}

// fenceImpls are the implementations every mode-rule test runs against.
var fenceImpls = []fenceImpl{
	{"Fence", func(t *testing.T) (fence, func() fence) {
		f := NewFence()
		return f, func() fence { return f }
	}},
	{"FileFence", func(t *testing.T) (fence, func() fence) {
		f, path := openTemp(t)
		cur := f
		return f, func() fence {
			t.Helper()
			if err := cur.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			g, err := OpenFileFence(path)
			if err != nil {
				t.Fatalf("reopen %s: %v", path, err)
			}
			t.Cleanup(func() { _ = g.Close() })
			cur = g
			return g
		}
	}},
}

func shared(name string, tok Token) Sequencer {
	return Sequencer{Name: name, Mode: Shared, Token: tok}
}

// modeStep is one Check of a mode-rule scenario and the marks it must leave.
type modeStep struct {
	s               Sequencer
	stale           bool
	highest, exclus Token // Highest and HighestExclusive of s.Name afterwards
}

// modeScenarios pin the fencing rule: a shared sequencer is current unless a
// newer exclusive grant has been seen; an exclusive one unless any newer grant
// has been seen.
var modeScenarios = []struct {
	name  string
	steps []modeStep
}{
	{"concurrent readers both pass, older first, repeatedly", []modeStep{
		{shared("r", 10), false, 10, 0},
		{shared("r", 12), false, 12, 0},
		{shared("r", 10), false, 12, 0},
		{shared("r", 12), false, 12, 0},
		{shared("r", 10), false, 12, 0},
		{shared("r", 12), false, 12, 0},
	}},
	{"concurrent readers both pass, newer first, repeatedly", []modeStep{
		{shared("r", 12), false, 12, 0},
		{shared("r", 10), false, 12, 0},
		{shared("r", 12), false, 12, 0},
		{shared("r", 10), false, 12, 0},
	}},
	{"a newer writer passes and makes both readers stale", []modeStep{
		{shared("r", 10), false, 10, 0},
		{shared("r", 12), false, 12, 0},
		{seq("r", 15), false, 15, 15},
		{shared("r", 10), true, 15, 15},
		{shared("r", 12), true, 15, 15},
		{seq("r", 15), false, 15, 15},
	}},
	{"a writer is stale after a newer reader", []modeStep{
		{seq("r", 8), false, 8, 8},
		{shared("r", 12), false, 12, 8},
		{seq("r", 11), true, 12, 8},
		{seq("r", 8), true, 12, 8},
		{shared("r", 12), false, 12, 8},
	}},
	{"a writer is stale after a newer reader it never saw before", []modeStep{
		{shared("r", 12), false, 12, 0},
		{seq("r", 11), true, 12, 0},
	}},
	{"a reader older than the newest writer is stale", []modeStep{
		{seq("r", 15), false, 15, 15},
		{shared("r", 14), true, 15, 15},
		{shared("r", 10), true, 15, 15},
		{shared("r", 16), false, 16, 15},
		{shared("r", 14), true, 16, 15},
	}},
	{"a writer is stale after any newer token", []modeStep{
		{seq("r", 10), false, 10, 10},
		{seq("r", 12), false, 12, 12},
		{seq("r", 10), true, 12, 12},
		{shared("r", 14), false, 14, 12},
		{seq("r", 13), true, 14, 12},
		{seq("r", 12), true, 14, 12},
		{seq("r", 20), false, 20, 20},
		{seq("r", 14), true, 20, 20},
	}},
	{"equal tokens are admitted", []modeStep{
		{seq("r", 7), false, 7, 7},
		{seq("r", 7), false, 7, 7},
		{shared("r", 9), false, 9, 7},
		{shared("r", 9), false, 9, 7},
		{shared("r", 7), false, 9, 7},
	}},
	{"locks are independent", []modeStep{
		{seq("a", 15), false, 15, 15},
		{shared("b", 10), false, 10, 0},
		{seq("b", 11), false, 11, 11},
		{shared("a", 12), true, 15, 15},
	}},
}

func TestFenceModeRules(t *testing.T) {
	for _, impl := range fenceImpls {
		for _, sc := range modeScenarios {
			t.Run(impl.name+"/"+sc.name, func(t *testing.T) {
				f, reopen := impl.open(t)
				for i, st := range sc.steps {
					checkModeStep(t, fmt.Sprintf("step %d", i), f, st)
				}
				// The marks survive a reopen.
				final := map[string]marks{}
				for _, st := range sc.steps {
					final[st.s.Name] = marks{any: st.highest, exclusive: st.exclus}
				}
				wantMarks(t, "after reopen", reopen(), final)
			})
		}
	}
}

// checkModeStep checks st.s against f and the marks it leaves.
func checkModeStep(t *testing.T, what string, f fence, st modeStep) {
	t.Helper()
	err := f.Check(st.s)
	switch {
	case st.stale && !errors.Is(err, ErrStale):
		t.Fatalf("%s: Check(%v) = %v, want ErrStale", what, st.s, err)
	case st.stale:
		mark := st.highest
		if st.s.Mode == Shared {
			mark = st.exclus
		}
		for _, want := range []string{fmt.Sprintf("%q", st.s.Name), fmt.Sprint(st.s.Token), fmt.Sprint(mark)} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not mention %s", what, err, want)
			}
		}
	case err != nil:
		t.Fatalf("%s: Check(%v) = %v, want nil", what, st.s, err)
	}
	if got, want := marksOf(f, st.s.Name), (marks{any: st.highest, exclusive: st.exclus}); !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: after Check(%v) marks are %+v, want %+v", what, st.s, got, want)
	}
}

func marksOf(f fence, name string) marks {
	return marks{any: f.Highest(name), exclusive: f.HighestExclusive(name)}
}

func TestFenceSharedStaleErrorMessage(t *testing.T) {
	f := NewFence()
	for _, text := range []string{"rl1:s:10:db/replica", "rl1:x:12:db/replica"} {
		if err := f.CheckString(text); err != nil {
			t.Fatal(err)
		}
	}
	err := f.CheckString("rl1:s:10:db/replica")
	want := `stale sequencer: lock "db/replica": shared token 10 is lower than the highest exclusive token seen, 12`
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v, want %q", err, want)
	}
}

// modelFence is the reference for the fencing rule, written from its
// statement rather than from two marks: it remembers every sequencer it
// admitted, and admits s unless one of them supersedes it (a newer exclusive
// grant supersedes everything older, a newer shared grant supersedes older
// exclusive ones).
type modelFence struct {
	admitted map[string][]Sequencer
}

func (m *modelFence) check(s Sequencer) (admitted bool) {
	for _, a := range m.admitted[s.Name] {
		if a.Token > s.Token && (a.Mode == Exclusive || s.Mode == Exclusive) {
			return false
		}
	}
	m.admitted[s.Name] = append(m.admitted[s.Name], s)
	return true
}

// marks returns the highest admitted token of lock name, of any mode and
// exclusive.
func (m *modelFence) marks(name string) marks {
	var mk marks
	for _, a := range m.admitted[name] {
		mk.any = max(mk.any, a.Token)
		if a.Mode == Exclusive {
			mk.exclusive = max(mk.exclusive, a.Token)
		}
	}
	return mk
}

// modelSteps is the number of checks of one seed of TestFenceModeModel.
const modelSteps = 250

func TestFenceModeModel(t *testing.T) {
	seeds := []uint64{1, 2, 3, 17, 1234567}
	fresh := rand.Uint64()
	t.Logf("fresh seed %d (add it to seeds to replay a failure)", fresh)
	seeds = append(seeds, fresh)
	for _, impl := range fenceImpls {
		for _, seed := range seeds {
			t.Run(fmt.Sprintf("%s/seed=%d", impl.name, seed), func(t *testing.T) {
				runModel(t, impl, seed)
			})
		}
	}
}

// runModel offers random sequencers of a few locks to a fence of impl and to
// the model, reopening the fence at random points, and fails at the first
// check or mark on which they differ.
func runModel(t *testing.T, impl fenceImpl, seed uint64) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	f, reopen := impl.open(t)
	model := &modelFence{admitted: map[string][]Sequencer{}}
	locks := []string{"m/0", "m/1", "m/2"}
	issued := map[string]Token{} // the newest token handed out per lock
	for i := 0; i < modelSteps; i++ {
		s := randomSequencer(r, locks, issued)
		want := model.check(s)
		err := f.Check(s)
		switch {
		case want && err != nil:
			t.Fatalf("seed %d step %d: Check(%v) = %v; the model admits it", seed, i, s, err)
		case !want && !errors.Is(err, ErrStale):
			t.Fatalf("seed %d step %d: Check(%v) = %v; the model rejects it as stale", seed, i, s, err)
		}
		if got, want := marksOf(f, s.Name), model.marks(s.Name); !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d step %d: after Check(%v) marks %+v, model %+v", seed, i, s, got, want)
		}
		if r.IntN(16) == 0 {
			f = reopen()
			for _, name := range locks {
				if got, want := marksOf(f, name), model.marks(name); !reflect.DeepEqual(got, want) {
					t.Fatalf("seed %d step %d: after reopen lock %q marks %+v, model %+v", seed, i, name, got, want)
				}
			}
		}
	}
}

// randomSequencer returns a sequencer of a random lock and mode whose token
// is either a new one (above every token issued for the lock) or one of the
// last few issued, so that equal, older and newer tokens all occur.
func randomSequencer(r *rand.Rand, locks []string, issued map[string]Token) Sequencer {
	name := locks[r.IntN(len(locks))]
	mode := Exclusive
	if r.IntN(2) == 0 {
		mode = Shared
	}
	tok := issued[name]
	if tok == 0 || r.IntN(3) == 0 {
		tok += Token(1 + r.IntN(3))
		issued[name] = tok
	} else {
		tok = max(1, tok-Token(r.IntN(6)))
	}
	return Sequencer{Name: name, Mode: mode, Token: tok}
}

// copyFixture copies testdata/name to a fresh directory and returns its path.
func copyFixture(t *testing.T, name string) (path string, data []byte) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), "fence.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, data
}

// wantMarks fails the test unless f holds exactly the marks in want.
func wantMarks(t *testing.T, what string, f fence, want map[string]marks) {
	t.Helper()
	for name, w := range want {
		if got := marksOf(f, name); !reflect.DeepEqual(got, w) {
			t.Errorf("%s: lock %q marks %+v, want %+v", what, name, got, w)
		}
	}
}

// fenceV1Fixture is testdata/fence-v1.json, written by the version 1
// FileFence (before it knew modes), as its marks must read now: each entry
// is both marks.
var fenceV1Fixture = map[string]marks{
	"cfg":           {any: 7, exclusive: 7},
	"db/primary":    {any: 12, exclusive: 12},
	"ns:with:colon": {any: 3, exclusive: 3},
}

// fenceV2AfterUpgrade is the state file after a shared token 9 of cfg is
// recorded in the fence opened from testdata/fence-v1.json.
const fenceV2AfterUpgrade = `{
  "format": "raftlock-fence/2",
  "highest": {
    "cfg": 9,
    "db/primary": 12,
    "ns:with:colon": 3
  },
  "highest_exclusive": {
    "cfg": 7,
    "db/primary": 12,
    "ns:with:colon": 3
  }
}
`

func TestFileFenceReadsV1Conservatively(t *testing.T) {
	path, v1 := copyFixture(t, "fence-v1.json")
	f, err := OpenFileFence(path)
	if err != nil {
		t.Fatalf("open a version 1 file: %v", err)
	}
	defer f.Close()
	wantMarks(t, "version 1 file", f, fenceV1Fixture)

	// The old fence rejected every token below its mark, whatever the mode;
	// so does the upgraded one. Tokens equal to the mark are admitted.
	for _, st := range []modeStep{
		{shared("cfg", 6), true, 7, 7},
		{seq("cfg", 6), true, 7, 7},
		{shared("cfg", 7), false, 7, 7},
		{seq("cfg", 7), false, 7, 7},
		{shared("db/primary", 11), true, 12, 12},
	} {
		checkModeStep(t, "version 1 file", f, st)
	}
	if data, _ := os.ReadFile(path); string(data) != string(v1) {
		t.Fatalf("checks that raise no mark rewrote the file:\n%s", data)
	}

	// The first raised mark writes the new format.
	checkModeStep(t, "first new mark", f, modeStep{shared("cfg", 9), false, 9, 7})
	if data, _ := os.ReadFile(path); string(data) != fenceV2AfterUpgrade {
		t.Fatalf("state file after the first new mark:\n%s\nwant:\n%s", data, fenceV2AfterUpgrade)
	}
	f.Close()

	g, err := OpenFileFence(path)
	if err != nil {
		t.Fatalf("reopen the upgraded file: %v", err)
	}
	defer g.Close()
	upgraded := map[string]marks{"cfg": {any: 9, exclusive: 7}, "db/primary": {any: 12, exclusive: 12}, "ns:with:colon": {any: 3, exclusive: 3}}
	wantMarks(t, "upgraded file", g, upgraded)
	// Now modes are told apart: an older reader is admitted, a writer is not.
	checkModeStep(t, "upgraded file", g, modeStep{shared("cfg", 8), false, 9, 7})
	checkModeStep(t, "upgraded file", g, modeStep{seq("cfg", 8), true, 9, 7})
}

func TestFileFenceNewFileIsNewFormat(t *testing.T) {
	_, path := openTemp(t)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"format\": \"raftlock-fence/2\",\n  \"highest\": {},\n  \"highest_exclusive\": {}\n}\n"
	if string(data) != want {
		t.Fatalf("new state file:\n%s\nwant:\n%s", data, want)
	}
}

func TestFileFenceNoIOWithoutNewMark(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := OpenFileFence(filepath.Join(dir, "fence.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, s := range []Sequencer{seq("r", 8), shared("r", 10), shared("r", 12)} {
		if err := f.Check(s); err != nil {
			t.Fatal(err)
		}
	}
	// Every write fails from now on, so a Check that wrote would fail.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	for _, st := range []modeStep{
		{shared("r", 10), false, 12, 8}, // below one mark, at or above the other
		{shared("r", 12), false, 12, 8},
		{shared("r", 8), false, 12, 8},
		{seq("r", 8), true, 12, 8},
		{shared("r", 7), true, 12, 8},
	} {
		checkModeStep(t, "no new mark", f, st)
	}
	for _, s := range []Sequencer{shared("r", 13), seq("r", 12), seq("r", 14)} {
		if err := f.Check(s); err == nil || errors.Is(err, ErrStale) {
			t.Fatalf("Check(%v) raising a mark with unwritable state = %v, want an I/O error", s, err)
		}
		if got := marksOf(f, "r"); !reflect.DeepEqual(got, marks{any: 12, exclusive: 8}) {
			t.Fatalf("marks after failed write of %v = %+v, want {12 8} (not recorded)", s, got)
		}
	}
}

func FuzzDecodeState(f *testing.F) {
	v1, err := os.ReadFile(filepath.Join("testdata", "fence-v1.json"))
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		string(v1),
		fenceV2AfterUpgrade,
		`{"format":"raftlock-fence/2","highest":{},"highest_exclusive":{}}`,
		`{"format":"raftlock-fence/2","highest":{"a":5,"b":1},"highest_exclusive":{"a":3}}`,
		`{"format":"raftlock-fence/2","highest":{"a":5},"highest_exclusive":{"a":6}}`,
		`{"format":"raftlock-fence/1","highest":{"a":5},"highest_exclusive":{"a":5}}`,
		`{"format":"raftlock-fence/1","highest":{"a":0}}`,
		`{"format":"raftlock-fence/3","highest":{"a":5},"highest_exclusive":{},"highest_slot":{"a":{"0":5,"3":2}}}`,
		`{"format":"raftlock-fence/3","highest":{"a":5},"highest_exclusive":{},"highest_slot":{"a":{"256":1}}}`,
		`{"format":"raftlock-fence/4","highest":{"a":9},"highest_exclusive":{},"highest_slot":{"a":{"0":9}},"config":{"a":3},"other":{"a":4}}`,
		`{"format":"raftlock-fence/4","highest":{"a":9},"highest_exclusive":{"a":9},"other":{"a":9}}`,
		`{"format":"raftlock-fence/4","highest":{"a":9},"highest_exclusive":{},"config":{"a":257}}`,
		"", "[]", "{}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeState(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decodeState error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		for name, mk := range m {
			if err := CheckName(name); err != nil || mk.any == 0 || mk.exclusive > mk.any || mk.other > mk.any || mk.config > MaxSlots {
				t.Fatalf("decodeState accepted lock %q with marks %+v (name: %v)", name, mk, err)
			}
		}
		enc, err := encodeState(m)
		if err != nil {
			t.Fatalf("encodeState: %v", err)
		}
		again, err := decodeState(enc)
		if err != nil {
			t.Fatalf("decodeState of its own encoding %q: %v", enc, err)
		}
		if len(again) != len(m) {
			t.Fatalf("round trip: %d locks, want %d", len(again), len(m))
		}
		for name, mk := range m {
			if !reflect.DeepEqual(again[name], mk) {
				t.Fatalf("round trip: lock %q marks %+v, want %+v", name, again[name], mk)
			}
		}
	})
}
