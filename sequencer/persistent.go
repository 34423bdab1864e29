package sequencer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/raftlock/raftlock/sequencer/internal/atomicfile"
	"io"
	"io/fs"
	"os"
	"sync"
)

// ErrCorrupt is returned (wrapped) by OpenFileFence when the state file exists
// but does not hold a valid fence state.
var ErrCorrupt = errors.New("corrupt fence state file")

// ErrClosed is returned (wrapped) by FileFence.Check after Close.
var ErrClosed = errors.New("fence is closed")

// The state file is one JSON object. FileFence writes layout version 2:
//
//	{
//	  "format": "raftlock-fence/2",
//	  "highest": {"<lock>": <highest token of any mode>, ...},
//	  "highest_exclusive": {"<lock>": <highest exclusive token>, ...}
//	}
//
// Every lock has an entry in "highest". A lock has one in "highest_exclusive"
// only once an exclusive token of it has been admitted, and that token is at
// most the lock's "highest". "highest" means what it meant in version 1, so
// the versions differ only by the added map.
//
// Version 3 ("raftlock-fence/3") is version 2 plus the slot marks of
// semaphores:
//
//	"highest_slot": {"<lock>": {"<slot>": <highest token of the slot>, ...}, ...}
//
// Every slot mark is at most its lock's "highest". It is written only while
// the fence holds a slot mark, so that a fence that never saw a semaphore
// keeps writing version 2, which older releases read.
//
// Version 4 ("raftlock-fence/4") is version 3 plus the tenure marks (see
// Fence):
//
//	"config": {"<lock>": <permits of the semaphore whose grant set "highest">, ...},
//	"other": {"<lock>": <highest token of another kind or permits>, ...}
//
// A lock has a "config" entry only while its highest token is a semaphore
// slot's (1 to 256; none means a plain lock's), and an "other" entry only
// once a token of another kind or permits was admitted below its highest
// (at most its "highest"). It is written whenever the fence holds a slot,
// config or other mark; a fence that never saw a semaphore keeps writing
// version 2. Version 3 is still read: it did not record the permits of its
// slot marks, so a lock with slot marks is read conservatively, as if every
// grant below its highest token were of another tenure when that token is a
// slot's (a slot holder below it is refused until its slot is granted
// again), and with its highest slot token as "other" when it is not.
//
// Version 1 ("raftlock-fence/1") has only "highest": that fence ignored the
// mode. It is still read, each entry as both marks of its lock, which rejects
// everything the version 1 fence rejected. The first write after opening such
// a file writes version 2.
const (
	fileFormat   = "raftlock-fence/2"
	fileFormatV1 = "raftlock-fence/1"
	fileFormatV3 = "raftlock-fence/3"
	fileFormatV4 = "raftlock-fence/4"
)

// fileState is the JSON layout of a version 2, 3 or 4 state file
// (HighestSlot only in versions 3 and 4, Config and Other only in 4).
type fileState struct {
	Format           string                      `json:"format"`
	Highest          map[string]Token            `json:"highest"`
	HighestExclusive map[string]Token            `json:"highest_exclusive"`
	HighestSlot      map[string]map[uint64]Token `json:"highest_slot,omitempty"`
	Config           map[string]uint64           `json:"config,omitempty"`
	Other            map[string]Token            `json:"other,omitempty"`
}

// fileStateV1 is the JSON layout of a version 1 state file.
type fileStateV1 struct {
	Format  string           `json:"format"`
	Highest map[string]Token `json:"highest"`
}

// FileFence is a Fence whose marks survive restarts: it admits the same
// sequencers as a Fence (see Fence for the tenure and mode rules), and
// stores its marks per lock in a file that is rewritten atomically
// (temporary file, fsync, rename, fsync of the directory) whenever a Check
// raises a mark, before Check admits the sequencer. A Check that raises no
// mark (in particular one whose token equals the marks it meets) does no
// I/O.
//
// One FileFence, in one process, must own a state file at a time. Raising a
// mark costs a file write and two fsyncs, and Checks that raise one are
// serialized. A FileFence is safe for concurrent use.
type FileFence struct {
	path string

	mu     sync.RWMutex
	marks  map[string]marks
	closed bool
}

// OpenFileFence opens the fence whose state is kept in the file at path,
// creating the file (but not its directory) if it does not exist. It reads
// the current layout and the version 1 layout of older releases, which it
// leaves in place until the first Check that raises a mark. It returns an
// error wrapping ErrCorrupt if the file exists but does not hold a valid
// state, and the I/O error if the file cannot be read or created. Temporary
// files left next to path by an interrupted write are removed.
func OpenFileFence(path string) (*FileFence, error) {
	if path == "" {
		return nil, errors.New("open fence: empty path")
	}
	f := &FileFence{path: path, marks: make(map[string]marks)}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := f.persist(); err != nil {
			return nil, fmt.Errorf("open fence %s: create state file: %w", path, err)
		}
	case err != nil:
		return nil, fmt.Errorf("open fence %s: %w", path, err)
	default:
		m, err := decodeState(data)
		if err != nil {
			return nil, fmt.Errorf("open fence %s: %w", path, err)
		}
		f.marks = m
	}
	atomicfile.RemoveTemps(path)
	return f, nil
}

// decodeState parses and validates the state file's contents, of either
// layout version. Errors wrap ErrCorrupt.
func decodeState(data []byte) (map[string]marks, error) {
	var head struct {
		Format string `json:"format"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	switch head.Format {
	case fileFormat, fileFormatV3, fileFormatV4:
		return decodeV2(data)
	case fileFormatV1:
		return decodeV1(data)
	default:
		return nil, fmt.Errorf("%w: format %q, want %q, %q, %q or %q", ErrCorrupt, head.Format, fileFormatV4, fileFormatV3, fileFormat, fileFormatV1)
	}
}

// decodeV2 decodes a version 2, 3 or 4 state file: "highest" gives each
// lock's any-mode mark, "highest_exclusive" the exclusive marks of some of
// them, "highest_slot" (3, 4) their slot marks, "config" and "other" (4)
// their tenure marks.
func decodeV2(data []byte) (map[string]marks, error) {
	var st fileState
	if err := decodeStrict(data, &st); err != nil {
		return nil, err
	}
	if st.HighestExclusive == nil {
		return nil, fmt.Errorf("%w: missing \"highest_exclusive\"", ErrCorrupt)
	}
	m, err := anyMarks(st.Highest)
	if err != nil {
		return nil, err
	}
	for name, tok := range st.HighestExclusive {
		cur, ok := m[name]
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: lock %q has an exclusive token but no \"highest\" entry", ErrCorrupt, name)
		case tok == 0:
			return nil, fmt.Errorf("%w: lock %q: zero exclusive token", ErrCorrupt, name)
		case tok > cur.any:
			return nil, fmt.Errorf("%w: lock %q: exclusive token %d above the highest token %d", ErrCorrupt, name, tok, cur.any)
		}
		cur.exclusive = tok
		m[name] = cur
	}
	if st.Format == fileFormat && st.HighestSlot != nil {
		return nil, fmt.Errorf("%w: \"highest_slot\" in a %s file", ErrCorrupt, st.Format)
	}
	if st.Format != fileFormatV4 && (st.Config != nil || st.Other != nil) {
		return nil, fmt.Errorf("%w: \"config\" or \"other\" in a %s file", ErrCorrupt, st.Format)
	}
	for name, slots := range st.HighestSlot {
		cur, ok := m[name]
		if !ok {
			return nil, fmt.Errorf("%w: lock %q has slot tokens but no \"highest\" entry", ErrCorrupt, name)
		}
		for slot, tok := range slots {
			switch {
			case slot >= MaxSlots:
				return nil, fmt.Errorf("%w: lock %q: slot %d, the limit is %d", ErrCorrupt, name, slot, MaxSlots-1)
			case tok == 0:
				return nil, fmt.Errorf("%w: lock %q: zero token of slot %d", ErrCorrupt, name, slot)
			case tok > cur.any:
				return nil, fmt.Errorf("%w: lock %q: slot %d token %d above the highest token %d", ErrCorrupt, name, slot, tok, cur.any)
			}
		}
		if len(slots) > 0 {
			cur.slots = slots
			if st.Format == fileFormatV3 {
				cur.other = v3Other(cur)
			}
			m[name] = cur
		}
	}
	if err := decodeTenures(m, st.Config, st.Other); err != nil {
		return nil, err
	}
	return m, nil
}

// v3Other is the other mark of a lock read from a version 3 file, whose
// slot marks do not say their permits: the highest slot token if the
// highest token is above it (a plain grant, so every slot grant is of an
// earlier tenure), else the highest token itself (a slot grant of unknown
// permits: every grant below it is taken for one of another tenure).
func v3Other(cur marks) Token {
	var high Token
	for _, tok := range cur.slots {
		high = max(high, tok)
	}
	if high < cur.any {
		return high
	}
	return cur.any
}

// decodeTenures sets the config and other marks of a version 4 file's
// locks. Errors wrap ErrCorrupt.
func decodeTenures(m map[string]marks, config map[string]uint64, other map[string]Token) error {
	for name, c := range config {
		cur, ok := m[name]
		switch {
		case !ok:
			return fmt.Errorf("%w: lock %q has a config but no \"highest\" entry", ErrCorrupt, name)
		case c == 0 || c > MaxSlots:
			return fmt.Errorf("%w: lock %q: config %d, want permits 1 to %d", ErrCorrupt, name, c, MaxSlots)
		}
		cur.config = c
		m[name] = cur
	}
	for name, tok := range other {
		cur, ok := m[name]
		switch {
		case !ok:
			return fmt.Errorf("%w: lock %q has an other token but no \"highest\" entry", ErrCorrupt, name)
		case tok == 0:
			return fmt.Errorf("%w: lock %q: zero other token", ErrCorrupt, name)
		case tok > cur.any:
			return fmt.Errorf("%w: lock %q: other token %d above the highest token %d", ErrCorrupt, name, tok, cur.any)
		}
		cur.other = tok
		m[name] = cur
	}
	return nil
}

// decodeV1 decodes a version 1 state file, whose fence ignored the mode: each
// entry becomes both marks of its lock, so that nothing the version 1 fence
// rejected is admitted.
func decodeV1(data []byte) (map[string]marks, error) {
	var st fileStateV1
	if err := decodeStrict(data, &st); err != nil {
		return nil, err
	}
	m, err := anyMarks(st.Highest)
	if err != nil {
		return nil, err
	}
	for name, cur := range m {
		cur.exclusive = cur.any
		m[name] = cur
	}
	return m, nil
}

// decodeStrict decodes data, which must be exactly one JSON object with no
// fields unknown to st, into st. Errors wrap ErrCorrupt.
func decodeStrict(data []byte, st any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(st); err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: data after the JSON object", ErrCorrupt)
	}
	return nil
}

// anyMarks validates the "highest" map of a state file and returns marks
// holding its tokens as the any-mode marks. Errors wrap ErrCorrupt.
func anyMarks(highest map[string]Token) (map[string]marks, error) {
	if highest == nil {
		return nil, fmt.Errorf("%w: missing \"highest\"", ErrCorrupt)
	}
	m := make(map[string]marks, len(highest))
	for name, tok := range highest {
		if err := CheckName(name); err != nil {
			return nil, fmt.Errorf("%w: lock %q: %v", ErrCorrupt, name, err)
		}
		if tok == 0 {
			return nil, fmt.Errorf("%w: lock %q: zero token", ErrCorrupt, name)
		}
		m[name] = marks{any: tok}
	}
	return m, nil
}

// encodeState returns the state file holding m: version 4 if m holds a
// slot, config or other mark, else version 2. Map keys are
// marshalled sorted, so the contents are deterministic.
func encodeState(m map[string]marks) ([]byte, error) {
	st := fileState{Format: fileFormat, Highest: make(map[string]Token, len(m)), HighestExclusive: make(map[string]Token)}
	for name, mk := range m {
		st.Highest[name] = mk.any
		if mk.exclusive != 0 {
			st.HighestExclusive[name] = mk.exclusive
		}
		if len(mk.slots) > 0 {
			if st.HighestSlot == nil {
				st.HighestSlot = make(map[string]map[uint64]Token)
			}
			st.HighestSlot[name] = mk.slots
		}
		if mk.config != 0 {
			if st.Config == nil {
				st.Config = make(map[string]uint64)
			}
			st.Config[name] = mk.config
		}
		if mk.other != 0 {
			if st.Other == nil {
				st.Other = make(map[string]Token)
			}
			st.Other[name] = mk.other
		}
	}
	if st.HighestSlot != nil || st.Config != nil || st.Other != nil {
		st.Format = fileFormatV4
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode state: %w", err)
	}
	return append(data, '\n'), nil
}

// persist writes f.marks to the state file atomically. The caller holds
// f.mu (or owns f exclusively).
func (f *FileFence) persist() error {
	data, err := encodeState(f.marks)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(f.path, data)
}

// Check admits s unless it is superseded (see Fence for the rule). If s
// raises a mark of s.Name, the new mark is first made durable in the state
// file; if that fails, Check returns the I/O error and does not admit s. It
// returns an error wrapping ErrStale if s is superseded, one wrapping
// ErrMalformed if s is not a valid sequencer, and one wrapping ErrClosed after
// Close.
func (f *FileFence) Check(s Sequencer) error {
	if err := s.validate(); err != nil {
		return fmt.Errorf("fence check: %w", err)
	}
	f.mu.RLock()
	closed, cur := f.closed, f.marks[s.Name]
	f.mu.RUnlock()
	if closed {
		return fmt.Errorf("fence check %s: %w", f.path, ErrClosed)
	}
	_, raised, err := cur.admit(s)
	if err != nil || !raised {
		return err
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	// Re-read: another Check may have raised a mark, or Close run, since.
	if f.closed {
		return fmt.Errorf("fence check %s: %w", f.path, ErrClosed)
	}
	cur, had := f.marks[s.Name]
	next, raised, err := cur.admit(s)
	if err != nil || !raised {
		return err
	}
	return f.record(s, cur, next, had)
}

// record sets the marks of s.Name from cur to next and persists them,
// restoring cur (or no entry, if !had) when that fails. The caller holds
// f.mu.
func (f *FileFence) record(s Sequencer, cur, next marks, had bool) error {
	f.marks[s.Name] = next
	err := f.persist()
	if err == nil {
		return nil
	}
	if had {
		f.marks[s.Name] = cur
	} else {
		delete(f.marks, s.Name)
	}
	return fmt.Errorf("fence check: record %v token %d of lock %q in %s: %w", s.Mode, s.Token, s.Name, f.path, err)
}

// CheckString parses text (the printable form of a sequencer) and checks it
// as Check does. Parse errors wrap ErrMalformed.
func (f *FileFence) CheckString(text string) error {
	s, err := Parse(text)
	if err != nil {
		return fmt.Errorf("fence check: %w", err)
	}
	return f.Check(s)
}

// Highest returns the highest token, of either mode, recorded for the named
// lock, or 0 if the fence has recorded none.
func (f *FileFence) Highest(name string) Token {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.marks[name].any
}

// HighestExclusive returns the highest exclusive token recorded for the named
// lock, or 0 if the fence has recorded none. Shared sequencers with a lower
// token are stale.
func (f *FileFence) HighestExclusive(name string) Token {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.marks[name].exclusive
}

// HighestSlot returns the highest token recorded for slot of the named
// semaphore, or 0 if the fence has recorded none.
func (f *FileFence) HighestSlot(name string, slot uint64) Token {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.marks[name].slots[slot]
}

// Close stops the fence: later Checks fail with ErrClosed. Every recorded
// token is already durable, so Close does no I/O. Closing twice is harmless.
func (f *FileFence) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

// Current reports whether f would admit s now, without recording it (see
// Fence.Current); false after Close.
func (f *FileFence) Current(s Sequencer) bool {
	if s.validate() != nil {
		return false
	}
	f.mu.RLock()
	closed, cur := f.closed, f.marks[s.Name]
	f.mu.RUnlock()
	if closed {
		return false
	}
	_, _, err := cur.admit(s)
	return err == nil
}
