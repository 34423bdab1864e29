package fsm

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/raftlock/raftlock/api"
)

// A command of a version above this build's whose checksum holds was
// written by a newer build (NewerVersionError, naming the version),
// not damaged; the same bytes with any byte flipped, the version byte
// included, are damage, never "newer".
func TestDecodeTellsANewerBuildsCommandFromDamage(t *testing.T) {
	c := Command{Type: CmdRelease, Now: 42, Release: &LockRef{Lock: "a", Session: "s", Holder: "h"}}
	data, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	future := append([]byte(nil), data...)
	future[0] = Version + 1
	end := len(future) - checksumLen
	binary.BigEndian.PutUint32(future[end:], crc32.Checksum(future[:end], castagnoli))
	_, err = Decode(future)
	var newer *NewerVersionError
	if !errors.As(err, &newer) || newer.Version != Version+1 || !errors.Is(err, ErrDecode) {
		t.Fatalf("Decode(version %d, checksum valid) = %v, want a NewerVersionError of version %d wrapping ErrDecode", Version+1, err, Version+1)
	}
	for i := range future {
		bad := append([]byte(nil), future...)
		bad[i] ^= 0x10
		if _, err := Decode(bad); err == nil || errors.As(err, &newer) {
			t.Errorf("byte %d flipped: %v, want damage, not a newer build's command", i, err)
		}
	}
	flipped := append([]byte(nil), data...)
	flipped[0] = Version + 1 // the version byte of a sound entry, damaged
	if _, err := Decode(flipped); err == nil || errors.As(err, &newer) {
		t.Errorf("a version %d entry whose version byte reads %d: %v, want damage", Version, Version+1, err)
	}
}

// The wire contract names the command version that lock options need
// (api.CommandsLockOptions, which a follower checks against its leader's
// record): it is this package's VersionLockOptions.
func TestAPINamesTheLockOptionsCommandVersion(t *testing.T) {
	if api.CommandsLockOptions != VersionLockOptions {
		t.Fatalf("api.CommandsLockOptions %d, fsm.VersionLockOptions %d", api.CommandsLockOptions, VersionLockOptions)
	}
}
