package fsm

import (
	"crypto/sha256"
	"encoding/binary"
)

// The replicas' proof that they agree. Every replica chains the command
// entries it applies: digest(i) = SHA-256(digest(previous) || i || entry
// bytes), starting from zeros at an origin (the cluster's first entry, or
// the index of a snapshot written before digests). The state machine is
// deterministic, so two replicas with the same digest at the same index
// (and the same origin) applied the same commands in the same order from
// the same state, and hold the same state; a replica that applied
// anything else (a corrupt entry that passed its checksum, a bug, a
// damaged snapshot) has another digest from then on. Snapshots carry the
// digest, so a replica that installs one continues the same chain. The
// cost is one SHA-256 of the entry per apply.

// digestRingLen is how many recent digests a replica keeps, for the leader
// to find an index it and a follower both have.
const digestRingLen = 512

// DigestAt is a replica's digest after applying entry Index.
type DigestAt struct {
	Index  uint64   `json:"index"`
	Digest [32]byte `json:"digest"`
}

// digestRing is the last digestRingLen digests, oldest first.
type digestRing struct {
	buf  [digestRingLen]DigestAt
	next int
	n    int
}

func (r *digestRing) add(index uint64, d [32]byte) {
	r.buf[r.next] = DigestAt{Index: index, Digest: d}
	r.next = (r.next + 1) % digestRingLen
	r.n = min(r.n+1, digestRingLen)
}

// all returns the digests, oldest first.
func (r *digestRing) all() []DigestAt {
	out := make([]DigestAt, 0, r.n)
	for i := range r.n {
		out = append(out, r.buf[(r.next-r.n+i+digestRingLen)%digestRingLen])
	}
	return out
}

// chain folds entry index (its bytes data) into the digest.
func (f *FSM) chain(index uint64, data []byte) {
	h := f.hasher
	if h == nil {
		h = sha256.New()
		f.hasher = h
	}
	h.Reset()
	h.Write(f.digest[:])
	var ib [8]byte
	binary.BigEndian.PutUint64(ib[:], index)
	h.Write(ib[:])
	h.Write(data)
	h.Sum(f.digest[:0])
	f.recent.add(index, f.digest)
}

// Digests returns the replica's recent digests, oldest first, and the
// origin of its chain: digests of two replicas compare only at the same
// index and origin.
func (f *FSM) Digests() (recent []DigestAt, origin uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.recent.all(), f.digestOrigin
}
