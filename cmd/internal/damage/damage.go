// Package damage damages a stopped raftlock node's files the way disks do,
// for the tests and the fault checker that prove damage is caught.
package damage

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// NewestCommandInFile overwrites n bytes of every copy of the newest
// command in the raft.db at path with random bytes from rng: the copy in
// the live log, and the stale ones bbolt leaves in free pages (damage at
// all of them is sure to reach the live log). The command is found
// through raft-boltdb, read-only, so that it is found in either command
// format (a binary command carries no marker to search for); its copies
// are found by their bytes. The damage lies between the command's version
// and type bytes and its CRC-32C, so that its checksum fails.
func NewestCommandInFile(path string, n int, rng *rand.Rand) error {
	cmd, err := newestBoltCommand(path)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("damage: %w", err)
	}
	var ats []int
	for at := 0; ; at++ {
		i := bytes.Index(data[at:], cmd)
		if i < 0 {
			break
		}
		at += i
		ats = append(ats, at)
	}
	if len(ats) == 0 {
		return fmt.Errorf("damage: the newest command's bytes are not in %s", path)
	}
	for _, at := range ats {
		from, to := commandSpan(at, len(cmd), n)
		rng.Read(data[from:to])
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("damage: %w", err)
	}
	return nil
}

// newestBoltCommand reads the data of the newest command entry (a
// raft.LogCommand of at least 8 bytes) of the raft.db at path.
func newestBoltCommand(path string) ([]byte, error) {
	db, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: &bbolt.Options{ReadOnly: true, Timeout: time.Second}})
	if err != nil {
		return nil, fmt.Errorf("damage: open %s: %w", path, err)
	}
	defer db.Close()
	first, err := db.FirstIndex()
	if err != nil {
		return nil, fmt.Errorf("damage: %s: %w", path, err)
	}
	last, err := db.LastIndex()
	if err != nil {
		return nil, fmt.Errorf("damage: %s: %w", path, err)
	}
	var l raft.Log
	for i := last; i >= first && i > 0; i-- {
		if err := db.GetLog(i, &l); err != nil {
			continue
		}
		if l.Type == raft.LogCommand && len(l.Data) >= 8 {
			return l.Data, nil
		}
	}
	return nil, fmt.Errorf("damage: no command in %s", path)
}
