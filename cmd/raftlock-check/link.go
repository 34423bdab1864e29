package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
)

// link is a client process's end of the protocol: it writes messages to
// the checker (stdout) and dispatches the checker's messages (stdin).
type link struct {
	ids atomic.Uint64

	wmu sync.Mutex
	enc *json.Encoder

	replies replyTable

	// verify receives msgVerify; pins receives msgPin and msgUnpin, in
	// order; done is closed on msgStop or when the checker goes away.
	verify chan struct{}
	pins   chan message
	done   chan struct{}
	once   sync.Once

	// where, if set, names the node the client talks to now; the link
	// answers msgWhere with it.
	where func() string
	// token, if set, takes the secret of a msgToken.
	token func(secret string)
	// late, if set, takes msgLateArm, msgLateRelease and msgLatePin;
	// latePins, if
	// set, says whether a hold of a grant starts pinned (lateAnswers.pins).
	late     func(m message)
	latePins func(lock string, token uint64) bool
}

func newLink(w io.Writer) *link {
	return &link{enc: json.NewEncoder(w),
		verify: make(chan struct{}, 1), pins: make(chan message, 16), done: make(chan struct{})}
}

func (l *link) nextID() uint64 { return l.ids.Add(1) }

// send writes one message. A failed write means the checker is gone; the
// link then reports done.
func (l *link) send(m message) {
	l.wmu.Lock()
	err := l.enc.Encode(m)
	l.wmu.Unlock()
	if err != nil {
		l.stop()
	}
}

func (l *link) stop() { l.once.Do(func() { close(l.done) }) }

// request sends m (a write to the resource) and waits for its answer.
func (l *link) request(ctx context.Context, m message) (message, error) {
	return l.replies.request(ctx, m, l.send, l.done)
}

// readLoop dispatches the checker's messages until r ends.
func (l *link) readLoop(r io.Reader) error {
	defer l.stop()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var m message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			return fmt.Errorf("client: bad message from checker: %w", err)
		}
		switch m.T {
		case msgWriteReply:
			l.replies.deliver(m)
		case msgVerify:
			select {
			case l.verify <- struct{}{}:
			default:
			}
		case msgPin, msgUnpin:
			select {
			case l.pins <- m:
			default:
				// Not taken in time: the checker gives up on the pin.
			}
		case msgWhere:
			node := ""
			if l.where != nil {
				node = l.where()
			}
			l.send(message{T: msgWhereReply, ID: m.ID, Node: node})
		case msgLateArm, msgLateRelease, msgLatePin:
			if l.late != nil {
				l.late(m)
			}
		case msgToken:
			if l.token != nil {
				l.token(m.Secret)
			}
		case msgStop:
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("client: reading from checker: %w", err)
	}
	return nil
}
