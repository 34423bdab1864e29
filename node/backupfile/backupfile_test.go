package backupfile

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/fsm"
)

func encodeState(t *testing.T) ([]byte, Header) {
	t.Helper()
	h := Header{Index: 42, Term: 3, Created: time.Date(2026, 11, 24, 4, 0, 0, 0, time.UTC), Node: "n1",
		Configuration: []Server{{ID: "n1", Address: "127.0.0.1:7101", Suffrage: "Voter"}}}
	var buf bytes.Buffer
	if _, err := Encode(&buf, h, fsm.New(nil).Dump()); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), h
}

// TestBackupRoundTripsWithItsHeader pins that Decode gives back what
// Encode wrote: the header, the state and the file's checksum.
func TestBackupRoundTripsWithItsHeader(t *testing.T) {
	data, h := encodeState(t)
	b, err := Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if b.Header.Index != h.Index || b.Header.Term != h.Term || b.Header.Node != "n1" || b.Header.Format != Format ||
		len(b.Header.Configuration) != 1 || !b.Header.Created.Equal(h.Created) {
		t.Fatalf("header %+v, want %+v", b.Header, h)
	}
	sum := sha256.Sum256(data[:len(data)-sha256.Size])
	if !bytes.Equal(b.State, fsm.New(nil).Dump()) || len(b.Checksum) != 64 || !bytes.Equal(sum[:], data[len(data)-sha256.Size:]) {
		t.Fatalf("state or checksum differ")
	}
}

// TestBadFilesAreRefusedSayingWhy pins that every damaged, foreign or
// newer file is refused with ErrInvalid and a message saying which.
func TestBadFilesAreRefusedSayingWhy(t *testing.T) {
	good, _ := encodeState(t)
	flip := func(i int) []byte { d := bytes.Clone(good); d[i] ^= 1; return d }
	// reseal rewrites the header (format 99) and the file's checksum, as
	// a newer build would write.
	newer := func() []byte {
		hl := binary.BigEndian.Uint32(good[len(Magic):])
		hdr := bytes.Replace(good[len(Magic)+4:len(Magic)+4+int(hl)], []byte(`"format":1`), []byte(`"format":9`), 1)
		body := append(append([]byte(nil), good[:len(Magic)+4]...), hdr...)
		body = append(body, good[len(Magic)+4+int(hl):len(good)-sha256.Size]...)
		sum := sha256.Sum256(body)
		return append(body, sum[:]...)
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "foreign file"},
		{"foreign", []byte("SQLite format 3\x00 and more bytes than the magic"), "foreign file"},
		{"magic only", []byte(Magic), "truncated"},
		{"truncated", good[:len(good)-1], "checksum mismatch"},
		{"bit flipped in the state", flip(len(good) - sha256.Size - 2), "checksum mismatch"},
		{"bit flipped in the checksum", flip(len(good) - 1), "checksum mismatch"},
		{"newer format", newer(), "format 9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(bytes.NewReader(tc.data))
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decode: %v; want ErrInvalid saying %q", err, tc.want)
			}
		})
	}
}
