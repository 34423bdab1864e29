// Package damage damages a stopped raftlock node's files the way disks do,
// for the tests and the fault checker that prove damage is caught.
package damage

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"strconv"
)

// commandStart begins the JSON envelope of every raftlock command.
var commandStart = []byte(`{"now":`)

// NewestCommand returns the offsets in data (a raft.db) of every copy of
// the newest command (the highest stamped clock): the copy in the live
// log, and the stale ones bbolt leaves in free pages. Damage at all of
// them is sure to reach the live log.
func NewestCommand(data []byte) []int {
	newest, ats := int64(-1), []int(nil)
	for at := 0; ; at++ {
		i := bytes.Index(data[at:], commandStart)
		if i < 0 {
			return ats
		}
		at += i
		end := at + len(commandStart)
		j := end
		for j < len(data) && j < end+20 && data[j] >= '0' && data[j] <= '9' {
			j++
		}
		now, err := strconv.ParseInt(string(data[end:j]), 10, 64)
		if err != nil {
			continue
		}
		switch {
		case now > newest:
			newest, ats = now, []int{at}
		case now == newest:
			ats = append(ats, at)
		}
	}
}

// NewestCommandInFile overwrites n bytes of every copy of the newest
// command in the raft.db at path with random bytes from rng.
func NewestCommandInFile(path string, n int, rng *rand.Rand) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("damage: %w", err)
	}
	ats := NewestCommand(data)
	if len(ats) == 0 {
		return fmt.Errorf("damage: no command in %s", path)
	}
	for _, at := range ats {
		rng.Read(data[at:min(len(data), at+n)])
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("damage: %w", err)
	}
	return nil
}
