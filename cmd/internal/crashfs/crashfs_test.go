package crashfs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mountT mounts a crashfs for the test, skipping where FUSE cannot be
// mounted (not root, no /dev/fuse) unless CI is set.
func mountT(t *testing.T) *FS {
	t.Helper()
	c, err := MountT(t)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func write(t *testing.T, p, s string, sync bool) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func syncDir(t *testing.T, p string) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func crash(t *testing.T, c *FS) {
	t.Helper()
	if err := c.Crash(); err != nil {
		t.Fatal(err)
	}
}

func content(t *testing.T, p string) (string, bool) {
	t.Helper()
	b, err := os.ReadFile(p)
	if os.IsNotExist(err) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

func TestCrashKeepsOnlyWhatWasFsynced(t *testing.T) {
	c := mountT(t)
	d := c.Dir()
	write(t, filepath.Join(d, "synced"), "a", true)          // file synced, name not yet
	write(t, filepath.Join(d, "unsynced"), "b", false)       // neither
	write(t, filepath.Join(d, "both"), "old", true)          // file and name synced
	syncDir(t, d)                                            // names of all three durable
	write(t, filepath.Join(d, "both"), "new content", false) // overwritten, not synced
	write(t, filepath.Join(d, "late"), "c", true)            // file synced, name never
	crash(t, c)
	if s, ok := content(t, filepath.Join(d, "synced")); !ok || s != "a" {
		t.Fatalf("synced = %q %v, want a", s, ok)
	}
	if s, ok := content(t, filepath.Join(d, "unsynced")); !ok || s != "" {
		t.Fatalf("unsynced = %q %v, want an empty file (name durable, content never fsynced)", s, ok)
	}
	if s, _ := content(t, filepath.Join(d, "both")); s != "old" {
		t.Fatalf("both = %q, want old (the overwrite was not fsynced)", s)
	}
	if _, ok := content(t, filepath.Join(d, "late")); ok {
		t.Fatal("late survived, but its name was never fsynced into the directory")
	}
}

func TestCrashUndoesUnsyncedDirectoryChanges(t *testing.T) {
	c := mountT(t)
	d := c.Dir()
	sub := filepath.Join(d, "sub")
	if err := os.Mkdir(sub+".tmp", 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(sub+".tmp", "f"), "x", true)
	if err := os.Rename(sub+".tmp", sub); err != nil {
		t.Fatal(err)
	}
	syncDir(t, d) // "sub" durable in d, but sub's own entries never fsynced
	write(t, filepath.Join(d, "gone"), "g", true)
	syncDir(t, d)
	if err := os.Remove(filepath.Join(d, "gone")); err != nil { // removal not fsynced
		t.Fatal(err)
	}
	crash(t, c)
	ents, err := os.ReadDir(sub)
	if err != nil {
		t.Fatalf("sub: %v", err)
	}
	if len(ents) != 0 {
		t.Fatalf("sub holds %d entries, want none (never fsynced)", len(ents))
	}
	if s, ok := content(t, filepath.Join(d, "gone")); !ok || s != "g" {
		t.Fatalf("gone = %q %v: an unsynced removal must be undone", s, ok)
	}

	// The same, done durably, survives.
	if err := os.Mkdir(sub+"2.tmp", 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(sub+"2.tmp", "f"), "y", true)
	syncDir(t, sub+"2.tmp")
	if err := os.Rename(sub+"2.tmp", sub+"2"); err != nil {
		t.Fatal(err)
	}
	syncDir(t, d)
	crash(t, c)
	if s, _ := content(t, filepath.Join(sub+"2", "f")); s != "y" {
		t.Fatalf("sub2/f = %q, want y", s)
	}
	if _, err := os.Stat(sub + "2.tmp"); err == nil {
		t.Fatal("sub2.tmp is back after a durable rename")
	}
}

func TestCrashRestoresOverwrittenBytesAndSize(t *testing.T) {
	c := mountT(t)
	p := filepath.Join(c.Dir(), "f")
	write(t, p, "0123456789", true)
	syncDir(t, c.Dir())
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("abc"), 8); err != nil { // overwrites and extends
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("Z"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(4); err != nil {
		t.Fatal(err)
	}
	f.Close()
	crash(t, c)
	if s, _ := content(t, p); s != "0123456789" {
		t.Fatalf("f = %q, want the fsynced 0123456789", s)
	}
}

// TestSyncMakesEverythingDurableAndFreesRemovedFiles: Sync is sync(2) for
// the whole filesystem: a later crash keeps every write, name and removal
// made before it, and the removed files no longer hold space in the
// graveyard.
func TestSyncMakesEverythingDurableAndFreesRemovedFiles(t *testing.T) {
	c := mountT(t)
	d := c.Dir()
	write(t, filepath.Join(d, "gone"), strings.Repeat("x", 1<<20), true)
	syncDir(t, d)
	if err := os.Remove(filepath.Join(d, "gone")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(d, "kept"), "k", false) // neither content nor name fsynced
	if ents, _ := os.ReadDir(c.grave()); len(ents) != 1 {
		t.Fatalf("graveyard holds %d entries before Sync, want the removed file", len(ents))
	}
	if err := c.Sync(); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(c.grave()); len(ents) != 0 {
		t.Fatalf("graveyard holds %d entries after Sync, want none", len(ents))
	}
	crash(t, c)
	if s, ok := content(t, filepath.Join(d, "kept")); !ok || s != "k" {
		t.Fatalf("kept = %q %v after Sync and a crash, want k", s, ok)
	}
	if _, ok := content(t, filepath.Join(d, "gone")); ok {
		t.Fatal("a file removed before Sync came back after a crash")
	}
}

// TestDurableRemovalFreesTheBuriedFile: a removed file stays buried (a
// crash may bring it back) until the removal is durable, a fsync of its
// directory; then its space is free, and a crash leaves it removed.
func TestDurableRemovalFreesTheBuriedFile(t *testing.T) {
	c := mountT(t)
	d := c.Dir()
	write(t, filepath.Join(d, "old"), strings.Repeat("x", 1<<20), true)
	syncDir(t, d)
	if err := os.Remove(filepath.Join(d, "old")); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(c.grave()); len(ents) != 1 {
		t.Fatalf("graveyard holds %d entries, want the removed file until its removal is durable", len(ents))
	}
	syncDir(t, d)
	if ents, _ := os.ReadDir(c.grave()); len(ents) != 0 {
		t.Fatalf("graveyard holds %d entries after the removal was made durable, want none", len(ents))
	}
	crash(t, c)
	if _, ok := content(t, filepath.Join(d, "old")); ok {
		t.Fatal("a durably removed file came back after a crash")
	}
}
