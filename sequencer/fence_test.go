package sequencer

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// fence is the common surface of Fence and FileFence, so that both are
// tested by the same cases.
type fence interface {
	Checker
	CheckString(text string) error
	Highest(name string) Token
	HighestExclusive(name string) Token
}

func seq(name string, tok Token) Sequencer {
	return Sequencer{Name: name, Mode: Exclusive, Token: tok}
}

func testFenceOrdering(t *testing.T, f fence) {
	t.Helper()
	steps := []struct {
		s     Sequencer
		stale bool
		high  Token
	}{
		{seq("a", 5), false, 5},
		{seq("a", 5), false, 5}, // the same holder again
		{seq("a", 7), false, 7},
		{seq("a", 6), true, 7},
		{seq("a", 1), true, 7},
		{Sequencer{Name: "a", Mode: Shared, Token: 7}, false, 7},
		{seq("a", 8), false, 8},
		{seq("b", 2), false, 2}, // locks are independent
		{seq("a", 8), false, 8},
		{seq("b", 1), true, 2},
	}
	for i, st := range steps {
		err := f.Check(st.s)
		if st.stale {
			if !errors.Is(err, ErrStale) {
				t.Fatalf("step %d: Check(%v) = %v, want ErrStale", i, st.s, err)
			}
			for _, want := range []string{fmt.Sprintf("%q", st.s.Name), fmt.Sprint(st.s.Token), fmt.Sprint(st.high)} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("step %d: error %q does not mention %s", i, err, want)
				}
			}
		} else if err != nil {
			t.Fatalf("step %d: Check(%v) = %v, want nil", i, st.s, err)
		}
		if got := f.Highest(st.s.Name); got != st.high {
			t.Fatalf("step %d: Highest(%q) = %d, want %d", i, st.s.Name, got, st.high)
		}
	}
	if got := f.Highest("never-seen"); got != 0 {
		t.Fatalf("Highest(never-seen) = %d, want 0", got)
	}
}

func testFenceBadInput(t *testing.T, f fence) {
	t.Helper()
	for _, s := range []Sequencer{
		{},
		{Name: "a", Mode: Exclusive},
		{Name: "", Mode: Exclusive, Token: 1},
		{Name: "a", Mode: 0, Token: 1},
		{Name: "a", Mode: 3, Token: 1},
		{Name: "a\x00", Mode: Exclusive, Token: 1},
		{Name: strings.Repeat("x", MaxNameBytes+1), Mode: Exclusive, Token: 1},
	} {
		if err := f.Check(s); !errors.Is(err, ErrMalformed) {
			t.Errorf("Check(%#v) = %v, want ErrMalformed", s, err)
		}
	}
	for _, text := range []string{"", "garbage", "rl1:x:0:a", "rl1:x:5:"} {
		if err := f.CheckString(text); !errors.Is(err, ErrMalformed) {
			t.Errorf("CheckString(%q) = %v, want ErrMalformed", text, err)
		}
	}
	if err := f.CheckString("rl1:x:3:bad-input"); err != nil {
		t.Fatalf("CheckString valid: %v", err)
	}
	if err := f.CheckString("rl1:s:2:bad-input"); !errors.Is(err, ErrStale) {
		t.Fatalf("CheckString lower: %v, want ErrStale", err)
	}
	if got := f.Highest("bad-input"); got != 3 {
		t.Fatalf("Highest(bad-input) = %d, want 3", got)
	}
}

// testFenceConcurrent has many goroutines offer increasing tokens of a few
// locks at once; it checks that the final marks are the maximum offered and
// that no Check ever admits a token below one it already saw admitted.
func testFenceConcurrent(t *testing.T, f fence, perWorker int) {
	t.Helper()
	const workers = 8
	locks := []string{"c/0", "c/1", "c/2"}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 1; i <= perWorker; i++ {
				name := locks[(w+i)%len(locks)]
				tok := Token(i*workers + w)
				err := f.Check(seq(name, tok))
				high := f.Highest(name)
				switch {
				case err == nil:
					if high < tok {
						errs <- fmt.Errorf("admitted %d of %s but Highest is %d", tok, name, high)
						return
					}
				case errors.Is(err, ErrStale):
					if high <= tok {
						errs <- fmt.Errorf("rejected %d of %s but Highest is %d", tok, name, high)
						return
					}
				default:
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Every lock's highest must be the largest token any worker offered it.
	for li, name := range locks {
		var want Token
		for w := 0; w < workers; w++ {
			for i := 1; i <= perWorker; i++ {
				if (w+i)%len(locks) == li && Token(i*workers+w) > want {
					want = Token(i*workers + w)
				}
			}
		}
		if got := f.Highest(name); got != want {
			t.Errorf("Highest(%s) = %d, want %d", name, got, want)
		}
	}
}

func TestFenceOrdering(t *testing.T)   { testFenceOrdering(t, NewFence()) }
func TestFenceBadInput(t *testing.T)   { testFenceBadInput(t, NewFence()) }
func TestFenceConcurrent(t *testing.T) { testFenceConcurrent(t, NewFence(), 500) }

func TestFenceStaleErrorMessage(t *testing.T) {
	f := NewFence()
	if err := f.CheckString("rl1:x:12:db/primary"); err != nil {
		t.Fatal(err)
	}
	err := f.CheckString("rl1:x:9:db/primary")
	want := `stale sequencer: lock "db/primary": token 9 is lower than the highest seen, 12`
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v, want %q", err, want)
	}
}

// Current says whether a sequencer would be admitted, and records nothing:
// a newer grant makes an admitted one no longer current.
func TestCurrentTellsSupersededWithoutRecording(t *testing.T) {
	dir := t.TempDir()
	ff, err := OpenFileFence(dir + "/state")
	if err != nil {
		t.Fatal(err)
	}
	defer ff.Close()
	for name, f := range map[string]interface {
		Checker
		Current(Sequencer) bool
	}{"Fence": NewFence(), "FileFence": ff} {
		old := Sequencer{Name: "a", Mode: Exclusive, Token: 5}
		newer := Sequencer{Name: "a", Mode: Exclusive, Token: 6}
		reader := Sequencer{Name: "a", Mode: Shared, Token: 5}
		if !f.Current(newer) || !f.Current(old) {
			t.Fatalf("%s: an empty fence must take any valid sequencer", name)
		}
		if err := f.Check(old); err != nil {
			t.Fatal(err)
		}
		if !f.Current(newer) || !f.Current(reader) {
			t.Fatalf("%s: Current recorded something or refused a current sequencer", name)
		}
		if err := f.Check(newer); err != nil {
			t.Fatal(err)
		}
		if f.Current(old) || f.Current(reader) {
			t.Fatalf("%s: a superseded sequencer is still current", name)
		}
		if f.Current(Sequencer{Name: "a", Mode: Exclusive}) {
			t.Fatalf("%s: an invalid sequencer is current", name)
		}
	}
}
