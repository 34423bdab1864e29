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
// One heap holds every session, ordered by its due time, and there is no
// goroutine or timer per session. The heap is lazy: a keepalive only moves
// the session's deadline (one map lookup, no heap operation), so a
// session's due time is a lower bound of its deadline. When a session comes
// due, Expired either expires it (the deadline passed too) or moves it down
// the heap to its current deadline: one heap operation per session per ttl
// instead of one per keepalive.
//
// Times are nanoseconds since base (the table's creation), on the clock
// now reads.
type leaseTable struct {
	now  func() time.Time
	base time.Time

	mu     sync.Mutex
	gen    uint64 // counts Resets: a mark taken before one is void after it
	leases map[string]*lease
	byDue  leaseHeap
}

// pendingRecheck is how soon Expired looks again at a session whose
// deadline passed while a keepalive that arrived before it still awaits
// its leadership confirmation.
const pendingRecheck = int64(50 * time.Millisecond)

// lease is one tracked session: 64 bytes.
type lease struct {
	id       string
	ttl      int64 // nanoseconds
	deadline int64 // nanoseconds since base: the session expires from then on
	due      int64 // the heap's key, <= deadline
	index    int32 // position in the heap; -1 when not in it (expiring)
	pending  int32 // keepalives that arrived before the deadline, awaiting confirmation
	expiring bool  // deadline passed, expiry proposed or pending
	// settled, if not nil, is closed when pending falls to 0 (Unsettled).
	settled chan struct{}
}

// settle closes l's settled channel, if any: its waiters look again.
func (l *lease) settle() {
	if l.settled != nil {
		close(l.settled)
		l.settled = nil
	}
}

// newLeaseTable returns an empty table that reads time from now (use
// time.Now in production; a fake clock's Now in tests).
func newLeaseTable(now func() time.Time) *leaseTable {
	return &leaseTable{now: now, base: now(), leases: make(map[string]*lease)}
}

// clock is now in nanoseconds since base.
func (t *leaseTable) clock() int64 { return int64(t.now().Sub(t.base)) }

// Reset replaces the table's contents: every session gets deadline
// now+ttl+grace. A new leader calls it after its Barrier.
func (t *leaseTable) Reset(ttls map[string]time.Duration, grace time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock()
	t.gen++
	for _, l := range t.leases {
		l.settle()
	}
	t.leases = make(map[string]*lease, len(ttls))
	t.byDue = make(leaseHeap, 0, len(ttls))
	for id, ttl := range ttls {
		d := now + int64(ttl+grace)
		l := &lease{id: id, ttl: int64(ttl), deadline: d, due: d, index: int32(len(t.byDue))}
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
	d := t.clock() + int64(ttl)
	l := &lease{id: id, ttl: int64(ttl), deadline: d, due: d}
	t.leases[id] = l
	heap.Push(&t.byDue, l)
}

// Remove stops tracking a session (closed or expired).
func (t *leaseTable) Remove(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l, ok := t.leases[id]
	if !ok {
		return
	}
	delete(t.leases, id)
	l.settle()
	if l.index >= 0 {
		heap.Remove(&t.byDue, int(l.index))
	}
}

// KeepAlive extends a live session's deadline to now+ttl and returns the
// ttl. It reports false for an unknown session and for one whose deadline
// has already passed: such a session is being expired and must not be
// revived.
func (t *leaseTable) KeepAlive(id string) (time.Duration, bool) {
	return t.KeepAliveArrived(id, t.now())
}

// KeepAliveArrived is KeepAlive for a keepalive that arrived at arrived
// (and waited since, for the leadership confirmation): it is judged by
// when it arrived, so that a wait on this side never expires a session
// whose keepalive came in time. It still extends the deadline to now+ttl
// (now >= arrived >= the client's send time, so the leader's deadline
// stays at or after the client's lease end), and it never revives a
// session an expiry was already taken for (Expired), nor one whose
// deadline had passed when the keepalive arrived.
func (t *leaseTable) KeepAliveArrived(id string, arrived time.Time) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock()
	at := min(int64(arrived.Sub(t.base)), now)
	l, ok := t.leases[id]
	if !ok || l.expiring || at >= l.deadline {
		return 0, false
	}
	l.deadline = max(l.deadline, now+l.ttl)
	return time.Duration(l.ttl), true
}

// Arrive notes a keepalive of session id that arrived at arrived and now
// waits for the leadership confirmation that lets it extend the lease:
// until Settle, Expired takes no expiry for the session, and Reprieve
// hands back one already taken. It reports false (and notes nothing) for
// an unknown session and for a keepalive that came at or after the
// deadline; gen is the table's generation, which Settle needs.
//
// A leader whose disk is slow confirms late (hashicorp/raft's leader loop
// stores each batch before it counts the heartbeats that confirm it), and
// a client gives up on a keepalive before the answer comes: without the
// mark, the session of a client that kept it alive would expire while its
// keepalives queued. Holding off an expiry is always safe (the contract
// allows one from the lease end, never demands it) and stays bounded: a
// confirmation ends in an answer, in the loss of leadership or with the
// node.
func (t *leaseTable) Arrive(id string, arrived time.Time) (gen uint64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l, ok := t.leases[id]
	if !ok || min(int64(arrived.Sub(t.base)), t.clock()) >= l.deadline {
		return 0, false
	}
	l.pending++
	return t.gen, true
}

// Settle ends the wait Arrive noted (gen is what Arrive returned): if
// confirmed, the keepalive is judged as KeepAliveArrived judges it, and
// its answer returned; if not, the lease is left as it is and Settle
// reports false.
func (t *leaseTable) Settle(id string, gen uint64, arrived time.Time, confirmed bool) (time.Duration, bool) {
	t.mu.Lock()
	l, ok := t.leases[id]
	if ok && gen == t.gen && l.pending > 0 {
		l.pending--
		if l.pending == 0 {
			l.settle()
		}
	}
	t.mu.Unlock()
	if !confirmed {
		return 0, false
	}
	return t.KeepAliveArrived(id, arrived)
}

// Unsettled reports whether session id, not being expired, has
// keepalives that arrived before its deadline and await confirmation, and
// returns a channel closed once none does (or the session leaves the
// table). While one does, the session's fate is open: a keepalive that
// came after the deadline must wait for it (the earlier keepalive may
// extend the lease past its own arrival) rather than be told the session
// is gone.
func (t *leaseTable) Unsettled(id string) (<-chan struct{}, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l, ok := t.leases[id]
	if !ok || l.expiring || l.pending == 0 {
		return nil, false
	}
	if l.settled == nil {
		l.settled = make(chan struct{})
	}
	return l.settled, true
}

// Reprieve hands back to the table every session of ids (taken by
// Expired) for which a keepalive that arrived before its deadline awaits
// confirmation, and returns the others: those an expiry may be proposed
// for. The expiry loop calls it after its own leadership confirmation,
// right before it proposes.
func (t *leaseTable) Reprieve(ids []string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := ids[:0:0]
	for _, id := range ids {
		l, ok := t.leases[id]
		if !ok || !l.expiring || l.pending == 0 {
			out = append(out, id)
			continue
		}
		l.expiring = false
		l.due = t.clock() + pendingRecheck
		heap.Push(&t.byDue, l)
	}
	return out
}

// Expired returns up to max sessions whose deadline has passed, earliest
// first, and marks them expiring (KeepAlive refuses them from now on).
// They stay in the table until Remove; Unmark hands one back to the table
// if its expiry could not be proposed.
func (t *leaseTable) Expired(max int) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock()
	var out []string
	for len(t.byDue) > 0 && len(out) < max {
		l := t.byDue[0]
		if now < l.due {
			break
		}
		if l.due < l.deadline {
			// Kept alive since it was queued: requeue at its deadline
			// (so that expiries go out earliest deadline first too).
			l.due = l.deadline
			heap.Fix(&t.byDue, 0)
			continue
		}
		if l.pending > 0 {
			// A keepalive that came in time awaits its confirmation
			// (Arrive): look again shortly.
			l.due = now + pendingRecheck
			heap.Fix(&t.byDue, 0)
			continue
		}
		heap.Pop(&t.byDue)
		l.expiring = true
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
	if !ok || !l.expiring {
		return
	}
	l.expiring = false
	l.due = l.deadline
	heap.Push(&t.byDue, l)
}

// NextDeadline returns a time at or before the earliest deadline not yet
// expired (the heap's first due time: a keepalive may have moved that
// session's deadline since).
func (t *leaseTable) NextDeadline() (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.byDue) == 0 {
		return time.Time{}, false
	}
	return t.base.Add(time.Duration(t.byDue[0].due)), true
}

// Deadline returns a session's current deadline.
func (t *leaseTable) Deadline(id string) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l, ok := t.leases[id]
	if !ok {
		return time.Time{}, false
	}
	return t.base.Add(time.Duration(l.deadline)), true
}

// Len is the number of sessions tracked.
func (t *leaseTable) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.leases)
}

// leaseHeap orders leases by due time (container/heap).
type leaseHeap []*lease

func (h leaseHeap) Len() int           { return len(h) }
func (h leaseHeap) Less(i, j int) bool { return h[i].due < h[j].due }
func (h leaseHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = int32(i)
	h[j].index = int32(j)
}
func (h *leaseHeap) Push(x any) {
	l := x.(*lease)
	l.index = int32(len(*h))
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
