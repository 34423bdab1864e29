package sequencer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// ErrCorrupt is returned (wrapped) by OpenFileFence when the state file exists
// but does not hold a valid fence state.
var ErrCorrupt = errors.New("corrupt fence state file")

// ErrClosed is returned (wrapped) by FileFence.Check after Close.
var ErrClosed = errors.New("fence is closed")

// fileFormat names the version of the state file's layout.
const fileFormat = "raftlock-fence/1"

// fileState is the JSON layout of a FileFence's state file.
type fileState struct {
	Format  string           `json:"format"`
	Highest map[string]Token `json:"highest"`
}

// FileFence is a Fence whose high-water marks survive restarts: they are
// stored in a file that is rewritten atomically (temporary file, fsync,
// rename, fsync of the directory) whenever a new highest token is recorded,
// before Check admits the sequencer. A token equal to the recorded highest is
// admitted without any I/O.
//
// One FileFence, in one process, must own a state file at a time. Recording a
// new highest token costs a file write and two fsyncs, and Checks that record
// one are serialized. A FileFence is safe for concurrent use.
type FileFence struct {
	path string

	mu      sync.RWMutex
	highest map[string]Token
	closed  bool
}

// OpenFileFence opens the fence whose state is kept in the file at path,
// creating the file (but not its directory) if it does not exist. It returns
// an error wrapping ErrCorrupt if the file exists but does not hold a valid
// state, and the I/O error if the file cannot be read or created. Temporary
// files left next to path by an interrupted write are removed.
func OpenFileFence(path string) (*FileFence, error) {
	if path == "" {
		return nil, errors.New("open fence: empty path")
	}
	f := &FileFence{path: path, highest: make(map[string]Token)}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := f.persist(); err != nil {
			return nil, fmt.Errorf("open fence %s: create state file: %w", path, err)
		}
	case err != nil:
		return nil, fmt.Errorf("open fence %s: %w", path, err)
	default:
		h, err := decodeState(data)
		if err != nil {
			return nil, fmt.Errorf("open fence %s: %w", path, err)
		}
		f.highest = h
	}
	removeTemps(path)
	return f, nil
}

// decodeState parses and validates the state file's contents. Errors wrap
// ErrCorrupt.
func decodeState(data []byte) (map[string]Token, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var st fileState
	if err := dec.Decode(&st); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: data after the JSON object", ErrCorrupt)
	}
	if st.Format != fileFormat {
		return nil, fmt.Errorf("%w: format %q, want %q", ErrCorrupt, st.Format, fileFormat)
	}
	if st.Highest == nil {
		return nil, fmt.Errorf("%w: missing \"highest\"", ErrCorrupt)
	}
	for name, tok := range st.Highest {
		if err := validateName(name); err != nil {
			return nil, fmt.Errorf("%w: lock %q: %v", ErrCorrupt, name, err)
		}
		if tok == 0 {
			return nil, fmt.Errorf("%w: lock %q: zero token", ErrCorrupt, name)
		}
	}
	return st.Highest, nil
}

// persist writes f.highest to the state file atomically. The caller holds
// f.mu (or owns f exclusively). Map keys are marshalled sorted, so the file's
// contents are deterministic.
func (f *FileFence) persist() error {
	data, err := json.MarshalIndent(fileState{Format: fileFormat, Highest: f.highest}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	return writeFileAtomic(f.path, append(data, '\n'))
}

// Check admits s if its token is at least the highest token recorded for
// s.Name. A higher token is first made durable in the state file; if that
// fails, Check returns the I/O error and does not admit s. It returns an error
// wrapping ErrStale if the token is lower, one wrapping ErrMalformed if s is
// not a valid sequencer, and one wrapping ErrClosed after Close.
func (f *FileFence) Check(s Sequencer) error {
	if err := s.validate(); err != nil {
		return fmt.Errorf("fence check: %w", err)
	}
	f.mu.RLock()
	closed, high := f.closed, f.highest[s.Name]
	f.mu.RUnlock()
	switch {
	case closed:
		return fmt.Errorf("fence check %s: %w", f.path, ErrClosed)
	case s.Token < high:
		return staleError(s, high)
	case s.Token == high:
		return nil
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	// Re-read: another Check may have recorded a token, or Close run, since.
	old, had := f.highest[s.Name]
	switch {
	case f.closed:
		return fmt.Errorf("fence check %s: %w", f.path, ErrClosed)
	case s.Token < old:
		return staleError(s, old)
	case s.Token == old:
		return nil
	}
	f.highest[s.Name] = s.Token
	if err := f.persist(); err != nil {
		if had {
			f.highest[s.Name] = old
		} else {
			delete(f.highest, s.Name)
		}
		return fmt.Errorf("fence check: record token %d of lock %q in %s: %w", s.Token, s.Name, f.path, err)
	}
	return nil
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

// Highest returns the highest token recorded for the named lock, or 0 if the
// fence has recorded none.
func (f *FileFence) Highest(name string) Token {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.highest[name]
}

// Close stops the fence: later Checks fail with ErrClosed. Every recorded
// token is already durable, so Close does no I/O. Closing twice is harmless.
func (f *FileFence) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

// tempPrefix is the name prefix of the temporary files used to rewrite path.
func tempPrefix(path string) string {
	return "." + filepath.Base(path) + ".tmp-"
}

// writeFileAtomic replaces the file at path with data so that, after a crash
// at any point, the file holds either its old or its new contents: it writes a
// temporary file in the same directory, fsyncs it, renames it over path and
// fsyncs the directory so that the rename itself is durable.
func writeFileAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, tempPrefix(path)+"*")
	if err != nil {
		return fmt.Errorf("create temporary file: %w", err)
	}
	renamed := false
	defer func() {
		if !renamed {
			_ = tmp.Close() // already closed on the success path; error irrelevant
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("rename %s: %w", tmp.Name(), err)
	}
	renamed = true
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

// syncDir fsyncs a directory, making renames within it durable. Windows
// cannot fsync a directory (and does not need to), so it is a no-op there.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		_ = d.Close()
		return err
	}
	return d.Close()
}

// removeTemps deletes temporary files left next to path by a write that a
// crash interrupted. Failures are ignored: a leftover file is harmless.
func removeTemps(path string) {
	dir := filepath.Dir(path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	p := tempPrefix(path)
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasPrefix(e.Name(), p) {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
