package fsm

import (
	"bytes"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/raftlock/raftlock/api"
)

// benchFSM returns an FSM with n sessions, each holding one exclusive lock,
// and the index of its last entry.
func benchFSM(b *testing.B, n int) (*FSM, uint64) {
	b.Helper()
	f := New(func(Event) {})
	idx := uint64(0)
	apply := func(c Command) Result {
		idx++
		c.Now = t0 + int64(idx)
		return f.ApplyCommand(idx, c)
	}
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("session-%08d", i)
		if r := apply(openCmd(id, delay)); r.Status != StatusOK {
			b.Fatal(r.Status)
		}
		if r := apply(acqCmd(fmt.Sprintf("locks/%08d", i), id, "h", Exclusive, false)); r.Status != StatusGranted {
			b.Fatal(r.Status)
		}
	}
	return f, idx
}

func encode(b *testing.B, c Command) []byte {
	b.Helper()
	c.Now = t0
	data, err := c.Encode()
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// BenchmarkApplyAcquireRelease: one op = an uncontended acquire and its
// release, each a full Apply (decode included), among n existing sessions.
func BenchmarkApplyAcquireRelease(b *testing.B) {
	for _, n := range []int{1, 100, 10000} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			f, idx := benchFSM(b, n)
			acq := encode(b, acqCmd("bench/lock", "session-00000000", "bench", Exclusive, false))
			rel := encode(b, relCmd("bench/lock", "session-00000000", "bench"))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				idx++
				if r := f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: acq}).(Result); r.Status != StatusGranted {
					b.Fatal(r.Status)
				}
				idx++
				if r := f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: rel}).(Result); r.Status != StatusOK {
					b.Fatal(r.Status)
				}
			}
		})
	}
}

// BenchmarkApplyContendedHandoff: a lock with w waiters; one op = the
// holder's release (granting the head waiter in the same entry) and its
// re-acquire with wait (queueing at the tail).
func BenchmarkApplyContendedHandoff(b *testing.B) {
	for _, w := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("waiters=%d", w), func(b *testing.B) {
			f, idx := benchFSM(b, 0)
			n := w + 1
			acq := make([][]byte, n)
			rel := make([][]byte, n)
			for i := 0; i < n; i++ {
				id := fmt.Sprintf("s%d", i)
				idx++
				if r := f.ApplyCommand(idx, openCmd(id, delay)); r.Status != StatusOK {
					b.Fatal(r.Status)
				}
				acq[i] = encode(b, acqCmd("contended", id, "h", Exclusive, true))
				rel[i] = encode(b, relCmd("contended", id, "h"))
				idx++
				if r := f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: acq[i]}).(Result); r.Status != StatusGranted && r.Status != StatusQueued {
					b.Fatal(r.Status)
				}
			}
			holder := 0
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				idx++
				if r := f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: rel[holder]}).(Result); r.Status != StatusOK {
					b.Fatal(r.Status)
				}
				idx++
				if r := f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: acq[holder]}).(Result); r.Status != StatusQueued {
					b.Fatal(r.Status)
				}
				holder = (holder + 1) % n
			}
			b.StopTimer()
			if l, _ := f.Lock("contended"); len(l.Holders) != 1 || len(l.Waiters) != w || l.Holders[0].Session != fmt.Sprintf("s%d", holder) {
				b.Fatalf("lock %+v", l)
			}
		})
	}
}

type discardSink struct{}

func (discardSink) Write(p []byte) (int, error) { return len(p), nil }
func (discardSink) Close() error                { return nil }
func (discardSink) ID() string                  { return "discard" }
func (discardSink) Cancel() error               { return nil }

// BenchmarkSnapshot: Snapshot plus Persist of n sessions each holding a
// lock. SetBytes reports the snapshot size as throughput.
func BenchmarkSnapshot(b *testing.B) {
	for _, n := range []int{1000, 20000} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			f, _ := benchFSM(b, n)
			b.SetBytes(int64(len(f.Dump())))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				snap, err := f.Snapshot()
				if err != nil {
					b.Fatal(err)
				}
				if err := snap.Persist(discardSink{}); err != nil {
					b.Fatal(err)
				}
				snap.Release()
			}
		})
	}
}

// BenchmarkRestore: Restore of a snapshot of n sessions each holding a lock
// (one size only: at 20000 sessions it takes ~0.1 s an op).
func BenchmarkRestore(b *testing.B) {
	for _, n := range []int{1000} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			f, _ := benchFSM(b, n)
			data := f.Dump()
			g := New(nil)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := g.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchAcquire is the command of the codec benchmarks: an acquire as the
// leader proposes it, with its limits.
func benchAcquire() Command {
	l := api.DefaultLimits()
	return Command{Type: CmdAcquire, Now: t0 + int64(time.Second), Acquire: &Acquire{Lock: "jobs/leader",
		Session: "9f86d081884c7d659a2feaa0c55ad015", Holder: "3f2a0c1e-7b7d-4c55-9a1e-1f0d5c2b9e77",
		Mode: Exclusive, Wait: true, WaitFor: int64(time.Minute), Value: "10.0.0.1:8080", Limits: &l}}
}

// BenchmarkDecode decodes an acquire in each format: every replica
// decodes every entry.
func BenchmarkDecode(b *testing.B) {
	for _, v := range []byte{VersionJSON, VersionBinary} {
		b.Run(fmt.Sprintf("version=%d", v), func(b *testing.B) {
			c := benchAcquire()
			data, err := c.EncodeAs(v)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Decode(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncode encodes an acquire in each format: the leader encodes
// every entry it proposes.
func BenchmarkEncode(b *testing.B) {
	for _, v := range []byte{VersionJSON, VersionBinary} {
		b.Run(fmt.Sprintf("version=%d", v), func(b *testing.B) {
			c := benchAcquire()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.EncodeAs(v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkApplySemaphoreSlot: one op = the grant of the last free slot of
// a semaphore whose other permits-1 slots are held, and its release, each
// a full Apply: the cost of finding the lowest free slot.
func BenchmarkApplySemaphoreSlot(b *testing.B) {
	for _, permits := range []uint64{2, 64, api.MaxPermits} {
		b.Run(fmt.Sprintf("permits=%d", permits), func(b *testing.B) {
			f := New(func(Event) {})
			idx := uint64(0)
			apply := func(c Command) Result {
				idx++
				c.Now = t0 + int64(idx)
				return f.ApplyCommand(idx, c)
			}
			if r := apply(openCmd("s", delay)); r.Status != StatusOK {
				b.Fatal(r.Status)
			}
			for i := uint64(0); i < permits-1; i++ {
				if r := apply(semCmd("sem", "s", fmt.Sprintf("h%d", i), permits, false)); r.Status != StatusGranted {
					b.Fatal(r.Status)
				}
			}
			acq := encode(b, semCmd("sem", "s", "bench", permits, false))
			rel := encode(b, relCmd("sem", "s", "bench"))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				idx++
				if r := f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: acq}).(Result); r.Status != StatusGranted || r.Slot != permits-1 {
					b.Fatal(r.Status, r.Slot)
				}
				idx++
				if r := f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: rel}).(Result); r.Status != StatusOK {
					b.Fatal(r.Status)
				}
			}
		})
	}
}
