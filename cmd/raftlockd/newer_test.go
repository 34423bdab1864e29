package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/raftlock/raftlock/cmd/internal/proccluster"
	"github.com/raftlock/raftlock/fsm"
)

// A node rolled back after an upgrade finds, in its log, a command of a
// version its build cannot read, with its checksum intact: it refuses to
// start with "data dir written by a newer build" (the version found, the
// versions it reads, "run a newer build"), exit status 4, and never says
// the data dir is damaged nor advises to wipe it.
func TestNewerBuildsDataDirIsNotCalledDamaged(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs raftlockd processes")
	}
	bin := proccluster.BuildDaemon(t)
	c := proccluster.Start(t, bin, 3, "--log-store", "boltdb")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ld, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f := (ld + 1) % 3
	if code, err := c.Stop(f, 30*time.Second); err != nil || code != 0 {
		t.Fatalf("stop %s: exit %d, %v", c.Nodes[f].ID, code, err)
	}
	// What a newer build's leader would have sent it: the next entry, in
	// command version fsm.Version+1, checksummed.
	db := filepath.Join(c.Flag(f, "--data-dir"), "raft.db")
	store, err := raftboltdb.NewBoltStore(db)
	if err != nil {
		t.Fatal(err)
	}
	last, err := store.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	var prev raft.Log
	if err := store.GetLog(last, &prev); err != nil {
		t.Fatal(err)
	}
	cmd := fsm.Command{Type: fsm.CmdRelease, Now: time.Now().UnixNano(), Release: &fsm.LockRef{Lock: "a", Session: "s", Holder: "h"}}
	data, err := cmd.Encode()
	if err != nil {
		t.Fatal(err)
	}
	data[0] = fsm.Version + 1
	end := len(data) - 4
	binary.BigEndian.PutUint32(data[end:], crc32.Checksum(data[:end], crc32.MakeTable(crc32.Castagnoli)))
	if err := store.StoreLog(&raft.Log{Index: last + 1, Term: prev.Term, Type: raft.LogCommand, Data: data}); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	c.Restart(f)
	code, err := c.Wait(f, time.Minute)
	log := c.Nodes[f].Log()
	if err != nil || code != 4 {
		t.Fatalf("the rolled-back node: exit %d, %v; want 4\n%s", code, err, log)
	}
	for _, want := range []string{"data dir written by a newer build", db, fmt.Sprintf("command version %d", fsm.Version+1),
		fmt.Sprintf("reads versions 1 to %d", fsm.Version), "run a newer build", "not damaged"} {
		if !strings.Contains(log, want) {
			t.Errorf("the rolled-back node's log does not say %q:\n%s", want, log)
		}
	}
	for _, never := range []string{"data dir damaged", "wipe this data dir", "is corrupt"} {
		if strings.Contains(log, never) {
			t.Errorf("the rolled-back node's log says %q of a sound data dir:\n%s", never, log)
		}
	}
}
