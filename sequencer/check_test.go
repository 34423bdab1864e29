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
