package fenceproxy

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/raftlock/raftlock/sequencer"
	"github.com/raftlock/raftlock/sequencer/internal/atomicfile"
)

// ErrFull is returned (wrapped) by Store.Check for a sequencer of a name
// the store has no marks of when it already keeps StoreOptions.MaxNames
// names: the proxy refuses it (503 fence_full) and forwards nothing.
var ErrFull = errors.New("fence store full")

// DefaultMaxNames is the number of lock names a Store keeps marks of
// unless StoreOptions.MaxNames says otherwise.
const DefaultMaxNames = 10000

// StoreOptions tune a Store; the zero value takes the defaults.
type StoreOptions struct {
	// MaxNames bounds the lock names the store keeps marks of (default
	// DefaultMaxNames). A store never forgets a name's marks (that would
	// admit its stale holders again): past the bound it refuses
	// sequencers of new names with ErrFull.
	MaxNames int
	// CompactBytes is the log size past which a raise first compacts the
	// log into the snapshot (default: 256 KiB or twice the snapshot's
	// size, whichever is larger).
	CompactBytes int64
}

// Store is the proxy's fence whose marks survive restarts and crashes. It
// admits what sequencer.Fence admits. Its state is two files: a snapshot at
// path, in FileFence's layout (so a state file of an older proxy is read
// as it is), and an append-only log at path+".log" of the marks a Check
// raised, one record a line, each with its CRC-32C. A raise appends one
// record and fsyncs the log before Check admits the sequencer, so an
// admitted raise is never lost; a Check that raises nothing does no I/O
// and takes no lock but a read lock. When the log outgrows the snapshot,
// the raise that finds it so first writes a new snapshot (temporary file,
// fsync, rename, fsync of the directory) and empties the log.
//
// At open, the log's records are replayed over the snapshot, a later
// record of a name replacing an earlier one. A record cut short by a
// crash, at the log's end, is one whose append was never acknowledged: it
// is dropped. A damaged record followed by intact ones is not a crash's
// doing: OpenStore refuses the files (ErrCorrupt).
//
// One Store, in one process, owns its files. A Store is safe for
// concurrent use.
type Store struct {
	path, logPath string
	maxNames      int
	compactBytes  int64

	// wmu serializes raises: the append, its fsync and compactions.
	wmu      sync.Mutex
	log      *os.File
	logSize  int64
	snapSize int64

	// mu guards marks and closed; marks change only under wmu too, after
	// the record that holds them is durable.
	mu     sync.RWMutex
	marks  map[string]sequencer.Marks
	closed bool
}

// logRecord is one line of the log (after its CRC): the marks of Name
// after a raise.
type logRecord struct {
	Name  string          `json:"name"`
	Marks sequencer.Marks `json:"marks"`
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// OpenStore opens the store whose snapshot is at path, creating it (but
// not its directory) if missing, replays its log and drops a torn tail.
// Errors wrap sequencer.ErrCorrupt when the files do not hold a valid
// state.
func OpenStore(path string, o StoreOptions) (*Store, error) {
	if path == "" {
		return nil, errors.New("open fence store: empty path")
	}
	if o.MaxNames <= 0 {
		o.MaxNames = DefaultMaxNames
	}
	st := &Store{path: path, logPath: path + ".log", maxNames: o.MaxNames, compactBytes: o.CompactBytes,
		marks: make(map[string]sequencer.Marks)}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		data, err = sequencer.EncodeState(nil)
		if err != nil {
			return nil, err
		}
		if err := atomicfile.WriteFile(path, data); err != nil {
			return nil, fmt.Errorf("open fence store %s: create snapshot: %w", path, err)
		}
	case err != nil:
		return nil, fmt.Errorf("open fence store %s: %w", path, err)
	default:
		if st.marks, err = sequencer.DecodeState(data); err != nil {
			return nil, fmt.Errorf("open fence store %s: %w", path, err)
		}
	}
	st.snapSize = int64(len(data))
	atomicfile.RemoveTemps(path)
	if err := st.openLog(); err != nil {
		return nil, fmt.Errorf("open fence store %s: %w", path, err)
	}
	return st, nil
}

// openLog replays the log over st.marks, truncates a torn tail and opens
// the log for appending.
func (st *Store) openLog() error {
	f, err := os.OpenFile(st.logPath, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return fmt.Errorf("read %s: %w", st.logPath, err)
	}
	good, err := replay(data, st.marks)
	if err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", st.logPath, err)
	}
	if good < int64(len(data)) {
		// A torn tail: an append that a crash cut short, so never
		// acknowledged. Drop it before appending after it.
		if err := f.Truncate(good); err != nil {
			f.Close()
			return fmt.Errorf("truncate the torn tail of %s: %w", st.logPath, err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return fmt.Errorf("fsync %s: %w", st.logPath, err)
		}
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		f.Close()
		return err
	}
	if err := atomicfile.SyncDir(filepath.Dir(st.logPath)); err != nil {
		f.Close()
		return fmt.Errorf("fsync directory of %s: %w", st.logPath, err)
	}
	st.log, st.logSize = f, good
	return nil
}

// replay applies the log's intact records to m and returns the length of
// its intact prefix. A damaged or cut record followed only by damaged or
// cut ones is a torn tail; followed by an intact one, ErrCorrupt.
func replay(data []byte, m map[string]sequencer.Marks) (int64, error) {
	var good int64
	torn := -1 // the line number of the first damaged record
	for line, rest := 0, data; len(rest) > 0; line++ {
		end := bytes.IndexByte(rest, '\n')
		var rec []byte
		if end < 0 {
			rec, rest = rest, nil // no newline: cut short
		} else {
			rec, rest = rest[:end], rest[end+1:]
		}
		r, ok := decodeRecord(rec)
		if !ok || end < 0 {
			if torn < 0 {
				torn = line
			}
			continue
		}
		if torn >= 0 {
			return 0, fmt.Errorf("%w: record %d is damaged and record %d after it is intact", sequencer.ErrCorrupt, torn+1, line+1)
		}
		m[r.Name] = r.Marks
		good += int64(end + 1)
	}
	return good, nil
}

// decodeRecord parses one line: 8 hex digits of the CRC-32C of the JSON
// after the space, the space, the JSON of a logRecord whose name and
// marks are valid.
func decodeRecord(line []byte) (logRecord, bool) {
	var r logRecord
	if len(line) < 10 || line[8] != ' ' {
		return r, false
	}
	var sum [4]byte
	if _, err := hex.Decode(sum[:], line[:8]); err != nil {
		return r, false
	}
	body := line[9:]
	if crc32.Checksum(body, crcTable) != uint32(sum[0])<<24|uint32(sum[1])<<16|uint32(sum[2])<<8|uint32(sum[3]) {
		return r, false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, false
	}
	if sequencer.CheckName(r.Name) != nil || r.Marks.Validate() != nil {
		return r, false
	}
	return r, true
}

// encodeRecord is the log line of r.
func encodeRecord(r logRecord) ([]byte, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(body)+10)
	out = fmt.Appendf(out, "%08x ", crc32.Checksum(body, crcTable))
	out = append(out, body...)
	return append(out, '\n'), nil
}

// Check admits s unless it is superseded (the rule of sequencer.Fence).
// A raise is first made durable in the log; if that fails, Check returns
// the I/O error and admits nothing. It returns an error wrapping
// sequencer.ErrStale for a superseded sequencer, ErrMalformed for an
// invalid one, ErrFull for a new name past MaxNames and
// sequencer.ErrClosed after Close.
func (st *Store) Check(s sequencer.Sequencer) error {
	st.mu.RLock()
	closed, cur := st.closed, st.marks[s.Name]
	st.mu.RUnlock()
	if closed {
		return fmt.Errorf("fence check %s: %w", st.path, sequencer.ErrClosed)
	}
	if _, raised, err := cur.Admit(s); err != nil || !raised {
		return err
	}
	st.wmu.Lock()
	defer st.wmu.Unlock()
	st.mu.RLock()
	closed, cur = st.closed, st.marks[s.Name]
	_, had := st.marks[s.Name]
	names := len(st.marks)
	st.mu.RUnlock()
	if closed {
		return fmt.Errorf("fence check %s: %w", st.path, sequencer.ErrClosed)
	}
	next, raised, err := cur.Admit(s) // another raise may have come since
	if err != nil || !raised {
		return err
	}
	if !had && names >= st.maxNames {
		return fmt.Errorf("fence check: lock %q: %w: it keeps the marks of %d lock names, its limit", s.Name, ErrFull, names)
	}
	if err := st.appendRecord(logRecord{Name: s.Name, Marks: next}); err != nil {
		return fmt.Errorf("fence check: record %v in %s: %w", s, st.logPath, err)
	}
	st.mu.Lock()
	st.marks[s.Name] = next
	st.mu.Unlock()
	if st.logSize > st.compactLimit() {
		// The raise is durable already; a failed compaction leaves the
		// log as it was and is tried again at the next raise.
		_ = st.compact()
	}
	return nil
}

// compactLimit is the log size past which a raise compacts.
func (st *Store) compactLimit() int64 {
	if st.compactBytes > 0 {
		return st.compactBytes
	}
	return max(256<<10, 2*st.snapSize)
}

// appendRecord appends r to the log and fsyncs it. On a failure it cuts
// the log back to its length before, so that no later record follows a
// damaged one. The caller holds wmu.
func (st *Store) appendRecord(r logRecord) error {
	line, err := encodeRecord(r)
	if err != nil {
		return err
	}
	if _, err := st.log.Write(line); err != nil {
		return st.rewind(err)
	}
	if err := st.log.Sync(); err != nil {
		return st.rewind(err)
	}
	st.logSize += int64(len(line))
	return nil
}

// rewind undoes a failed append: it truncates the log to its last good
// length and returns err.
func (st *Store) rewind(err error) error {
	if terr := st.log.Truncate(st.logSize); terr != nil {
		return errors.Join(err, terr)
	}
	if _, serr := st.log.Seek(st.logSize, io.SeekStart); serr != nil {
		return errors.Join(err, serr)
	}
	return err
}

// compact writes the marks into a new snapshot and then empties the log.
// A crash between the two leaves a log whose records, replayed over the
// new snapshot, give the same marks: the snapshot holds each name's last
// record. The caller holds wmu.
func (st *Store) compact() error {
	st.mu.RLock()
	data, err := sequencer.EncodeState(st.marks)
	st.mu.RUnlock()
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(st.path, data); err != nil {
		return fmt.Errorf("compact %s: %w", st.path, err)
	}
	st.snapSize = int64(len(data))
	if err := st.log.Truncate(0); err != nil {
		return fmt.Errorf("compact %s: empty the log: %w", st.path, err)
	}
	if _, err := st.log.Seek(0, io.SeekStart); err != nil {
		return err
	}
	st.logSize = 0
	if err := st.log.Sync(); err != nil {
		return fmt.Errorf("compact %s: fsync the log: %w", st.path, err)
	}
	return nil
}

// Current reports whether st would admit s now, without recording it;
// false after Close.
func (st *Store) Current(s sequencer.Sequencer) bool {
	st.mu.RLock()
	closed, cur := st.closed, st.marks[s.Name]
	st.mu.RUnlock()
	if closed {
		return false
	}
	_, _, err := cur.Admit(s)
	return err == nil
}

// Raises reports whether admitting s would raise a mark: the proxy asks
// the cluster about such a sequencer before it checks it.
func (st *Store) Raises(s sequencer.Sequencer) bool {
	st.mu.RLock()
	cur := st.marks[s.Name]
	st.mu.RUnlock()
	_, raised, err := cur.Admit(s)
	return err == nil && raised
}

// Marks returns the marks of the named lock and whether st has any.
func (st *Store) Marks(name string) (sequencer.Marks, bool) {
	st.mu.RLock()
	defer st.mu.RUnlock()
	m, ok := st.marks[name]
	return m, ok
}

// Names returns how many lock names st keeps marks of.
func (st *Store) Names() int {
	st.mu.RLock()
	defer st.mu.RUnlock()
	return len(st.marks)
}

// Close stops the store (later Checks fail with sequencer.ErrClosed) and
// closes its log. Every admitted raise is durable already.
func (st *Store) Close() error {
	st.wmu.Lock()
	defer st.wmu.Unlock()
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return nil
	}
	st.closed = true
	return st.log.Close()
}
