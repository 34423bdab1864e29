package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"

	"github.com/raftlock/raftlock/session/api"
)

// MaxSnapshotBytes bounds a backup file the server takes in (POST
// /v1/snapshot/restore): 1 GiB, node/backupfile.MaxBytes.
const MaxSnapshotBytes = 1 << 30

// Headers of GET /v1/snapshot's answer, describing the backup in its body.
const (
	HeaderSnapshotIndex    = "X-Raftlock-Snapshot-Index"
	HeaderSnapshotChecksum = "X-Raftlock-Snapshot-Checksum"
)

// SnapshotInfo describes a backup taken (GET /v1/snapshot).
type SnapshotInfo struct {
	// Index is the Raft index of the last entry the backup holds; Term
	// the leader's term then.
	Index uint64 `json:"index"`
	Term  uint64 `json:"term"`
	// Sessions and Locks count its records.
	Sessions int `json:"sessions"`
	Locks    int `json:"locks"`
	// Checksum is the file's SHA-256 (hex).
	Checksum string `json:"checksum"`
}

// RestoreInfo answers a restore (POST /v1/snapshot/restore).
type RestoreInfo struct {
	// BackupIndex is the Raft index the backup was taken at.
	BackupIndex uint64 `json:"backup_index"`
	// Floor is the restore's token floor: every token granted from now on
	// is above it, and it is at least the leader's last log index before
	// the restore (every token the cluster had issued) and min_token.
	Floor uint64 `json:"floor"`
	// Index is the Raft index the restored state was written at.
	Index uint64 `json:"index"`
	// Sessions and Locks count what was restored: the backup's sessions
	// the restore kept, and the locks of the restored state.
	Sessions int    `json:"sessions"`
	Locks    int    `json:"locks"`
	Checksum string `json:"checksum"`
	// SessionsEnded counts the sessions, of the backup or of the running
	// cluster, that the restore ended (their clients are told at their
	// next request); GrantsRevoked the running cluster's grants it took
	// away (each lock unavailable for its holder's ttl + lock-delay);
	// GrantsDropped the backup's grants it did not restore (DESIGN.md,
	// "Server actions never outrun the holder").
	SessionsEnded int `json:"sessions_ended"`
	GrantsRevoked int `json:"grants_revoked"`
	GrantsDropped int `json:"grants_dropped"`
}

// SnapshotService is what a Service implements to serve backups and
// restores (node.Node does). Snapshot and Restore are admin operations
// (the service authorizes); PeerRestore serves the peer-only route that a
// new node started with raftlockd --restore uses when another node leads.
type SnapshotService interface {
	// Snapshot writes a backup file of the leader's state to w.
	Snapshot(ctx context.Context, w io.Writer) (SnapshotInfo, error)
	// Restore replaces the state with a backup file's; every later token
	// is above minToken and above every token issued before.
	Restore(ctx context.Context, data []byte, minToken uint64) (RestoreInfo, error)
	// PeerRestore is Restore for a member, without a token.
	PeerRestore(ctx context.Context, data []byte, minToken uint64) (RestoreInfo, error)
}

func (s *Server) snapshotService() (SnapshotService, error) {
	ss, ok := s.svc.(SnapshotService)
	if !ok {
		return nil, api.Errorf(api.CodeNotFound, "this server does not serve snapshots")
	}
	return ss, nil
}

// handleSnapshot answers GET /v1/snapshot: the backup file, as an
// octet-stream, described by the X-Raftlock-Snapshot-* headers.
func (s *Server) handleSnapshot(w http.ResponseWriter, r *http.Request) error {
	if _, err := query(r); err != nil {
		return err
	}
	ss, err := s.snapshotService()
	if err != nil {
		return err
	}
	// The state is in memory already (the state machine serialises it in
	// one piece): buffering the file lets an error still be answered as
	// one, and the answer carry its length and checksum.
	var buf bytes.Buffer
	info, err := ss.Snapshot(r.Context(), &buf)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.Header().Set(HeaderSnapshotIndex, strconv.FormatUint(info.Index, 10))
	w.Header().Set(HeaderSnapshotChecksum, info.Checksum)
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
			return invalidf("min_token: %q is not a token (a non-negative integer)", v)
		}
	}
	ss, err := s.snapshotService()
	if err != nil {
		return err
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxSnapshotBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return api.Errorf(api.CodeTooLarge, "backup is larger than %d bytes", MaxSnapshotBytes)
		}
		return invalidf("reading the backup: %v", err)
	}
	var info RestoreInfo
	if peer {
		info, err = ss.PeerRestore(r.Context(), data, minToken)
	} else {
		info, err = ss.Restore(r.Context(), data, minToken)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, info)
	return nil
}

// isSnapshotUpload reports whether r carries a backup file, which a
// follower forwards whatever its size (up to MaxSnapshotBytes).
func isSnapshotUpload(r *http.Request) bool {
	return r.URL.Path == "/v1/snapshot/restore" || r.URL.Path == "/v1/internal/restore"
}

// PostRestore asks the leader, at its peer port addr, to restore the
// backup file data (POST /v1/internal/restore, peer port only), dialling
// with dial (nil: a plain dialer). raftlockd --restore uses it on a new
// node that does not lead.
func PostRestore(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), addr string,
	data []byte, minToken uint64) (RestoreInfo, error) {
	u := "http://" + addr + "/v1/internal/restore?" + url.Values{"min_token": {strconv.FormatUint(minToken, 10)}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(data))
	if err != nil {
		return RestoreInfo{}, fmt.Errorf("restore at %s: %w", addr, err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	tr := &http.Transport{DialContext: dial, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return RestoreInfo{}, fmt.Errorf("restore at %s: %w", addr, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode/100 != 2 {
		var er ErrorReply
		if json.Unmarshal(body, &er) == nil && er.Error.Code != "" {
			return RestoreInfo{}, fmt.Errorf("restore at %s: %w", addr, &api.Error{Code: api.Code(er.Error.Code), Message: er.Error.Message})
		}
		return RestoreInfo{}, fmt.Errorf("restore at %s: HTTP %d", addr, resp.StatusCode)
	}
	var info RestoreInfo
	if err := json.Unmarshal(body, &info); err != nil {
		return RestoreInfo{}, fmt.Errorf("restore at %s: decode answer: %w", addr, err)
	}
	return info, nil
}
