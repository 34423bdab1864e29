package client

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/raftlock/raftlock/api"
)

// WatchLocks is one prefix watch (GET /v1/locks?prefix=&index=&wait=):
// it answers the locks under prefix changed since index as soon as there
// are any, or no change after wait (zero: the server's default,
// api.DefaultWatchWait); api.LocksChange says how to read the answer. A
// reset the server answers in pages (api.MaxAnswerBytes) is read whole
// (ResetPage) and answered as one, Next empty.
// Like WatchLock it is retried (at the same index, for the wait that
// remains) across failovers and lost connections; an answer's Index is
// never below index.
func (c *Client) WatchLocks(ctx context.Context, prefix string, index uint64, wait time.Duration) (api.LocksChange, error) {
	if wait <= 0 {
		wait = api.DefaultWatchWait
	}
	var out api.LocksReply
	start := time.Now()
	left := func() time.Duration {
		return max(wait-time.Since(start), time.Millisecond)
	}
	cl := &call{method: http.MethodGet, path: "/v1/locks", out: &out, idempotent: true,
		body: func() (any, time.Duration) { return nil, left() + c.timeout }}
	cl.queryFunc = func() url.Values {
		return url.Values{"prefix": {prefix}, "index": {strconv.FormatUint(index, 10)}, "wait": {left().String()}}
	}
	if _, err := c.do(ctx, cl); err != nil {
		return api.LocksChange{}, err
	}
	ch, err := locksChangeOf(prefix, out)
	if err != nil {
		return api.LocksChange{}, err
	}
	if ch.Index < index {
		return api.LocksChange{}, api.Errorf(api.CodeInternal,
			"raftlock watch prefix %q: the server answered index %d, below the %d asked (a server without prefix watches?)", prefix, ch.Index, index)
	}
	// A reset over the server's bound on an answer comes in pages: read
	// the rest, so that the caller is answered the whole reset.
	for ch.Reset && ch.Next != "" {
		page, err := c.ResetPage(ctx, prefix, ch.Index, ch.Next)
		if err != nil {
			return api.LocksChange{}, err
		}
		ch.Locks = append(ch.Locks, page.Locks...)
		ch.Next = page.Next
	}
	return ch, nil
}

// ResetPage reads one page of the rest of a prefix watch's reset read at
// index, after the name after (GET /v1/locks?prefix=&index=&after=;
// api.LocksChange): the locks named after after that did not change above
// index (those come as changes from index), with Next set when more
// follow. WatchLocks reads them itself; it is retried as a read is.
func (c *Client) ResetPage(ctx context.Context, prefix string, index uint64, after string) (api.LocksChange, error) {
	var out api.LocksReply
	cl := &call{method: http.MethodGet, path: "/v1/locks", out: &out, idempotent: true,
		query: url.Values{"prefix": {prefix}, "index": {strconv.FormatUint(index, 10)}, "after": {after}}}
	if _, err := c.do(ctx, cl); err != nil {
		return api.LocksChange{}, err
	}
	ch, err := locksChangeOf(prefix, out)
	if err != nil {
		return api.LocksChange{}, err
	}
	if !ch.Reset || ch.Index != index || (ch.Next != "" && ch.Next <= after) {
		return api.LocksChange{}, api.Errorf(api.CodeInternal,
			"raftlock watch prefix %q: the server's reset page after %q at %d answered reset %v at %d, next %q", prefix, after, index, ch.Reset, ch.Index, ch.Next)
	}
	return ch, nil
}

// locksChangeOf decodes a prefix watch's answer.
func locksChangeOf(prefix string, out api.LocksReply) (api.LocksChange, error) {
	ch := api.LocksChange{Locks: make([]api.LockState, 0, len(out.Locks)), Reset: out.Reset, Next: out.Next, Index: out.Index}
	for _, l := range out.Locks {
		st, err := l.State()
		if err != nil {
			return api.LocksChange{}, fmt.Errorf("raftlock watch prefix %q: %w", prefix, err)
		}
		ch.Locks = append(ch.Locks, st)
	}
	return ch, nil
}

// PrefixWatchQuery is how long each query of WatchPrefix waits for a
// change: short, so that a query stuck on a node that froze (it keeps the
// connection open and answers nothing) is given up soon, and the watch
// asks another node (as session.Watch does).
const PrefixWatchQuery = 10 * time.Second

// WatchPrefix watches every lock whose name starts with prefix, from index
// (0: from a listing of the current state): it yields each batch of
// changes the cluster answers (WatchLocks), in order, each lock changed
// since the last batch once, in its current state. A batch with Reset set
// is the whole state under prefix (read whole when the server pages it;
// a lock changed while its pages were read comes in the next batch
// instead), which replaces what the caller knew:
// the first one, and one after the cluster forgot changes the watcher had
// not seen yet or was restored from a backup. The watch resumes from the
// last batch's index across failovers and lost connections (its queries
// wait PrefixWatchQuery each), so no change is missed and none is seen
// twice. It ends when ctx does, or at the first
// error the Backend does not retry (yielded last: permission_denied,
// resource_exhausted, ctx's end), or when the loop breaks; WatchPrefix
// from the last batch's Index resumes it without a reset.
func (c *Client) WatchPrefix(ctx context.Context, prefix string, index uint64) iter.Seq2[api.LocksChange, error] {
	return func(yield func(api.LocksChange, error) bool) {
		for {
			ch, err := c.WatchLocks(ctx, prefix, index, PrefixWatchQuery)
			if err != nil {
				yield(api.LocksChange{}, err)
				return
			}
			index = ch.Index
			if (ch.Reset || len(ch.Locks) > 0) && !yield(ch, nil) {
				return
			}
		}
	}
}
