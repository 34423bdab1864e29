package damage

import (
	"bytes"
	"math/rand"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/raftlock/raftlock/fsm"
)

// TestBoltDamageFindsTheNewestBinaryCommand: a binary command carries no
// JSON envelope to search for; the damage finds the newest command entry
// of a raft.db through raft-boltdb and damages it so that its checksum
// fails, leaving older commands and newer non-command entries whole.
func TestBoltDamageFindsTheNewestBinaryCommand(t *testing.T) {
	cmd := func(now int64) []byte {
		c := fsm.Command{Type: fsm.CmdCloseSession, Now: now, CloseSession: &fsm.SessionRef{ID: "0123456789abcdef0123456789abcdef"}}
		b, err := c.EncodeAs(fsm.VersionBinary)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	older, newest := cmd(1), cmd(2)
	path := filepath.Join(t.TempDir(), "raft.db")
	db, err := raftboltdb.NewBoltStore(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.StoreLogs([]*raft.Log{
		{Index: 1, Term: 1, Type: raft.LogCommand, Data: older},
		{Index: 2, Term: 1, Type: raft.LogCommand, Data: newest},
		{Index: 3, Term: 1, Type: raft.LogNoop},
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := NewestCommandInFile(path, 32, rand.New(rand.NewSource(1))); err != nil {
		t.Fatal(err)
	}
	db, err = raftboltdb.NewBoltStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var l raft.Log
	if err := db.GetLog(2, &l); err != nil {
		t.Fatal(err)
	}
	if _, err := fsm.Decode(l.Data); err == nil {
		t.Fatal("the newest command still decodes after the damage")
	}
	if err := db.GetLog(1, &l); err != nil || !bytes.Equal(l.Data, older) {
		t.Fatalf("the older command changed: %v", err)
	}
	if err := db.GetLog(3, &l); err != nil || l.Type != raft.LogNoop {
		t.Fatalf("the no-op entry changed: %v", err)
	}
}
