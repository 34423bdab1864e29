package node

import (
	"fmt"
	"testing"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/fsm"
)

// The event log keeps the last api.MaxOverviewEvents events the page
// shows, and gives them newest first, however many came before: below,
// at and past its capacity, and after wrapping around more than once.
func TestEventLogKeepsTheLastEventsNewestFirst(t *testing.T) {
	for _, n := range []int{0, 1, api.MaxOverviewEvents - 1, api.MaxOverviewEvents, api.MaxOverviewEvents + 1, 2*api.MaxOverviewEvents + 37} {
		t.Run(fmt.Sprintf("events=%d", n), func(t *testing.T) {
			var l eventLog
			for i := 1; i <= n; i++ {
				l.record(fsm.Event{Kind: fsm.EventReleased, Lock: fmt.Sprintf("l%d", i), Now: int64(i)})
				// A kind the page does not show is not kept.
				l.record(fsm.Event{Kind: fsm.EventLockChanged, Lock: "changed"})
			}
			got := l.replies(nil)
			if want := min(n, api.MaxOverviewEvents); len(got) != want {
				t.Fatalf("%d events kept, want %d", len(got), want)
			}
			for k, r := range got {
				i := n - k // newest first: the n-th event, then the one before
				if r.Seq != uint64(i) || r.Lock != fmt.Sprintf("l%d", i) {
					t.Fatalf("reply %d: seq %d lock %q, want %d and l%d", k, r.Seq, r.Lock, i, i)
				}
			}
		})
	}
}

// BenchmarkEventLogRecord is what every replica pays per applied event
// the page shows once its log is full (it stays full from then on).
func BenchmarkEventLogRecord(b *testing.B) {
	var l eventLog
	for i := 0; i < api.MaxOverviewEvents; i++ {
		l.record(fsm.Event{Kind: fsm.EventReleased, Lock: "l", Session: "s", Holder: "h"})
	}
	e := fsm.Event{Kind: fsm.EventReleased, Lock: "bench/lock", Session: "s", Holder: "h", Now: 1}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l.record(e)
	}
}
