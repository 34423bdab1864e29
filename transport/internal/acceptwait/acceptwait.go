// Package acceptwait is how raftlock's listeners meet a failed accept.
//
// An accept fails while the process is out of file descriptors (EMFILE,
// ENFILE), when a client gave up before it was accepted (ECONNABORTED),
// or when the kernel is short of buffers. None of these is the
// listener's end: the server waits a little and accepts again, as
// net/http's server does, and never stops the daemon. Only a closed
// listener ends an accept loop. A client must not be able to stop a node
// by filling its descriptor table (idle connections to any port, then
// one dial to another).
package acceptwait

import (
	"errors"
	"net"
	"time"
)

// Backoff paces the retries of one accept loop: 5 ms after the first
// failure, doubling to at most 1 s, back to nothing after a success. It
// is not safe for concurrent use (one accept loop owns it).
type Backoff struct {
	delay time.Duration
}

// First is the wait after the first failure of a run; Max the longest
// wait between two accepts that failed. A loop logs only when it waited
// First, so that a descriptor table that stays full costs one log line
// per run of failures, not one a second.
const (
	First = 5 * time.Millisecond
	Max   = time.Second
)

// Retry reports whether an accept loop that got err should accept again,
// after waiting the next delay (it waits before it returns true). It
// returns false only for a closed listener (net.ErrClosed), which ends
// the loop. next is the delay it waited, for a log line.
func (b *Backoff) Retry(err error) (next time.Duration, again bool) {
	if err == nil || errors.Is(err, net.ErrClosed) {
		return 0, false
	}
	b.delay = min(max(2*b.delay, First), Max)
	time.Sleep(b.delay)
	return b.delay, true
}

// Reset is called after an accept that succeeded.
func (b *Backoff) Reset() { b.delay = 0 }
