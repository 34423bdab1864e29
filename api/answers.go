package api

import (
	"context"
	"sync"
	"time"
)

// Limits of the answers that carry many locks (issue 40: a prefix of
// 5,000 locks with 4 KB values made each answer 40 MiB, built whole in
// the leader's memory; 40 listings at once took it to 5 GB). An answer is
// bounded in bytes, and so are the answers a node builds and sends at
// once (docs/API.md, "Limits").
const (
	// MaxAnswerBytes bounds a listing page (GET /v1/locks) and a prefix
	// watch's answer (GET /v1/locks?index=I): it stops adding locks once
	// their size passes this, counted by the state machine
	// (fsm.LockBytes: each lock's text plus an allowance per record, at
	// least its JSON for text JSON does not escape). It always holds one
	// lock: a single lock over it (a history of 32 grants with 4 KiB
	// values is about 150 KB, under it) is answered alone. The answer
	// then names the rest: a listing's next, a reset's next, or a cut
	// change answer's lower index.
	MaxAnswerBytes = 1 << 20
	// DefaultMaxAnswerBytesInFlight bounds the answers one node builds
	// and sends at once, in bytes, each counted MaxAnswerBytes
	// (raftlockd --max-answer-bytes-in-flight;
	// node.Config.MaxAnswerBytesInFlight): 32 answers.
	DefaultMaxAnswerBytesInFlight = 32 * MaxAnswerBytes
	// DefaultMaxAnswerBytesInFlightPerToken bounds those of one ACL
	// token (ACLs on; raftlockd --max-answer-bytes-in-flight-per-token):
	// a quarter, 8 answers.
	DefaultMaxAnswerBytesInFlightPerToken = 8 * MaxAnswerBytes
	// AnswerBytesWait is how long an answer waits for room in those
	// bounds before it is refused with resource_exhausted (429; retry).
	AnswerBytesWait = 5 * time.Second
)

// AnswerHold carries, from a server's handler to the service it calls
// through the context, what an answer holds of the node's bounds on
// answers in flight: the service adds the release of what it took
// (Add), and the handler releases it once the answer is written
// (Release), so that the bytes are counted until they are sent.
type AnswerHold struct {
	mu       sync.Mutex
	releases []func()
	done     bool
}

type answerHoldKey struct{}

// WithAnswerHold returns ctx carrying a new AnswerHold, and it.
func WithAnswerHold(ctx context.Context) (context.Context, *AnswerHold) {
	h := &AnswerHold{}
	return context.WithValue(ctx, answerHoldKey{}, h), h
}

// AnswerHoldFrom returns the AnswerHold ctx carries (nil: none).
func AnswerHoldFrom(ctx context.Context) *AnswerHold {
	h, _ := ctx.Value(answerHoldKey{}).(*AnswerHold)
	return h
}

// Add keeps release until Release; after Release, it is called at once.
func (h *AnswerHold) Add(release func()) {
	h.mu.Lock()
	if !h.done {
		h.releases = append(h.releases, release)
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	release()
}

// Release calls every release added, once.
func (h *AnswerHold) Release() {
	h.mu.Lock()
	rs := h.releases
	h.releases, h.done = nil, true
	h.mu.Unlock()
	for _, r := range rs {
		r()
	}
}
