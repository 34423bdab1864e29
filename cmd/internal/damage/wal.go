package damage

import (
	"encoding/binary"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
)

// raft-wal's segment format, as far as the damage needs it
// (github.com/hashicorp/raft-wal/segment/format.go): a 32-byte file
// header, then frames of an 8-byte header (type, 3 zero bytes, a
// little-endian uint32: the payload length, or a commit frame's CRC)
// and the payload padded to 8 bytes. A commit frame ends every append
// batch.
const (
	walFileHeader  = 32
	walFrameHeader = 8
	walFrameEntry  = 1
	walFrameIndex  = 2
	walFrameCommit = 3
)

// LogFile is the file of the data dir dir that holds the newest log
// entries: the newest raft-wal segment under wal/ with the wal log
// store, else raft.db.
func LogFile(dir string) string {
	segs, _ := filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
	if len(segs) == 0 {
		return filepath.Join(dir, "raft.db")
	}
	sort.Strings(segs)
	return segs[len(segs)-1]
}

// WALBatchStarts returns the offsets in a raft-wal segment's data where
// each committed append batch begins, in order.
func WALBatchStarts(data []byte) []int {
	var starts []int
	start := walFileHeader
	for at := walFileHeader; at+walFrameHeader <= len(data); {
		typ, l := data[at], int(binary.LittleEndian.Uint32(data[at+4:]))
		switch typ {
		case walFrameEntry, walFrameIndex:
			at += walFrameHeader + l + (walFrameHeader-l%walFrameHeader)%walFrameHeader
		case walFrameCommit:
			starts = append(starts, start)
			at += walFrameHeader
			start = at
		default:
			return starts
		}
	}
	return starts
}

// NewestSettledCommandInWAL overwrites n bytes of the newest command in
// the raft-wal segment at path that lies before its final append batch
// with random bytes from rng. raft-wal checks the CRC of a segment's
// final batch only (a mismatch there is taken for a torn write and the
// batch dropped): damage before it is met by the command checksums.
func NewestSettledCommandInWAL(path string, n int, rng *rand.Rand) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("damage: %w", err)
	}
	starts := WALBatchStarts(data)
	if len(starts) < 2 {
		return fmt.Errorf("damage: %s holds %d append batch(es), not two", path, len(starts))
	}
	ats := NewestCommand(data[:starts[len(starts)-1]])
	if len(ats) == 0 {
		return fmt.Errorf("damage: no command before the final batch of %s", path)
	}
	at := ats[len(ats)-1]
	rng.Read(data[at:min(len(data), at+n)])
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("damage: %w", err)
	}
	return nil
}
