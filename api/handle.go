package api

import (
	"crypto/sha256"
	"encoding/hex"
)

// sessionHandleDomain separates the hash of SessionHandle from any other
// hash of a session id.
const sessionHandleDomain = "raftlock session handle v1\x00"

// SessionHandleLen is the length of a session handle: hex characters.
const SessionHandleLen = 16

// SessionHandle is the public name of the session id: the first 16 hex
// characters of SHA-256 over a domain-separated id. A session id is a
// secret capability (whoever knows it can keep the session alive, release
// its locks or close it); the handle is what read answers (lock holders,
// election leaders) and log lines show instead. It tells sessions apart and
// lets a session recognise itself, but cannot be turned back into the id,
// nor used in its place: every call that acts on a session takes the id.
// This is the one place that derives it.
func SessionHandle(id string) string {
	if id == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(sessionHandleDomain + id))
	return hex.EncodeToString(sum[:])[:SessionHandleLen]
}
