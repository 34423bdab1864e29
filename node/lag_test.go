package node

import (
	"strings"
	"testing"
	"time"
)

// A follower is unhealthy for its lag when it is more than
// healthMaxLagEntries behind the commit index its leader announced, or
// has not applied, for more than healthMaxLagTime, an index announced
// committed; one that keeps up, even a little behind, is not.
func TestHealthLagBoundIsEntriesOrTimeBehindTheLeadersCommit(t *testing.T) {
	var applied uint64
	c := &commitLag{}
	t0 := time.Unix(1000, 0)
	if why := c.lagReason(0, t0); why != "" {
		t.Fatalf("before any append: %q", why)
	}
	// Keeping up: always a few entries behind, each announced index
	// reached before the next append.
	for i := uint64(1); i <= 100; i++ {
		c.saw(i*100, t0.Add(time.Duration(i)*time.Second))
		applied = i*100 - 50
		if why := c.lagReason(applied, t0.Add(time.Duration(i)*time.Second+time.Millisecond)); why != "" {
			t.Fatalf("a follower 50 entries behind, keeping up: %q", why)
		}
		applied = i * 100
	}
	// Far behind in entries.
	c.saw(applied+healthMaxLagEntries+1, t0.Add(200*time.Second))
	why := c.lagReason(applied, t0.Add(200*time.Second))
	if !strings.Contains(why, "behind its leader") || !strings.Contains(why, "5001 entries behind") {
		t.Fatalf("5001 entries behind: %q", why)
	}
	// Caught up again.
	applied += healthMaxLagEntries + 1
	if why := c.lagReason(applied, t0.Add(201*time.Second)); why != "" {
		t.Fatalf("caught up: %q", why)
	}
	// A few entries behind, but stuck: late once healthMaxLagTime passed
	// since they were announced.
	at := t0.Add(300 * time.Second)
	c.saw(applied+3, at)
	if why := c.lagReason(applied, at.Add(time.Second)); why != "" {
		t.Fatalf("3 entries behind for a second: %q", why)
	}
	c.saw(applied+4, at.Add(5*time.Second))
	if why := c.lagReason(applied, at.Add(healthMaxLagTime)); why != "" {
		t.Fatalf("stuck for exactly the bound: %q", why)
	}
	why = c.lagReason(applied, at.Add(healthMaxLagTime+time.Second))
	if !strings.Contains(why, "behind its leader") || !strings.Contains(why, "for 11s") {
		t.Fatalf("stuck for 11 s: %q", why)
	}
}
