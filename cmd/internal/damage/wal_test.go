package damage

import (
	"bytes"
	"encoding/binary"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"

	"github.com/raftlock/raftlock/fsm"
)

// segment builds a raft-wal segment's bytes: the file header, then each
// batch's entries as entry frames followed by a commit frame.
func segment(t *testing.T, batches ...[]*raft.Log) []byte {
	t.Helper()
	out := make([]byte, walFileHeader)
	for _, b := range batches {
		for _, l := range b {
			var p bytes.Buffer
			if err := (&wal.BinaryCodec{}).Encode(l, &p); err != nil {
				t.Fatal(err)
			}
			h := make([]byte, walFrameHeader)
			h[0] = walFrameEntry
			binary.LittleEndian.PutUint32(h[4:], uint32(p.Len()))
			out = append(out, h...)
			out = append(out, p.Bytes()...)
			out = append(out, make([]byte, (walFrameHeader-p.Len()%walFrameHeader)%walFrameHeader)...)
		}
		out = append(out, walFrameCommit, 0, 0, 0, 1, 2, 3, 4)
	}
	return out
}

// closeCommand is a command encoded in format v, told apart by now.
func closeCommand(t *testing.T, now int64, v byte) []byte {
	t.Helper()
	c := fsm.Command{Type: fsm.CmdCloseSession, Now: now, CloseSession: &fsm.SessionRef{ID: "0123456789abcdef0123456789abcdef"}}
	b, err := c.EncodeAs(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// damagedSegment writes data as a segment file, damages it with
// NewestSettledCommandInWAL (32 bytes, seed 1) and returns what it holds
// then.
func damagedSegment(t *testing.T, data []byte) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "seg.wal")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := NewestSettledCommandInWAL(path, 32, rand.New(rand.NewSource(1))); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestWALDamageFindsBinaryCommands: with the binary command format there is
// no JSON envelope to search for; the damage finds the newest command entry
// before the final batch through raft-wal's codec and damages its data
// between the version and type bytes and the CRC, so that the command's
// checksum fails.
func TestWALDamageFindsBinaryCommands(t *testing.T) {
	older, newer, last := closeCommand(t, 1, fsm.VersionBinary), closeCommand(t, 2, fsm.VersionBinary), closeCommand(t, 3, fsm.VersionBinary)
	data := segment(t,
		[]*raft.Log{{Index: 1, Term: 1, Type: raft.LogCommand, Data: older}, {Index: 2, Term: 1, Type: raft.LogNoop}},
		[]*raft.Log{{Index: 3, Term: 1, Type: raft.LogCommand, Data: newer}},
		[]*raft.Log{{Index: 4, Term: 1, Type: raft.LogCommand, Data: last}})
	got := damagedSegment(t, data)
	at := bytes.Index(data, newer)
	if _, err := fsm.Decode(got[at : at+len(newer)]); err == nil {
		t.Fatal("the newest settled command still decodes after the damage")
	}
	for _, keep := range [][]byte{older, last} {
		i := bytes.Index(data, keep)
		if !bytes.Equal(got[i:i+len(keep)], keep) {
			t.Fatal("the damage reached another command than the newest settled one")
		}
	}
	if !bytes.Equal(got[:at], data[:at]) || !bytes.Equal(got[at+len(newer):], data[at+len(newer):]) {
		t.Fatal("the damage reached outside the command's data")
	}
}

// A log written before every member read the binary format starts with
// JSON commands, and compaction leaves their bytes in the segment below
// the log's first index: the damage goes to the newest command of either
// format, never to an older JSON one because it has a marker to find.
func TestWALDamageHitsTheNewestCommandOfEitherFormat(t *testing.T) {
	cmd := func(now int64, v byte) []byte { return closeCommand(t, now, v) }
	for _, tc := range []struct {
		name                string
		older, newer, final []byte
	}{
		{"old JSON, newest binary", cmd(1, fsm.VersionJSON), cmd(2, fsm.VersionBinary), cmd(3, fsm.VersionBinary)},
		{"all JSON", cmd(1, fsm.VersionJSON), cmd(2, fsm.VersionJSON), cmd(3, fsm.VersionJSON)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := segment(t,
				[]*raft.Log{{Index: 1, Term: 1, Type: raft.LogCommand, Data: tc.older}},
				[]*raft.Log{{Index: 2, Term: 1, Type: raft.LogCommand, Data: tc.newer}},
				[]*raft.Log{{Index: 3, Term: 1, Type: raft.LogCommand, Data: tc.final}})
			got := damagedSegment(t, data)
			at := bytes.Index(data, tc.newer)
			if _, err := fsm.Decode(got[at : at+len(tc.newer)]); err == nil {
				t.Fatal("the newest settled command still decodes after the damage")
			}
			for _, keep := range [][]byte{tc.older, tc.final} {
				i := bytes.Index(data, keep)
				if !bytes.Equal(got[i:i+len(keep)], keep) {
					t.Fatal("the damage reached another command than the newest settled one")
				}
			}
		})
	}
}
