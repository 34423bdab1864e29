package api

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/sequencer"
)

// A semaphore's state crosses the wire whole: permits, each holder's slot
// (slot 0 included), the slot delays and the history's permits and slots;
// a plain lock's answer carries none of them.
func TestSemaphoreStateRoundTripsTheWire(t *testing.T) {
	until := time.Date(2026, 11, 27, 10, 0, 5, 0, time.UTC)
	in := LockState{Name: "pool", Mode: sequencer.Exclusive, Index: 9, GrantsSince: 1, Permits: 3,
		Holders: []Holder{{SessionHandle: "h0", SessionName: "a", Holder: "x", Token: 4, Slot: 0},
			{SessionHandle: "h1", SessionName: "b", Holder: "y", Token: 5, Slot: 2}},
		SlotDelays: []SlotDelay{{Slot: 1, Until: until}},
		Grants:     []PastGrant{{Token: 4, Mode: sequencer.Exclusive, Holder: "x", SessionName: "a", Permits: 3, Slot: 0}},
	}
	data, err := json.Marshal(NewLockReply(in))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"permits":3`, `"slot":0`, `"slot_delays":[{"slot":1,"until":"2026-11-27T10:00:05Z"}]`} {
		if !strings.Contains(string(data), want) {
			t.Fatalf("%s lacks %s", data, want)
		}
	}
	var r LockReply
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	out, err := r.State()
	if err != nil || !reflect.DeepEqual(out, in) {
		t.Fatalf("round trip: %+v, %v; want %+v", out, err, in)
	}
	plain, _ := json.Marshal(NewLockReply(LockState{Name: "p", Mode: sequencer.Exclusive,
		Holders: []Holder{{Holder: "x", Token: 2}}, Grants: []PastGrant{{Token: 2, Mode: sequencer.Exclusive}}}))
	if strings.Contains(string(plain), "slot") || strings.Contains(string(plain), "permits") {
		t.Fatalf("a plain lock's answer %s names slots or permits", plain)
	}
	g := Grant{Name: "pool", Mode: sequencer.Exclusive, Token: 7, Permits: 3, Slot: 0,
		Sequencer: sequencer.Sequencer{Name: "pool", Mode: sequencer.Exclusive, Token: 7, Semaphore: true, Permits: 3}}
	back, err := NewGrantReply(g).Grant(0)
	if err != nil || !reflect.DeepEqual(back, g) {
		t.Fatalf("grant round trip %+v, %v; want %+v", back, err, g)
	}
}

func TestCheckPermits(t *testing.T) {
	for _, tc := range []struct {
		permits uint64
		mode    sequencer.Mode
		ok      bool
	}{{0, sequencer.Shared, true}, {1, sequencer.Exclusive, true}, {MaxPermits, sequencer.Exclusive, true},
		{MaxPermits + 1, sequencer.Exclusive, false}, {2, sequencer.Shared, false}} {
		if err := CheckPermits(tc.permits, tc.mode); (err == nil) != tc.ok || (err != nil && CodeOf(err) != CodeInvalidArgument) {
			t.Fatalf("CheckPermits(%d, %v) = %v", tc.permits, tc.mode, err)
		}
	}
}
