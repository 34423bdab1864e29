package api

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

// SpoolPattern names the temporary file an upload is written to while it
// arrives (os.CreateTemp's pattern); it is removed when the request ends.
const SpoolPattern = "restore-upload-*.tmp"
