package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/transport/client"
)

// The prefix watcher: the checker itself watches every lock under
// lockPrefix (GET /v1/locks?prefix&index&wait, client.WatchLocks) for the
// whole run, through every fault, and records each answer; check 9
// (checkPrefixWatch) holds the answers against the grants the clients
// acknowledged.

// checkPrefixWatchName names check 9.
const checkPrefixWatchName = "prefix-watch"

// WatchRec is one answer of the prefix watcher: the watch at From was
// answered at Index (Reset: the whole state under the prefix), with the
// locks it named.
type WatchRec struct {
	At    int64         `json:"at"`
	From  uint64        `json:"from"`
	Index uint64        `json:"index"`
	Reset bool          `json:"reset,omitempty"`
	Locks []watchedLock `json:"locks,omitempty"`
}

// watchedLock is one lock of a watch answer: the index of its last change,
// how far back its grant history reaches, and the tokens in it.
type watchedLock struct {
	Name        string   `json:"name"`
	Index       uint64   `json:"index"`
	GrantsSince uint64   `json:"grants_since"`
	Tokens      []uint64 `json:"tokens,omitempty"`
}

// addWatch records an answer of the prefix watcher.
func (h *historyLog) addWatch(w WatchRec) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.watches = append(h.watches, w)
}

// prefixWatchRetry paces the watcher after a failed query (the client has
// retried transient failures already).
const prefixWatchRetry = time.Second

// runPrefixWatcher watches lockPrefix from index 0 until ctx ends,
// recording every answer, the empty ones included (they say nothing
// changed in their range); it resumes at its last index after an error.
// addrs are every address a member may have (members and spares), so that
// it needs nothing of the cluster while the faults change it. It returns
// a channel closed when it has stopped.
func runPrefixWatcher(ctx context.Context, addrs []string, opts []client.ClientOption, hist *historyLog, logf func(string, ...any)) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		cl, err := client.NewClient(addrs, opts...)
		if err != nil {
			logf("prefix watcher: %v", err)
			return
		}
		defer cl.CloseIdleConnections()
		var index uint64
		failures := 0
		for ctx.Err() == nil {
			ch, err := cl.WatchLocks(ctx, lockPrefix, index, client.PrefixWatchQuery)
			if err != nil {
				if ctx.Err() == nil {
					if failures++; failures == 1 || failures%30 == 0 {
						logf("prefix watcher: %v (retrying at index %d)", err, index)
					}
					sleep(ctx, prefixWatchRetry)
				}
				continue
			}
			hist.addWatch(watchRecOf(monoNow(), index, ch))
			index = ch.Index
		}
	}()
	return done
}

func watchRecOf(at int64, from uint64, ch api.LocksChange) WatchRec {
	w := WatchRec{At: at, From: from, Index: ch.Index, Reset: ch.Reset}
	for _, l := range ch.Locks {
		wl := watchedLock{Name: l.Name, Index: l.Index, GrantsSince: uint64(l.GrantsSince)}
		for _, g := range l.Grants {
			wl.Tokens = append(wl.Tokens, uint64(g.Token))
		}
		w.Locks = append(w.Locks, wl)
	}
	return w
}

// watchStats is what check 9 judged: the watcher's answers, its resets,
// and the acknowledged grants it was held to.
type watchStats struct {
	Answers, Resets, Judged int
}

// checkPrefixWatch is check 9, the rule of prefix watches: every change
// under the prefix once, in order, the index never back. Over the
// watcher's answers, in order:
//
//   - each answer's index is at least the index it was asked at, which is
//     the previous answer's;
//   - an answer that is not a reset names only locks under the prefix,
//     each changed in its range (From, Index];
//   - no grant token is seen in two answers' ranges (each answer counts
//     the tokens of its locks' histories in its range);
//   - every grant a client acknowledged, of a lock under the prefix, whose
//     token lies in the range of an answer that is not a reset and whose
//     history reaches back to it (GrantsSince), is in that answer.
//
// Not judged: grants outside every answer's range (before the first,
// after the last) or in a reset's (a reset replaces the watcher's view:
// what a restore took away, or the state forgot, is not owed).
func checkPrefixWatch(h History) ([]Violation, watchStats) {
	var vs []Violation
	var st watchStats
	bad := func(at int64, format string, args ...any) {
		vs = append(vs, Violation{Check: checkPrefixWatchName, At: at, Client: -1, What: fmt.Sprintf(format, args...)})
	}
	seen := map[uint64]int{} // token -> the answer that counted it
	var last uint64
	for i, w := range h.Watches {
		st.Answers++
		if w.Reset {
			st.Resets++
		}
		if w.Index < w.From || w.From < last {
			bad(w.At, "prefix watch answer %d: asked at %d after an answer at %d, answered at %d: the index went back", i, w.From, last, w.Index)
		}
		last = max(last, w.Index)
		for _, l := range w.Locks {
			if !strings.HasPrefix(l.Name, lockPrefix) {
				bad(w.At, "prefix watch answer %d named %s, outside %q", i, l.Name, lockPrefix)
			}
			if !w.Reset && (l.Index <= w.From || l.Index > w.Index) {
				bad(w.At, "prefix watch answer %d (%d, %d] named %s changed at %d: seen twice, or from the future", i, w.From, w.Index, l.Name, l.Index)
			}
			for _, t := range l.Tokens {
				if t <= w.From || t > w.Index {
					continue
				}
				if j, dup := seen[t]; dup {
					bad(w.At, "prefix watch: grant %d of %s seen in answers %d and %d", t, l.Name, j, i)
				} else {
					seen[t] = i
				}
			}
		}
	}
	for name, gs := range grantsOf(h) {
		if !strings.HasPrefix(name, lockPrefix) {
			continue
		}
		for _, g := range gs {
			w, i, ok := answerCovering(h.Watches, g.Token)
			if !ok || w.Reset {
				continue
			}
			l, named := watchedLockOf(w, name)
			if named && l.GrantsSince > g.Token {
				continue // its history no longer reached back to it
			}
			st.Judged++
			if j, ok := seen[g.Token]; !ok || j != i {
				bad(w.At, "prefix watch missed grant %d of %s (client %d): its answer %d covers (%d, %d] and does not list it (lock named: %v)",
					g.Token, name, g.Client, i, w.From, w.Index, named)
			}
		}
	}
	return vs, st
}

// answerCovering returns the answer whose range (From, Index] holds token
// (the ranges follow one another: a binary search on Index; answers whose
// index went back are reported by the check, and may then hide a grant).
func answerCovering(ws []WatchRec, token uint64) (WatchRec, int, bool) {
	i := sort.Search(len(ws), func(i int) bool { return ws[i].Index >= token })
	if i < len(ws) && token > ws[i].From {
		return ws[i], i, true
	}
	return WatchRec{}, -1, false
}

func watchedLockOf(w WatchRec, name string) (watchedLock, bool) {
	for _, l := range w.Locks {
		if l.Name == name {
			return l, true
		}
	}
	return watchedLock{}, false
}
