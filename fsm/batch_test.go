package fsm

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

var _ raft.BatchingFSM = (*FSM)(nil)

// ApplyBatch is Apply one entry after the other: the same results, the
// same events, the same state, whatever the batch boundaries, with
// configuration entries (nil results) and a corrupt entry (which halts
// the replica from there on) among the commands.
func TestApplyBatchIsApplyOneByOne(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var evA, evB []Event
		a := New(func(e Event) { evA = append(evA, e) })
		b := New(func(e Event) { evB = append(evB, e) })
		m := randModel{queue: map[string][]hkey{}, maxTok: map[string]uint64{}, delayed: map[string]int64{}, lengths: map[string]int64{}, opened: map[string]bool{},
			names: map[string]string{}, grants: map[string][]PastGrant{}, since: map[string]uint64{}}
		corruptAt := uint64(150 + rng.IntN(100))
		var logs []*raft.Log
		var want []any
		now := t0
		for idx := uint64(1); idx <= 300; idx++ {
			now += rng.Int64N(int64(2 * time.Second))
			l := &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand}
			switch {
			case idx%37 == 0:
				l.Type = raft.LogConfiguration
				l.Data = raft.EncodeConfiguration(raft.Configuration{Servers: []raft.Server{{ID: "n1", Address: "a"}}})
			case idx == corruptAt:
				l.Data = []byte{VersionBinary, byte(CmdAcquire), 0, 0, 0, 0}
			default:
				cmd, _ := genCommand(rng, a, &m)
				cmd.Now = now
				data, err := cmd.EncodeAs([]byte{VersionJSON, VersionBinary}[rng.IntN(2)])
				if err != nil {
					t.Fatal(err)
				}
				l.Data = data
			}
			logs = append(logs, l)
			want = append(want, a.Apply(l))
		}
		var got []any
		for rest := logs; len(rest) > 0; {
			n := min(len(rest), 1+rng.IntN(64))
			got = append(got, b.ApplyBatch(rest[:n])...)
			rest = rest[n:]
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: ApplyBatch results differ from Apply's", seed)
		}
		if !reflect.DeepEqual(evB, evA) {
			t.Fatalf("seed %d: ApplyBatch events differ from Apply's", seed)
		}
		if !bytes.Equal(a.Dump(), b.Dump()) {
			t.Fatalf("seed %d: states differ", seed)
		}
		if a.Halted() == nil || b.Halted() == nil {
			t.Fatalf("seed %d: the corrupt entry %d did not halt both (%v, %v)", seed, corruptAt, a.Halted(), b.Halted())
		}
	}
}
