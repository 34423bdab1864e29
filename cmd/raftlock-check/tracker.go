package main

import (
	"math/rand"
	"sort"
	"sync"
)

// tracker follows, as messages arrive, who holds and who waits for which
// lock, so that the schedule can pause a holder that others wait behind,
// and wake it the moment someone else is granted its lock (or, for a cut
// client, heal once it also reported its Lost()).
type tracker struct {
	mu       sync.Mutex
	holding  map[int]message           // client -> its msgHold
	waiting  map[int]map[uint64]string // client -> waiting acquire id -> lock
	subs     []grantSub
	lostSubs []lostSub
	// max is the highest token granted so far.
	max uint64
}

// lostSub is a wish to hear that client reported the Lost() of its grant
// of lock with token.
type lostSub struct {
	client int
	lock   string
	token  uint64
	ch     chan struct{}
}

// grantSub is a wish to hear of a grant of lock (of a semaphore: of its
// slot; 0 on a plain lock) with a token above min.
type grantSub struct {
	lock string
	slot uint64
	min  uint64
	ch   chan struct{}
}

func newTracker() *tracker {
	return &tracker{holding: map[int]message{}, waiting: map[int]map[uint64]string{}}
}

// observe updates the tracker with one message of client.
func (t *tracker) observe(client int, m message, done Op, isRet bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case m.T == msgHold:
		t.holding[client] = m
	case m.T == msgUnhold:
		delete(t.holding, client)
	case m.T == msgLost:
		kept := t.lostSubs[:0]
		for _, s := range t.lostSubs {
			if s.client == client && s.lock == m.Lock && s.token == m.Token {
				close(s.ch)
				continue
			}
			kept = append(kept, s)
		}
		t.lostSubs = kept
	case m.T == msgCall && m.Kind == kindAcquire && m.Wait:
		if t.waiting[client] == nil {
			t.waiting[client] = map[uint64]string{}
		}
		t.waiting[client][m.ID] = m.Lock
	case isRet && done.Kind == kindAcquire:
		delete(t.waiting[client], done.ID)
		if done.Result != resOK {
			return
		}
		t.max = max(t.max, done.Token)
		kept := t.subs[:0]
		for _, s := range t.subs {
			if s.lock == done.Lock && done.Slot == s.slot && done.Token > s.min {
				close(s.ch)
				continue
			}
			kept = append(kept, s)
		}
		t.subs = kept
	}
}

// grantAbove returns a channel closed once lock (of a semaphore: its
// slot, whose next holder is the one a paused holder must not outlive) is
// granted with a token above min.
func (t *tracker) grantAbove(lock string, slot, min uint64) <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	ch := make(chan struct{})
	t.subs = append(t.subs, grantSub{lock: lock, slot: slot, min: min, ch: ch})
	return ch
}

// lostOf returns a channel closed once client reports that the Lost() of
// its grant of lock with token closed.
func (t *tracker) lostOf(client int, lock string, token uint64) <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	ch := make(chan struct{})
	t.lostSubs = append(t.lostSubs, lostSub{client: client, lock: lock, token: token, ch: ch})
	return ch
}

// quiet reports whether no client holds a lock or waits for one now.
func (t *tracker) quiet() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.holding) > 0 {
		return false
	}
	for _, ids := range t.waiting {
		if len(ids) > 0 {
			return false
		}
	}
	return true
}

// maxToken returns the highest token granted so far.
func (t *tracker) maxToken() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.max
}

// pickHolder picks a holding client among those eligible, preferring one
// whose lock another client waits for. ok is false if none holds.
func (t *tracker) pickHolder(rng *rand.Rand, eligible func(client int, hold message) bool) (client int, hold message, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var contended, any []int
	for c, h := range t.holding {
		if !eligible(c, h) {
			continue
		}
		any = append(any, c)
		for w, ids := range t.waiting {
			for _, l := range ids {
				if w != c && l == h.Lock {
					contended = append(contended, c)
				}
			}
		}
	}
	pool := contended
	if len(pool) == 0 {
		pool = any
	}
	if len(pool) == 0 {
		return 0, message{}, false
	}
	sort.Ints(pool)
	c := pool[rng.Intn(len(pool))]
	return c, t.holding[c], true
}
