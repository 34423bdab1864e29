package fsm

import (
	"fmt"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// lockSet returns session id's lock set as the state machine keeps it.
func lockSet(h *harness, id string) map[string]struct{} {
	h.f.mu.RLock()
	defer h.f.mu.RUnlock()
	return h.f.sessions[id].Locks
}

// A session keeps no lock set while it holds or waits for no lock: after
// its open, after its last release, and after a restore; the set is right
// whenever it holds something (entries fed straight into Apply).
func TestSessionHoldingNoLockKeepsNoLockSet(t *testing.T) {
	h := newHarness(t)
	h.open("s1", 0)
	h.open("s2", 0)
	if set := lockSet(h, "s1"); set != nil {
		t.Fatalf("lock set of a new session = %v, want none", set)
	}
	h.must(StatusGranted, acqCmd("a", "s1", "h", Exclusive, false))
	h.must(StatusGranted, acqCmd("b", "s1", "h", Exclusive, false))
	h.must(StatusQueued, acqCmd("a", "s2", "h", Exclusive, true))
	checkSessionIndex(t, h.f)
	if got, want := lockSet(h, "s1"), map[string]struct{}{"a": {}, "b": {}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("lock set of s1 = %v, want %v", got, want)
	}

	restored := New(nil)
	restoreInto(t, restored, snapshotBytes(t, h.f))
	checkSessionIndex(t, restored)

	h.must(StatusOK, relCmd("b", "s1", "h"))
	h.must(StatusOK, relCmd("a", "s1", "h")) // grants a to s2
	checkSessionIndex(t, h.f)
	if set := lockSet(h, "s1"); set != nil {
		t.Fatalf("lock set of s1 after its last release = %v, want none", set)
	}
	if got, want := lockSet(h, "s2"), map[string]struct{}{"a": {}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("lock set of s2 = %v, want %v", got, want)
	}
	h.must(StatusGranted, acqCmd("b", "s1", "h", Exclusive, false))
	checkSessionIndex(t, h.f)

	h.must(StatusOK, expireCmd("s2"))
	restored = New(nil)
	restoreInto(t, restored, snapshotBytes(t, h.f))
	checkSessionIndex(t, restored)
	if s, ok := restored.Session("s1"); !ok || len(s.Locks) != 1 {
		t.Fatalf("restored s1 = %+v, %v; want it holding b", s, ok)
	}
}

// BenchmarkApplyOpenSession applies n session opens (no lock taken, as
// most sessions) and reports the state machine's heap bytes per open
// session (B/session, ids and names included).
func BenchmarkApplyOpenSession(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			cmds := make([][]byte, n)
			for i := range cmds {
				cmds[i] = encode(b, Command{Type: CmdOpenSession, Now: t0, OpenSession: &OpenSession{
					ID: fmt.Sprintf("%032x", i), TTL: int64(15 * time.Second), LockDelay: 0}})
			}
			var perSession float64
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var m0, m1 runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&m0)
				f := New(nil)
				for j, data := range cmds {
					if r, ok := f.Apply(&raft.Log{Index: uint64(j + 1), Type: raft.LogCommand, Data: data}).(Result); !ok || r.Status != StatusOK {
						b.Fatalf("open %d: %+v", j, r)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&m1)
				perSession = float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / float64(n)
				runtime.KeepAlive(f)
			}
			b.ReportMetric(perSession, "B/session")
		})
	}
}
