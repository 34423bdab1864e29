package damage

import (
	"encoding/binary"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"

	"github.com/hashicorp/raft"
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
	final := starts[len(starts)-1]
	// The newest command entry, in either format: a log written before
	// every member read the binary format starts with JSON commands, and
	// the oldest of those may lie below the log's first index by now
	// (compaction moves raft-wal's first index, not the bytes), where
	// damage is met by nothing (it once chose the newest JSON command
	// whenever there was one, and the damaged follower ran on).
	cmds := walCommands(data, final)
	if len(cmds) == 0 {
		return fmt.Errorf("damage: no command before the final batch of %s", path)
	}
	c := cmds[len(cmds)-1]
	at, end := c.at, min(c.at+c.n, c.at+n)
	if data[c.at] != '{' {
		// A binary command: past its version and type bytes, short of
		// its CRC-32C (damage anywhere in it fails the CRC).
		at, end = commandSpan(c.at, c.n, n)
	}
	rng.Read(data[at:end])
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("damage: %w", err)
	}
	return nil
}

// walCommand is where one command's data lies in a raft-wal segment.
type walCommand struct{ at, n int }

// walCommands lists the commands (raft.LogCommand entries with at least 8
// bytes of data) of the entry frames that start before end in a raft-wal
// segment's data, in order. An entry's payload is raft-wal's BinaryCodec:
// uvarints index, term and type, then the data with its uvarint length.
func walCommands(data []byte, end int) []walCommand {
	var out []walCommand
	for at := walFileHeader; at+walFrameHeader <= end; {
		typ, l := data[at], int(binary.LittleEndian.Uint32(data[at+4:]))
		switch typ {
		case walFrameEntry, walFrameIndex:
			p := at + walFrameHeader
			if typ == walFrameEntry && p+l <= len(data) {
				if off, n, ok := commandData(data[p : p+l]); ok {
					out = append(out, walCommand{p + off, n})
				}
			}
			at = p + l + (walFrameHeader-l%walFrameHeader)%walFrameHeader
		case walFrameCommit:
			at += walFrameHeader
		default:
			return out
		}
	}
	return out
}

// commandData finds the data of a raft-wal entry payload p whose log type
// is a command: its offset in p and its length.
func commandData(p []byte) (off, n int, ok bool) {
	var typ uint64
	for i := range 3 {
		v, k := binary.Uvarint(p[off:])
		if k <= 0 {
			return 0, 0, false
		}
		if i == 2 {
			typ = v
		}
		off += k
	}
	ln, k := binary.Uvarint(p[off:])
	if k <= 0 || typ != uint64(raft.LogCommand) || ln < 8 || uint64(len(p)-off-k) < ln {
		return 0, 0, false
	}
	return off + k, int(ln), true
}

// commandSpan is where n bytes of damage go in a binary command of size
// bytes at offset at: past its version and type bytes, short of its
// CRC-32C (damage anywhere in it fails the CRC).
func commandSpan(at, size, n int) (from, to int) {
	return at + 2, at + min(size-4, 2+n)
}
