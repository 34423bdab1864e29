package session

import (
	"context"
	"sort"
	"sync"
	"time"
)

// FakeClock is a Clock whose time moves only when Advance is called. Timers
// armed on it fire, in deadline order, when Advance reaches their deadline.
// Waiters, BlockUntil and NextDeadline let a test wait until the goroutines
// under test have armed their timers, so it never has to sleep.
// It is safe for concurrent use.
type FakeClock struct {
	mu      sync.Mutex
	now     time.Time
	seq     uint64
	armed   map[*fakeTimer]struct{}
	changed chan struct{} // closed (and replaced) whenever armed changes
}

// NewFakeClock returns a FakeClock reading start. Pass time.Now() to keep a
// monotonic reading, or any fixed time for reproducible tests.
func NewFakeClock(start time.Time) *FakeClock {
	return &FakeClock{now: start, armed: make(map[*fakeTimer]struct{}), changed: make(chan struct{})}
}

// Now returns the fake current time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Since returns the fake time elapsed since t.
func (c *FakeClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// NewTimer returns a timer firing when the fake time reaches Now()+d.
func (c *FakeClock) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{c: c, ch: make(chan time.Time, 1)}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armLocked(t, d)
	return t
}

// Advance moves the fake time forward by d (a negative d is ignored) and
// fires every timer whose deadline is then due, earliest first.
func (c *FakeClock) Advance(d time.Duration) {
	if d < 0 {
		d = 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	var due []*fakeTimer
	for t := range c.armed {
		if !t.when.After(c.now) {
			due = append(due, t)
		}
	}
	sort.Slice(due, func(i, j int) bool {
		if !due[i].when.Equal(due[j].when) {
			return due[i].when.Before(due[j].when)
		}
		return due[i].seq < due[j].seq
	})
	for _, t := range due {
		c.fireLocked(t)
	}
}

// Waiters returns the number of armed (pending) timers.
func (c *FakeClock) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.armed)
}

// NextDeadline returns the earliest deadline of an armed timer.
func (c *FakeClock) NextDeadline() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var earliest time.Time
	found := false
	for t := range c.armed {
		if !found || t.when.Before(earliest) {
			earliest, found = t.when, true
		}
	}
	return earliest, found
}

// BlockUntil blocks until at least n timers are armed.
func (c *FakeClock) BlockUntil(n int) {
	_ = c.BlockUntilContext(context.Background(), n)
}

// BlockUntilContext blocks until at least n timers are armed or ctx is done,
// in which case it returns ctx.Err().
func (c *FakeClock) BlockUntilContext(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		if len(c.armed) >= n {
			c.mu.Unlock()
			return nil
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (c *FakeClock) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// armLocked arms t to fire d from now, firing at once if d <= 0.
func (c *FakeClock) armLocked(t *fakeTimer, d time.Duration) {
	c.seq++
	t.seq = c.seq
	t.when = c.now.Add(d)
	if d <= 0 {
		t.send(c.now)
		return
	}
	c.armed[t] = struct{}{}
	c.notifyLocked()
}

func (c *FakeClock) fireLocked(t *fakeTimer) {
	delete(c.armed, t)
	c.notifyLocked()
	t.send(c.now)
}

// disarmLocked stops t and drops an undelivered value; it reports whether t
// was pending.
func (c *FakeClock) disarmLocked(t *fakeTimer) bool {
	_, pending := c.armed[t]
	if pending {
		delete(c.armed, t)
		c.notifyLocked()
	}
	select {
	case <-t.ch:
		pending = true
	default:
	}
	return pending
}

type fakeTimer struct {
	c    *FakeClock
	ch   chan time.Time // capacity 1
	when time.Time
	seq  uint64
}

func (t *fakeTimer) send(now time.Time) {
	select {
	case t.ch <- now:
	default:
	}
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	return t.c.disarmLocked(t)
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	pending := t.c.disarmLocked(t)
	t.c.armLocked(t, d)
	return pending
}
