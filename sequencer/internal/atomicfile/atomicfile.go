// Package atomicfile replaces files so that a crash at any point leaves
// the old contents or the new, never a mix: a temporary file in the same
// directory, fsynced, renamed over the file, and the directory fsynced.
// FileFence and fence-proxy's store both keep their marks this way, with
// the same temporary names, so that either removes the other's leftovers.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// TempPrefix is the name prefix of the temporary files used to rewrite path.
func TempPrefix(path string) string {
	return "." + filepath.Base(path) + ".tmp-"
}

// WriteFile replaces the file at path with data so that, after a crash
// at any point, the file holds either its old or its new contents: it writes a
// temporary file in the same directory, fsyncs it, renames it over path and
// fsyncs the directory so that the rename itself is durable.
func WriteFile(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, TempPrefix(path)+"*")
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
	if err := SyncDir(dir); err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

// SyncDir fsyncs a directory, making renames within it durable. Windows
// cannot fsync a directory (and does not need to), so it is a no-op there.
func SyncDir(dir string) error {
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

// RemoveTemps deletes temporary files left next to path by a write that a
// crash interrupted. Failures are ignored: a leftover file is harmless.
func RemoveTemps(path string) {
	dir := filepath.Dir(path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	p := TempPrefix(path)
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasPrefix(e.Name(), p) {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
