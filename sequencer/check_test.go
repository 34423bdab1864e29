package sequencer

import "testing"

func TestIsCurrent(t *testing.T) {
	s := Sequencer{Name: "a", Mode: Exclusive, Token: 10}
	tests := []struct {
		desc    string
		s       Sequencer
		current Token
		held    bool
		want    bool
	}{
		{"held with that token", s, 10, true, true},
		{"free", s, 10, false, false},
		{"re-granted since", s, 12, true, false},
		{"older token held (impossible, still not current)", s, 9, true, false},
		{"zero token never current", Sequencer{Name: "a", Mode: Exclusive}, 0, true, false},
	}
	for _, tc := range tests {
		if got := IsCurrent(tc.s, tc.current, tc.held); got != tc.want {
			t.Errorf("%s: IsCurrent(%v, %d, %v) = %v, want %v", tc.desc, tc.s, tc.current, tc.held, got, tc.want)
		}
	}
}

// Two readers hold a shared lock at once: the cluster's check finds each
// one's sequencer current, as long as the caller passes the token of the
// reader the sequencer names, as IsCurrent's doc asks.
func TestIsCurrentConcurrentSharedHolders(t *testing.T) {
	readers := []Token{10, 12} // the lock's current holders, both shared
	heldIn := Shared
	// current mirrors the caller: the token of the holder that s names, or,
	// when none does, another holder's token.
	current := func(s Sequencer) Token {
		for _, tok := range readers {
			if tok == s.Token {
				return tok
			}
		}
		return readers[len(readers)-1]
	}
	tests := []struct {
		s    Sequencer
		want bool
	}{
		{Sequencer{Name: "cfg", Mode: Shared, Token: 10}, true},
		{Sequencer{Name: "cfg", Mode: Shared, Token: 12}, true},
		{Sequencer{Name: "cfg", Mode: Shared, Token: 11}, false}, // no such reader
		{Sequencer{Name: "cfg", Mode: Shared, Token: 9}, false},  // a reader that left
		{Sequencer{Name: "cfg", Mode: Exclusive, Token: 12}, false},
	}
	for _, tc := range tests {
		held := heldIn == tc.s.Mode
		if got := IsCurrent(tc.s, current(tc.s), held); got != tc.want {
			t.Errorf("IsCurrent(%v, %d, %v) = %v, want %v", tc.s, current(tc.s), held, got, tc.want)
		}
	}
}
