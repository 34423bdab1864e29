package node

import (
	"container/heap"
	"sync"
	"time"
)

// leaseTable is the leader's in-memory table of session deadlines. A
// keepalive moves a session's deadline to now+ttl without a Raft write; the
// leader's expiry loop takes the sessions whose deadline passed and proposes
// their expiry. Deadlines are kept on the monotonic clock and never persisted:
// a new leader rebuilds the table (Reset) with a failover grace.
//
// One heap holds every deadline; there is no goroutine or timer per session.
type leaseTable struct {
	now func() time.Time

	mu      sync.Mutex
	leases  map[string]*lease
	byDue   leaseHeap
	expired map[string]bool // deadline passed, expiry proposed or pending
}

type lease struct {
	id       string
	ttl      time.Duration
	deadline time.Time
	index    int // position in the heap
}

// newLeaseTable returns an empty table that reads time from now (use
// time.Now in production; a fake clock's Now in tests).
func newLeaseTable(now func() time.Time) *leaseTable {
	return &leaseTable{now: now, leases: make(map[string]*lease), expired: make(map[string]bool)}
}

// Reset replaces the table's contents: every session gets deadline
// now+ttl+grace. A new leader calls it after its Barrier.
func (t *leaseTable) Reset(ttls map[string]time.Duration, grace time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.leases = make(map[string]*lease, len(ttls))
	t.expired = make(map[string]bool)
	t.byDue = make(leaseHeap, 0, len(ttls))
	for id, ttl := range ttls {
		l := &lease{id: id, ttl: ttl, deadline: now.Add(ttl + grace), index: len(t.byDue)}
		t.leases[id] = l
		t.byDue = append(t.byDue, l)
	}
	heap.Init(&t.byDue)
}

// Add starts tracking a session with deadline now+ttl. A session already
// tracked keeps its deadline.
func (t *leaseTable) Add(id string, ttl time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.leases[id]; ok {
		return
	}
	l := &lease{id: id, ttl: ttl, deadline: t.now().Add(ttl)}
	t.leases[id] = l
	heap.Push(&t.byDue, l)
}

// Remove stops tracking a session (closed or expired).
func (t *leaseTable) Remove(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.expired, id)
	l, ok := t.leases[id]
	if !ok {
		return
	}
	delete(t.leases, id)
	if l.index >= 0 {
		heap.Remove(&t.byDue, l.index)
	}
}

// KeepAlive extends a live session's deadline to now+ttl and returns the
// ttl. It reports false for an unknown session and for one whose deadline
// has already passed: such a session is being expired and must not be
// revived.
func (t *leaseTable) KeepAlive(id string) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l, ok := t.leases[id]
	if !ok || t.expired[id] {
		return 0, false
	}
	now := t.now()
	if !now.Before(l.deadline) {
		return 0, false
	}
	l.deadline = now.Add(l.ttl)
	heap.Fix(&t.byDue, l.index)
	return l.ttl, true
}

// Expired returns up to max sessions whose deadline has passed, earliest
// first, and marks them expiring (KeepAlive refuses them from now on). They
// stay in the table until Remove; Unmark hands one back to the table if its
// expiry could not be proposed.
func (t *leaseTable) Expired(max int) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	var out []string
	for len(t.byDue) > 0 && len(out) < max {
		l := t.byDue[0]
		if now.Before(l.deadline) {
			break
		}
		heap.Pop(&t.byDue)
		t.expired[l.id] = true
		out = append(out, l.id)
	}
	return out
}

// Unmark returns an expiring session to the heap, due at once, so that a
// later Expired call retries it.
func (t *leaseTable) Unmark(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l, ok := t.leases[id]
	if !ok || !t.expired[id] {
		return
	}
	delete(t.expired, id)
	heap.Push(&t.byDue, l)
}

// NextDeadline returns the earliest deadline not yet expired.
func (t *leaseTable) NextDeadline() (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.byDue) == 0 {
		return time.Time{}, false
	}
	return t.byDue[0].deadline, true
}

// Deadline returns a session's current deadline.
func (t *leaseTable) Deadline(id string) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l, ok := t.leases[id]
	if !ok {
		return time.Time{}, false
	}
	return l.deadline, true
}

// Len is the number of sessions tracked.
func (t *leaseTable) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.leases)
}

// leaseHeap orders leases by deadline (container/heap).
type leaseHeap []*lease

func (h leaseHeap) Len() int           { return len(h) }
func (h leaseHeap) Less(i, j int) bool { return h[i].deadline.Before(h[j].deadline) }
func (h leaseHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *leaseHeap) Push(x any) {
	l := x.(*lease)
	l.index = len(*h)
	*h = append(*h, l)
}
func (h *leaseHeap) Pop() any {
	old := *h
	l := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	l.index = -1
	return l
}
