package fsm

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/sequencer"
)

// Version is the encoding version of commands this build writes when every
// replica reads it (Node picks per entry: EncodeAs), and the highest it
// reads: the binary format (codec.go).
const Version = VersionLockOptions

// VersionLockOptions is the binary format whose acquire carries a lock's
// options beyond the mode (Acquire.Permits, Acquire.MaxHold) and whose
// end of a lock-delay names a semaphore slot (EndDelay.Slot):
// [5][Type][fields][CRC-32C]. A command that sets any of them has no
// encoding in an older version (EncodeAs refuses it), so that no replica
// that would ignore them ever applies it.
const VersionLockOptions byte = 5

// VersionTokenLimits is the binary format whose limits carry the per-token
// lock and waiter caps too (api.Limits.LocksPerToken, WaitersPerToken):
// [4][Type][fields][CRC-32C], the limits block holding seven values
// (codec.go). A leader writes it once every member reads it; before, it
// writes VersionBinary (or VersionJSON) without those two caps, so that
// every replica decides an entry alike.
const VersionTokenLimits byte = 4

// VersionBinary is the binary command format, with a CRC-32C of the whole
// entry at its end ([3][Type][fields][CRC-32C]; codec.go); its limits
// block holds five values.
const VersionBinary byte = 3

// VersionJSON is version 1 with a CRC-32C of the whole entry at its end
// ([2][Type][JSON][CRC32-C, 4 bytes big-endian]), computed by the leader
// that proposes it and checked by every replica before it applies it
// (ErrChecksum), so that a byte changed on a disk, in memory or on the wire
// is caught end to end. A leader writes it while some member of the
// configuration has not said that it reads VersionBinary (Member.Commands):
// a build from before the binary format, during a rolling upgrade.
const VersionJSON byte = 2

// VersionUnchecked is the version of commands written before checksums
// ([1][Type][JSON]): still read, without a check, so that a log written by
// an older build replays.
const VersionUnchecked byte = 1

// checksumLen is the length of a checksummed command's CRC-32C.
const checksumLen = 4

// castagnoli is the CRC-32C table (hardware-accelerated on amd64 and
// arm64; etcd's WAL uses it too).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CommandType tags the variant of a Command.
type CommandType uint8

// The command variants. Values are part of the log format: never renumber.
const (
	CmdOpenSession   CommandType = 1
	CmdCloseSession  CommandType = 2
	CmdExpireSession CommandType = 3
	CmdAcquire       CommandType = 4
	CmdRelease       CommandType = 5
	CmdCancelWait    CommandType = 6
	CmdEndDelay      CommandType = 7
	CmdSetMember     CommandType = 8
	// ACL commands: a token carries only the hash of its secret (the
	// secret never enters the log).
	CmdACLBootstrap CommandType = 9
	CmdCreateToken  CommandType = 10
	CmdDeleteToken  CommandType = 11
	// CmdEndHold ends the restore hold of a cluster restored from a
	// backup (FSM.Hold): written by this build only into a cluster that
	// restored with it.
	CmdEndHold CommandType = 12
	// CmdACLBootstrapReset bootstraps ACLs once more, with the reset
	// index an operator wrote into the leader's data dir
	// (ACLBootstrapReset); version 4 (VersionTokenLimits) only.
	CmdACLBootstrapReset CommandType = 13
	// CmdRevokeGrant revokes one grant (RevokeGrant); version 5
	// (VersionLockOptions) only.
	CmdRevokeGrant CommandType = 14
	// CmdRequestRelease asks a lock's holders to release it
	// (RequestRelease); version 5 only.
	CmdRequestRelease CommandType = 15
	// CmdRevokeSession ends a session as revoked (an operator's close by
	// handle: RevokeSession); version 5 only. (15 is the release request.)
	CmdRevokeSession CommandType = 16
)

// String names the command type (its name in the command table).
func (t CommandType) String() string {
	if s, ok := commands[t]; ok {
		return s.name
	}
	return fmt.Sprintf("command(%d)", uint8(t))
}

// Command is one replicated operation: a tagged union in which exactly the
// field named by Type is set. Now is the leader's wall clock (Unix
// nanoseconds) when it proposed the command.
type Command struct {
	Type CommandType
	Now  int64

	OpenSession   *OpenSession
	CloseSession  *SessionRef
	ExpireSession *SessionRef
	Acquire       *Acquire
	Release       *LockRef
	CancelWait    *LockRef
	EndDelay      *EndDelay
	SetMember     *Member
	// ACLBootstrap creates the management token (once per cluster);
	// CreateToken any other.
	ACLBootstrap *Token
	CreateToken  *Token
	DeleteToken  *TokenRef
	EndHold      *EndHold
	// ACLBootstrapReset bootstraps ACLs again (a lost bootstrap answer).
	ACLBootstrapReset *ACLBootstrapReset
	// RevokeGrant takes one grant away (an operator's, or a hold limit's).
	RevokeGrant *RevokeGrant
	// RevokeSession ends a session as revoked (an operator's).
	RevokeSession *RevokeSession
	// RequestRelease asks a lock's holders to release it.
	RequestRelease *RequestRelease
}

// OpenSession creates a session with a leader-generated random id.
type OpenSession struct {
	ID        string `json:"id"`
	Name      string `json:"name,omitempty"`
	TTL       int64  `json:"ttl"`        // nanoseconds
	LockDelay int64  `json:"lock_delay"` // nanoseconds
	// Limits are the leader's limits when it proposed the open (nil on an
	// entry written before limits: none).
	Limits *api.Limits `json:"limits,omitempty"`
	// Owner is the id of the ACL token that opened the session (empty
	// with ACLs off).
	Owner string `json:"owner,omitempty"`
}

// Token is an ACL token as replicated: a leader-generated id, the SHA-256
// (hex) of its secret, never the secret, and its rules (api.ParseRules).
type Token struct {
	ID    string   `json:"id"`
	Name  string   `json:"name,omitempty"`
	Hash  string   `json:"hash"`
	Rules []string `json:"rules"`
	// Created is the clock of the entry that created the token (set by
	// Apply; zero in the command).
	Created int64 `json:"created,omitempty"`
}

// ACLBootstrapReset is an ACL bootstrap after the first: it applies only
// if ResetIndex is the state's reset index (the log index of the last
// bootstrap), which an operator read from the refused bootstrap's answer
// and wrote into the leader's data dir (node: acl-bootstrap-reset). Token
// is the new management token; the earlier tokens stay.
type ACLBootstrapReset struct {
	ResetIndex uint64 `json:"reset_index"`
	Token      Token  `json:"token"`
}

// TokenRef names a token to delete.
type TokenRef struct {
	ID string `json:"id"`
}

// SessionRef names a session to close or expire.
type SessionRef struct {
	ID string `json:"id"`
}

// Acquire asks for a lock on behalf of (Session, Holder). With Wait the
// request queues (FIFO) when the lock cannot be granted now.
type Acquire struct {
	Lock    string         `json:"lock"`
	Session string         `json:"session"`
	Holder  string         `json:"holder"`
	Mode    sequencer.Mode `json:"mode"`
	Wait    bool           `json:"wait,omitempty"`
	// WaitFor is how long the waiter keeps its place (nanoseconds; with
	// Wait). Every leader times it on its own clock from the moment it
	// learns of it; 0 on an entry written before waits were replicated
	// means api.MaxWait.
	WaitFor int64  `json:"wait_for,omitempty"`
	Value   string `json:"value,omitempty"`
	// Limits are the leader's limits when it proposed the acquire (nil on
	// an entry written before limits: none).
	Limits *api.Limits `json:"limits,omitempty"`
	// Permits, when above 0, makes the lock a semaphore of that many
	// slots (VersionLockOptions only; 0: a plain lock).
	Permits uint64 `json:"permits,omitempty"`
	// MaxHold, when above 0, is the longest the grant may be held
	// (nanoseconds; VersionLockOptions only; 0: no limit).
	MaxHold int64 `json:"max_hold,omitempty"`
}

// LockRef names one (session, holder) of one lock: a release, or the
// cancellation of a wait.
type LockRef struct {
	Lock    string `json:"lock"`
	Session string `json:"session"`
	Holder  string `json:"holder"`
	// WaitSet, in a CancelWait, makes it the end of the wait that was set
	// at that log index (its wait ran out): it dequeues only a waiter whose
	// wait is still that one. Zero: an explicit cancellation.
	WaitSet uint64 `json:"wait_set,omitempty"`
}

// EndDelay ends a lock's lock-delay if it is still the delay that ends at
// Until (a later expiry may have extended it).
type EndDelay struct {
	Lock  string `json:"lock"`
	Until int64  `json:"until"`
	// Slot names the semaphore slot whose delay ends (VersionLockOptions
	// only; 0 for a plain lock).
	Slot uint64 `json:"slot,omitempty"`
}

// EndHold ends the restore hold if it is still the hold that ends at Until
// (FSM.Hold).
type EndHold struct {
	Until int64 `json:"until"`
}

// Member records a cluster member's addresses.
type Member struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
	// Commands is the highest command version the member's build reads
	// (0: a build from before VersionBinary, which reads VersionJSON).
	Commands byte `json:"commands,omitempty"`
}

// envelope is the JSON body behind the version and type bytes.
type envelope struct {
	Now int64           `json:"now"`
	Arg json.RawMessage `json:"arg"`
}

// ErrDecode is wrapped by every Decode error.
var ErrDecode = errors.New("fsm: cannot decode command")

// ErrChecksum is wrapped (with ErrDecode) by the error of a command whose
// bytes do not match its checksum: a corrupt entry.
var ErrChecksum = errors.New("checksum mismatch")

// NewerVersionError is wrapped (with ErrDecode) by the error of a
// command whose version byte is above Version while its CRC-32C, which
// covers that byte, holds: a newer build wrote it, and it is not
// damaged (a bit flip in the version byte fails the checksum).
type NewerVersionError struct {
	Version byte
}

func (e *NewerVersionError) Error() string {
	return fmt.Sprintf("command version %d, written by a newer build (this build reads versions %d to %d)", e.Version, VersionUnchecked, Version)
}

// variant returns the payload of c's Type and whether it is set; with alloc
// it first allocates a fresh payload (for decoding into).
func (c *Command) variant(alloc bool) (any, bool, error) {
	s, err := spec(c.Type)
	if err != nil {
		return nil, false, err
	}
	if alloc {
		fresh, p := s.fresh()
		fresh.Type, fresh.Now = c.Type, c.Now
		*c = fresh
		return p, true, nil
	}
	p, set := s.payload(*c)
	return p, set, nil
}

// Encode serialises c in this build's format, Version.
func (c *Command) Encode() ([]byte, error) { return c.EncodeAs(Version) }

// EncodeAs serialises c in format version: VersionBinary
// ([3][Type][fields][CRC-32C]) or VersionJSON ([2][Type][JSON
// envelope][CRC-32C]).
func (c *Command) EncodeAs(version byte) ([]byte, error) {
	s, err := spec(c.Type)
	if err != nil {
		return nil, fmt.Errorf("encode command: %w", err)
	}
	if _, set := s.payload(*c); !set {
		return nil, fmt.Errorf("encode command: %s command without its payload", c.Type)
	}
	if version < s.since {
		return nil, fmt.Errorf("encode %s: version %d does not carry it (a replica that reads no more would halt on it)", c.Type, version)
	}
	if version < VersionLockOptions && c.hasLockOptions() {
		return nil, fmt.Errorf("encode %s: version %d does not carry permits, a hold limit or a slot (every member must read version %d)", c.Type, version, VersionLockOptions)
	}
	switch version {
	case VersionLockOptions, VersionTokenLimits:
		return c.encodeBinary(version), nil
	case VersionBinary:
		o := c.withoutTokenLimits()
		return o.encodeBinary(VersionBinary), nil
	case VersionJSON:
		o := c.withoutTokenLimits()
		return o.encodeJSON()
	default:
		return nil, fmt.Errorf("encode %s: version %d, this build writes %d to %d", c.Type, version, VersionJSON, Version)
	}
}

// hasLockOptions reports whether c sets a field that only
// VersionLockOptions carries.
func (c *Command) hasLockOptions() bool {
	switch {
	case c.Acquire != nil:
		return c.Acquire.Permits != 0 || c.Acquire.MaxHold != 0
	case c.EndDelay != nil:
		return c.EndDelay.Slot != 0
	}
	return false
}

// withoutTokenLimits is c with its limits' per-token lock and waiter caps
// zeroed (no limit): what a format before VersionTokenLimits carries, for
// replicas that would not know them.
func (c *Command) withoutTokenLimits() *Command {
	strip := func(l *api.Limits) *api.Limits {
		if l == nil || (l.LocksPerToken == 0 && l.WaitersPerToken == 0) {
			return l
		}
		o := *l
		o.LocksPerToken, o.WaitersPerToken = 0, 0
		return &o
	}
	switch {
	case c.OpenSession != nil && c.OpenSession.Limits != nil:
		o, p := *c, *c.OpenSession
		p.Limits = strip(p.Limits)
		o.OpenSession = &p
		return &o
	case c.Acquire != nil && c.Acquire.Limits != nil:
		o, p := *c, *c.Acquire
		p.Limits = strip(p.Limits)
		o.Acquire = &p
		return &o
	}
	return c
}

// encodeJSON serialises c as [VersionJSON][Type][JSON envelope][CRC-32C].
func (c *Command) encodeJSON() ([]byte, error) {
	p, _, _ := c.variant(false)
	arg, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", c.Type, err)
	}
	body, err := json.Marshal(envelope{Now: c.Now, Arg: arg})
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", c.Type, err)
	}
	out := make([]byte, 0, 2+len(body)+checksumLen)
	out = append(append(out, VersionJSON, byte(c.Type)), body...)
	return binary.BigEndian.AppendUint32(out, crc32.Checksum(out, castagnoli)), nil
}

// Decode parses an encoded command. Every failure wraps ErrDecode.
func Decode(data []byte) (Command, error) {
	if len(data) < 2 {
		return Command{}, fmt.Errorf("%w: %d bytes, want at least 2", ErrDecode, len(data))
	}
	switch data[0] {
	case VersionLockOptions, VersionTokenLimits, VersionBinary, VersionJSON:
		if len(data) < 2+checksumLen {
			return Command{}, fmt.Errorf("%w: %d bytes, too short for a checksum", ErrDecode, len(data))
		}
		end := len(data) - checksumLen
		if want, got := binary.BigEndian.Uint32(data[end:]), crc32.Checksum(data[:end], castagnoli); want != got {
			return Command{}, fmt.Errorf("%w: %w: CRC-32C %08x of %d bytes, the entry says %08x", ErrDecode, ErrChecksum, got, end, want)
		}
		if data[0] != VersionJSON {
			c, err := decodeBinary(data[1:end], data[0])
			if err != nil {
				return Command{}, fmt.Errorf("%w: %v", ErrDecode, err)
			}
			return c, nil
		}
		data = data[:end]
	case VersionUnchecked:
	default:
		if end := len(data) - checksumLen; data[0] > Version && end >= 2 &&
			binary.BigEndian.Uint32(data[end:]) == crc32.Checksum(data[:end], castagnoli) {
			return Command{}, fmt.Errorf("%w: %w", ErrDecode, &NewerVersionError{Version: data[0]})
		}
		return Command{}, fmt.Errorf("%w: version %d, this build reads %d to %d", ErrDecode, data[0], VersionUnchecked, Version)
	}
	c := Command{Type: CommandType(data[1])}
	var env envelope
	if err := json.Unmarshal(data[2:], &env); err != nil {
		return Command{}, fmt.Errorf("%w: %s: %v", ErrDecode, c.Type, err)
	}
	c.Now = env.Now
	target, _, err := c.variant(true)
	if err != nil {
		return Command{}, fmt.Errorf("%w: %v", ErrDecode, err)
	}
	if len(env.Arg) == 0 || string(env.Arg) == "null" {
		return Command{}, fmt.Errorf("%w: %s without payload", ErrDecode, c.Type)
	}
	if err := json.Unmarshal(env.Arg, target); err != nil {
		return Command{}, fmt.Errorf("%w: %s payload: %v", ErrDecode, c.Type, err)
	}
	return c, nil
}
