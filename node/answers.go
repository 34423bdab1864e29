package node

import (
	"context"
	"sync"
	"time"

	"github.com/raftlock/raftlock/api"
)

// Answers of many locks (a listing page, a prefix watch's answer) are
// bounded in bytes (api.MaxAnswerBytes, counted by the state machine:
// fsm.LockBytes), and so are those a node builds and sends at once: each
// holds api.MaxAnswerBytes of the node's budget (Config.
// MaxAnswerBytesInFlight) and of its token's (MaxAnswerBytesInFlightPerToken)
// from before it reads the state machine until its handler has written
// it (api.AnswerHold; without one in the context, until the call
// returns). Issue 40: 40 listings of a prefix of 5,000 locks with 4 KB
// values took the leader to 5 GB; the bound is now about the budget
// times what one answer costs while it is built (its copy of the locks,
// their states and the JSON written).

// answerBudget counts the bytes of the answers a node holds, in all and
// by ACL token. The zero value is ready.
type answerBudget struct {
	mu      sync.Mutex
	used    int64
	byToken map[string]int64
	freed   chan struct{} // closed and replaced at every release
	// wait is how long an answer waits for room (zero:
	// api.AnswerBytesWait).
	wait time.Duration
}

// take counts w more bytes of token ("" with ACLs off), waiting up to
// b.wait (or ctx's end) for them to fit under max in all
// and perToken for the token; past it, resource_exhausted naming the
// bound. release uncounts them (once).
func (b *answerBudget) take(ctx context.Context, token string, w, max, perToken int64) (release func(), err error) {
	var timeout <-chan time.Time
	for {
		b.mu.Lock()
		nodeFits := b.used+w <= max || b.used == 0
		tokenFits := token == "" || b.byToken[token]+w <= perToken || b.byToken[token] == 0
		if nodeFits && tokenFits {
			b.used += w
			if token != "" {
				if b.byToken == nil {
					b.byToken = map[string]int64{}
				}
				b.byToken[token] += w
			}
			b.mu.Unlock()
			var once sync.Once
			return func() { once.Do(func() { b.release(token, w) }) }, nil
		}
		if b.freed == nil {
			b.freed = make(chan struct{})
		}
		freed := b.freed
		b.mu.Unlock()
		if timeout == nil {
			wait := b.wait
			if wait == 0 {
				wait = api.AnswerBytesWait
			}
			t := time.NewTimer(wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-freed:
		case <-timeout:
			if !tokenFits {
				return nil, api.Errorf(api.CodeResourceExhausted,
					"token %s holds its limit of %d bytes of answers in flight on this node (--max-answer-bytes-in-flight-per-token); read fewer pages at once", token, perToken)
			}
			return nil, api.Errorf(api.CodeResourceExhausted,
				"this node holds its limit of %d bytes of answers in flight (--max-answer-bytes-in-flight); retry later", max)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (b *answerBudget) release(token string, w int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= w
	if token != "" {
		if b.byToken[token] -= w; b.byToken[token] <= 0 {
			delete(b.byToken, token)
		}
	}
	if b.freed != nil {
		close(b.freed)
		b.freed = nil
	}
}

// inUse is the bytes held in all (tests).
func (b *answerBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// holdAnswer takes one answer's api.MaxAnswerBytes of the node's and the
// caller's budgets (answerBudget.take); keep hands them to the context's
// api.AnswerHold, released once the answer is written, and drop releases
// them at once (the answer is not sent). Without an AnswerHold, keep
// releases too: the caller holds the answer then.
func (n *Node) holdAnswer(ctx context.Context) (keep, drop func(), err error) {
	release, err := n.answers.take(ctx, n.blockingToken(ctx), api.MaxAnswerBytes,
		n.cfg.MaxAnswerBytesInFlight, n.cfg.MaxAnswerBytesInFlightPerToken)
	if err != nil {
		return nil, nil, err
	}
	keep = release
	if h := api.AnswerHoldFrom(ctx); h != nil {
		keep = func() { h.Add(release) }
	}
	return keep, release, nil
}

// resolveAnswerBudget fills in and checks the bounds on answers in
// flight: each at least one answer (api.MaxAnswerBytes).
func (c *Config) resolveAnswerBudget() error {
	if c.MaxAnswerBytesInFlight == 0 {
		c.MaxAnswerBytesInFlight = api.DefaultMaxAnswerBytesInFlight
	}
	if c.MaxAnswerBytesInFlightPerToken == 0 {
		c.MaxAnswerBytesInFlightPerToken = api.DefaultMaxAnswerBytesInFlightPerToken
	}
	if c.MaxAnswerBytesInFlight < api.MaxAnswerBytes || c.MaxAnswerBytesInFlightPerToken < api.MaxAnswerBytes {
		return invalid("MaxAnswerBytesInFlight %d and MaxAnswerBytesInFlightPerToken %d must be at least one answer, %d bytes",
			c.MaxAnswerBytesInFlight, c.MaxAnswerBytesInFlightPerToken, api.MaxAnswerBytes)
	}
	return nil
}
