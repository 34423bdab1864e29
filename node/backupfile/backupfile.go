// Package backupfile is the format of a raftlock backup (GET /v1/snapshot,
// raftlock snapshot save): a versioned header naming the Raft index, term
// and configuration the state was taken at, the state machine's own
// serialisation (fsm.FSM.Dump), and a SHA-256 checksum of the whole file.
//
// Layout:
//
//	"RAFTLOCK-BACKUP\n"        16 bytes, the magic
//	header length              4 bytes, big-endian
//	header                     JSON (Header)
//	state                      Header.StateBytes bytes (fsm.Dump)
//	checksum                   32 bytes, SHA-256 of everything before it
//
// Decode refuses anything else (another file, a truncated or corrupted one,
// a newer format) with an error saying which, before anything is restored.
package backupfile

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/raftlock/raftlock/fsm"
)

// Magic opens every backup file.
const Magic = "RAFTLOCK-BACKUP\n"

// Format is the version of the layout this build writes; it reads
// versions 1 to Format.
const Format = 1

// MaxBytes bounds a backup file that Decode reads (and that a node
// accepts to restore): 1 GiB, far above any state the limits allow.
const MaxBytes = 1 << 30

// maxHeaderBytes bounds the JSON header.
const maxHeaderBytes = 1 << 20

// ErrInvalid is wrapped by every error of Decode about the file's content
// (as opposed to an error reading it).
var ErrInvalid = errors.New("not a valid raftlock backup")

// Server is one member of the Raft configuration at the backup.
type Server struct {
	ID       string `json:"id"`
	Address  string `json:"address"`
	Suffrage string `json:"suffrage"`
}

// Header describes a backup.
type Header struct {
	// Format is the layout's version (Format when written by this build).
	Format int `json:"format"`
	// Index is the Raft log index of the last entry the state holds (the
	// state machine's applied index); Term is the leader's term then.
	Index uint64 `json:"index"`
	Term  uint64 `json:"term"`
	// Created is when the leader took the backup (its wall clock), and
	// Node which node that was.
	Created time.Time `json:"created"`
	Node    string    `json:"node"`
	// Configuration is the cluster's Raft configuration then (a restore
	// keeps the configuration of the cluster it restores into).
	Configuration []Server `json:"configuration"`
	// StateBytes and StateSHA256 (hex) describe the state that follows.
	StateBytes  int64  `json:"state_bytes"`
	StateSHA256 string `json:"state_sha256"`
}

// Backup is a decoded backup file.
type Backup struct {
	Header Header
	// State is the state machine's serialisation (fsm.Dump).
	State []byte
	// Summary describes State, fully decoded.
	Summary fsm.Summary
	// Checksum is the SHA-256 of the file (hex): its last 32 bytes.
	Checksum string
}

// Encode writes a backup of state, described by h (its Format, StateBytes
// and StateSHA256 are filled in), to w, and returns the file's checksum
// (hex).
func Encode(w io.Writer, h Header, state []byte) (string, error) {
	h.Format = Format
	h.StateBytes = int64(len(state))
	sum := sha256.Sum256(state)
	h.StateSHA256 = hex.EncodeToString(sum[:])
	hdr, err := json.Marshal(h)
	if err != nil {
		return "", fmt.Errorf("backup: encode header: %w", err)
	}
	hash := sha256.New()
	mw := io.MultiWriter(w, hash)
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(hdr)))
	for _, part := range [][]byte{[]byte(Magic), n[:], hdr, state} {
		if _, err := mw.Write(part); err != nil {
			return "", fmt.Errorf("backup: write: %w", err)
		}
	}
	total := hash.Sum(nil)
	if _, err := w.Write(total); err != nil {
		return "", fmt.Errorf("backup: write checksum: %w", err)
	}
	return hex.EncodeToString(total), nil
}

// Decode reads a whole backup file from r (at most MaxBytes) and checks it
// completely: magic, checksum, header, format, the state's size and
// checksum, and that the state decodes as the state machine's. Errors
// about the content wrap ErrInvalid.
func Decode(r io.Reader) (*Backup, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("backup: read: %w", err)
	}
	if len(data) > MaxBytes {
		return nil, invalid("larger than %d bytes", MaxBytes)
	}
	return Parse(data)
}

// Parse is Decode of a file already read.
func Parse(data []byte) (*Backup, error) {
	if len(data) < len(Magic) || !bytes.Equal(data[:len(Magic)], []byte(Magic)) {
		return nil, invalid("it does not start with %q (a foreign file?)", Magic[:len(Magic)-1])
	}
	const trailer = sha256.Size
	if len(data) < len(Magic)+4+trailer {
		return nil, invalid("truncated: %d bytes", len(data))
	}
	body, sum := data[:len(data)-trailer], data[len(data)-trailer:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, invalid("checksum mismatch: the file is truncated or corrupted")
	}
	rest := body[len(Magic):]
	hl := binary.BigEndian.Uint32(rest[:4])
	rest = rest[4:]
	if hl > maxHeaderBytes || int(hl) > len(rest) {
		return nil, invalid("header length %d does not fit the file", hl)
	}
	var h Header
	if err := json.Unmarshal(rest[:hl], &h); err != nil {
		return nil, invalid("header: %v", err)
	}
	if h.Format < 1 || h.Format > Format {
		return nil, invalid("format %d; this build reads formats 1 to %d (a newer raftlock wrote it?)", h.Format, Format)
	}
	state := rest[hl:]
	if int64(len(state)) != h.StateBytes {
		return nil, invalid("state is %d bytes, header says %d", len(state), h.StateBytes)
	}
	if ss := sha256.Sum256(state); hex.EncodeToString(ss[:]) != h.StateSHA256 {
		return nil, invalid("state checksum mismatch")
	}
	sumry, err := fsm.Inspect(state)
	if err != nil {
		return nil, invalid("state does not decode: %v", err)
	}
	return &Backup{Header: h, State: state, Summary: sumry, Checksum: hex.EncodeToString(sum)}, nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}
