package httpapi

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/node/backupfile"
)

// handleSnapshot answers GET /v1/snapshot: the backup file, as an
// octet-stream, described by the X-Raftlock-Snapshot-* headers.
func (s *Server) handleSnapshot(w http.ResponseWriter, r *http.Request) error {
	if _, err := query(r); err != nil {
		return err
	}
	// The state is in memory already (the state machine serialises it in
	// one piece): buffering the file lets an error still be answered as
	// one, and the answer carry its length and checksum.
	var buf bytes.Buffer
	info, err := s.svc.Snapshot(r.Context(), &buf)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.Header().Set(api.HeaderSnapshotIndex, strconv.FormatUint(info.Index, 10))
	w.Header().Set(api.HeaderSnapshotChecksum, info.Checksum)
	w.WriteHeader(http.StatusOK)
	_, _ = buf.WriteTo(w)
	return nil
}

// handleRestore answers POST /v1/snapshot/restore?min_token=N, whose body
// is a backup file.
func (s *Server) handleRestore(w http.ResponseWriter, r *http.Request) error {
	return s.restore(w, r, false)
}

// handlePeerRestore answers POST /v1/internal/restore (peer port only).
func (s *Server) handlePeerRestore(w http.ResponseWriter, r *http.Request) error {
	return s.restore(w, r, true)
}

func (s *Server) restore(w http.ResponseWriter, r *http.Request, peer bool) error {
	q, err := query(r, "min_token")
	if err != nil {
		return err
	}
	var minToken uint64
	if v := q.Get("min_token"); v != "" {
		if minToken, err = strconv.ParseUint(v, 10, 64); err != nil {
			return invalidf("min_token: %s is not a token (a non-negative integer)", shown(v))
		}
	}
	// Authorise from the request's token alone, before a byte of the
	// body is read: a refused caller costs a header, never the upload.
	if !peer {
		if err := s.svc.AuthorizeRestore(r.Context()); err != nil {
			return err
		}
	}
	if r.ContentLength > api.MaxSnapshotBytes {
		return api.Errorf(api.CodeTooLarge, "backup is %d bytes; the limit is %d", r.ContentLength, api.MaxSnapshotBytes)
	}
	data, err := spoolBackup(w, r, spoolDir(s.svc))
	if err != nil {
		return err
	}
	var info api.RestoreInfo
	if peer {
		info, err = s.svc.PeerRestore(r.Context(), data, minToken)
	} else {
		info, err = s.svc.Restore(r.Context(), data, minToken)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, info)
	return nil
}

func spoolDir(ss SnapshotService) string {
	if d := ss.SpoolDir(); d != "" {
		return d
	}
	return os.TempDir()
}

// spoolBackup streams r's body (at most MaxSnapshotBytes) to a temporary
// file in dir, checks there, reading it in pieces, that it is whole (its
// magic and its SHA-256 trailer), and only then reads it into memory: a
// large upload that is cut short, corrupted or not a backup at all never
// costs its size in memory. The file is removed before it returns.
func spoolBackup(w http.ResponseWriter, r *http.Request, dir string) ([]byte, error) {
	f, err := os.CreateTemp(dir, api.SpoolPattern)
	if err != nil {
		return nil, api.Errorf(api.CodeInternal, "spool the backup: %v", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	fw := &spoolWriter{f: f}
	size, err := io.Copy(fw, http.MaxBytesReader(w, r.Body, api.MaxSnapshotBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return nil, api.Errorf(api.CodeTooLarge, "backup is larger than %d bytes", api.MaxSnapshotBytes)
		case fw.err != nil:
			return nil, api.Errorf(api.CodeInternal, "spool the backup: %v", fw.err)
		}
		return nil, invalidf("reading the backup: %v", err)
	}
	if err := checkSpooled(f, size); err != nil {
		return nil, err
	}
	data := make([]byte, size)
	if _, err := f.ReadAt(data, 0); err != nil {
		return nil, api.Errorf(api.CodeInternal, "read the spooled backup: %v", err)
	}
	return data, nil
}

// spoolWriter writes to the spool file and keeps its error, to tell a
// failing disk (internal) from a failing upload (invalid_argument).
type spoolWriter struct {
	f   *os.File
	err error
}

func (w *spoolWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	if err != nil {
		w.err = err
	}
	return n, err
}

// checkSpooled checks a spooled file of size bytes the way
// backupfile.Parse starts: the magic, then the SHA-256 of everything but
// its last 32 bytes against them, read in pieces.
func checkSpooled(f *os.File, size int64) error {
	const trailer = sha256.Size
	magic := make([]byte, len(backupfile.Magic))
	if _, err := f.ReadAt(magic, 0); err != nil || string(magic) != backupfile.Magic {
		return invalidf("restore: %v: it does not start with %q (a foreign file?)", backupfile.ErrInvalid, strings.TrimSpace(backupfile.Magic))
	}
	if size < int64(len(backupfile.Magic))+4+trailer {
		return invalidf("restore: %v: truncated: %d bytes", backupfile.ErrInvalid, size)
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, size-trailer)); err != nil {
		return api.Errorf(api.CodeInternal, "read the spooled backup: %v", err)
	}
	sum := make([]byte, trailer)
	if _, err := f.ReadAt(sum, size-trailer); err != nil {
		return api.Errorf(api.CodeInternal, "read the spooled backup: %v", err)
	}
	if !bytes.Equal(h.Sum(nil), sum) {
		return invalidf("restore: %v: checksum mismatch: the file is truncated or corrupted", backupfile.ErrInvalid)
	}
	return nil
}

// isSnapshotUpload reports whether r carries a backup file, which a
// follower forwards whatever its size (up to MaxSnapshotBytes).
func isSnapshotUpload(r *http.Request) bool {
	return r.URL.Path == "/v1/snapshot/restore" || r.URL.Path == "/v1/internal/restore"
}
