package main

import (
	"testing"
	"time"
)

// A session reported gone counts as spurious only if the answer arrived
// while the client's lease still ran (the server expired it before the
// lease end); sent within the lease but answered after it, it may have
// expired after the lease end: refused at the lease end; sent after it:
// lapsed.
func TestGoneIsSpuriousOnlyIfAnsweredWithinTheLease(t *testing.T) {
	const ttl = 10 * time.Second
	now := time.Now()
	for _, tc := range []struct {
		name                      string
		leaseFrom, sent           time.Time
		spurious, refused, lapsed int64
	}{
		{"answered within the lease", now.Add(-ttl / 2), now.Add(-time.Second), 1, 0, 0},
		{"sent within, answered after", now.Add(-ttl - time.Millisecond), now.Add(-ttl / 2), 0, 1, 0},
		{"sent after the lease end", now.Add(-2 * ttl), now.Add(-time.Second), 0, 0, 1},
	} {
		k := &keeper{}
		s := &kaSession{id: "s", ttl: ttl, leaseFrom: tc.leaseFrom}
		k.gone(s, tc.sent)
		k.gone(s, tc.sent) // counted once
		if k.spurious.Load() != tc.spurious || k.refusedAtEnd.Load() != tc.refused || k.lapsed.Load() != tc.lapsed {
			t.Errorf("%s: spurious %d refused %d lapsed %d, want %d %d %d", tc.name,
				k.spurious.Load(), k.refusedAtEnd.Load(), k.lapsed.Load(), tc.spurious, tc.refused, tc.lapsed)
		}
	}
}
