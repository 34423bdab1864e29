package node

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

func tmpDirs(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, snapshotsDirName))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if filepath.Ext(e.Name()) == snapshotTmpSuffix {
			out = append(out, e.Name())
		}
	}
	return out
}

// Unfinished snapshot directories are removed at open and after a failed
// snapshot, but never one a sink still writes.
func TestSnapshotStoreRemovesLeftoversButNotOpenSinks(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, snapshotsDirName, "1-2-3.tmp"), 0o750); err != nil {
		t.Fatal(err)
	}
	var results []error
	s, err := openSnapshotStore(dir, hclog.NewNullLogger(), func(err error) { results = append(results, err) })
	if err != nil {
		t.Fatal(err)
	}
	if left := tmpDirs(t, dir); len(left) != 0 {
		t.Fatalf("leftovers after open: %v", left)
	}
	_, trans := raft.NewInmemTransport("")
	open1, err := s.Create(raft.SnapshotVersionMax, 10, 1, raft.Configuration{}, 1, trans)
	if err != nil {
		t.Fatal(err)
	}
	failing, err := s.Create(raft.SnapshotVersionMax, 11, 1, raft.Configuration{}, 1, trans)
	if err != nil {
		t.Fatal(err)
	}
	// A Close that fails (its directory is gone) cleans up, and spares the
	// sink still open.
	if err := os.RemoveAll(filepath.Join(dir, snapshotsDirName, failing.ID()+snapshotTmpSuffix)); err != nil {
		t.Fatal(err)
	}
	if err := failing.Close(); err == nil {
		t.Fatal("Close of a snapshot whose directory vanished succeeded")
	}
	if left := tmpDirs(t, dir); len(left) != 1 || left[0] != open1.ID()+snapshotTmpSuffix {
		t.Fatalf("after a failed snapshot: %v, want only the open sink's", left)
	}
	if _, err := open1.Write([]byte("state")); err != nil {
		t.Fatal(err)
	}
	if err := open1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := open1.Close(); err != nil { // Persist closes, then Raft again
		t.Fatalf("second Close: %v", err)
	}
	if left := tmpDirs(t, dir); len(left) != 0 {
		t.Fatalf("leftovers: %v", left)
	}
	if len(results) != 2 || results[0] == nil || results[1] != nil {
		t.Fatalf("results %v, want a failure then a success", results)
	}
	metas, err := s.List()
	if err != nil || len(metas) != 1 || metas[0].ID != open1.ID() {
		t.Fatalf("List: %v %v", metas, err)
	}
}
