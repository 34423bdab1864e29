package node

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"
)

// manualNow is a hand-driven clock for the lease table.
type manualNow struct {
	mu sync.Mutex
	t  time.Time
}

func (m *manualNow) now() time.Time { m.mu.Lock(); defer m.mu.Unlock(); return m.t }
func (m *manualNow) advance(d time.Duration) {
	m.mu.Lock()
	m.t = m.t.Add(d)
	m.mu.Unlock()
}

func newTable() (*leaseTable, *manualNow) {
	c := &manualNow{t: time.Unix(1000, 0)}
	return newLeaseTable(c.now), c
}

func TestLeaseExpiresAfterTTLNotBefore(t *testing.T) {
	lt, c := newTable()
	lt.Add("a", 10*time.Second)
	c.advance(10*time.Second - time.Nanosecond)
	if got := lt.Expired(10); len(got) != 0 {
		t.Fatalf("expired before ttl: %v", got)
	}
	c.advance(time.Nanosecond)
	if got := lt.Expired(10); !reflect.DeepEqual(got, []string{"a"}) {
		t.Fatalf("Expired = %v, want [a]", got)
	}
	if _, ok := lt.KeepAlive("a"); ok {
		t.Fatal("keepalive revived an expiring session")
	}
}

func TestKeepAliveExtendsFromNow(t *testing.T) {
	lt, c := newTable()
	lt.Add("a", 10*time.Second)
	c.advance(9 * time.Second)
	if ttl, ok := lt.KeepAlive("a"); !ok || ttl != 10*time.Second {
		t.Fatalf("KeepAlive = %v %v", ttl, ok)
	}
	c.advance(9 * time.Second)
	if got := lt.Expired(10); len(got) != 0 {
		t.Fatalf("expired although kept alive: %v", got)
	}
	if d, _ := lt.Deadline("a"); !d.Equal(time.Unix(1000, 0).Add(19 * time.Second)) {
		t.Fatalf("deadline %v", d)
	}
	if _, ok := lt.KeepAlive("unknown"); ok {
		t.Fatal("keepalive of unknown session succeeded")
	}
}

func TestResetAddsFailoverGrace(t *testing.T) {
	lt, c := newTable()
	lt.Add("old", time.Second)
	lt.Reset(map[string]time.Duration{"a": 5 * time.Second, "b": 20 * time.Second}, 3*time.Second)
	if lt.Len() != 2 {
		t.Fatalf("Len after reset = %d, want 2 (replaces, not merges)", lt.Len())
	}
	c.advance(8*time.Second - time.Nanosecond)
	if got := lt.Expired(10); len(got) != 0 {
		t.Fatalf("expired within ttl+grace: %v", got)
	}
	c.advance(time.Nanosecond)
	if got := lt.Expired(10); !reflect.DeepEqual(got, []string{"a"}) {
		t.Fatalf("Expired = %v, want [a]", got)
	}
}

func TestExpiredRateLimitAndOrder(t *testing.T) {
	lt, c := newTable()
	for i := 0; i < 10; i++ {
		lt.Add(fmt.Sprintf("s%d", i), time.Duration(10-i)*time.Second)
	}
	c.advance(time.Minute)
	first := lt.Expired(3)
	if !reflect.DeepEqual(first, []string{"s9", "s8", "s7"}) {
		t.Fatalf("first batch %v, want earliest deadlines first", first)
	}
	if rest := lt.Expired(100); len(rest) != 7 {
		t.Fatalf("rest = %v", rest)
	}
	// An expiry that could not be proposed is retried.
	lt.Unmark("s9")
	if again := lt.Expired(10); !reflect.DeepEqual(again, []string{"s9"}) {
		t.Fatalf("after Unmark: %v", again)
	}
	for i := 0; i < 10; i++ {
		lt.Remove(fmt.Sprintf("s%d", i))
	}
	if lt.Len() != 0 {
		t.Fatalf("Len = %d after removing all", lt.Len())
	}
	if _, ok := lt.NextDeadline(); ok {
		t.Fatal("NextDeadline on an empty table")
	}
}

func TestLeaseTableConcurrent(t *testing.T) {
	lt, c := newTable()
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				id := fmt.Sprintf("g%d-%d", g, i%20)
				lt.Add(id, time.Second)
				lt.KeepAlive(id)
				c.advance(time.Millisecond)
				for _, e := range lt.Expired(5) {
					lt.Remove(e)
				}
				if i%7 == 0 {
					lt.Remove(id)
				}
			}
		}(g)
	}
	wg.Wait()
}

// A keepalive that arrived before the deadline and awaits its leadership
// confirmation holds off the session's expiry, however late the
// confirmation comes; once confirmed it extends the lease from then.
func TestKeepAliveAwaitingConfirmationHoldsOffExpiry(t *testing.T) {
	lt, c := newTable()
	lt.Add("a", 10*time.Second)
	c.advance(9 * time.Second)
	gen, ok := lt.Arrive("a", c.now())
	if !ok {
		t.Fatal("a keepalive before the deadline was not noted")
	}
	c.advance(5 * time.Second) // the confirmation is slow: past the deadline
	if got := lt.Expired(10); len(got) != 0 {
		t.Fatalf("expired while a keepalive that came in time awaits confirmation: %v", got)
	}
	if ttl, ok := lt.Settle("a", gen, c.now().Add(-5*time.Second), true); !ok || ttl != 10*time.Second {
		t.Fatalf("Settle = %v, %v; want 10s, true", ttl, ok)
	}
	c.advance(10*time.Second - time.Nanosecond)
	if got := lt.Expired(10); len(got) != 0 {
		t.Fatalf("expired before ttl from the confirmation: %v", got)
	}
	c.advance(time.Nanosecond)
	if got := lt.Expired(10); !reflect.DeepEqual(got, []string{"a"}) {
		t.Fatalf("Expired = %v, want [a]", got)
	}
}

// A keepalive whose confirmation fails (this node no longer leads) leaves
// the lease as it was: the session expires as if it never came.
func TestUnconfirmedKeepAliveLeavesTheLease(t *testing.T) {
	lt, c := newTable()
	lt.Add("a", 10*time.Second)
	c.advance(9 * time.Second)
	gen, _ := lt.Arrive("a", c.now())
	c.advance(2 * time.Second)
	if _, ok := lt.Settle("a", gen, c.now().Add(-2*time.Second), false); ok {
		t.Fatal("an unconfirmed keepalive was answered")
	}
	if got := lt.Expired(10); !reflect.DeepEqual(got, []string{"a"}) {
		t.Fatalf("Expired = %v, want [a]", got)
	}
}

// A keepalive that arrives after the deadline is not noted, and one that
// arrived in time while the expiry was being taken gets the session handed
// back (Reprieve) before the expiry is proposed.
func TestReprieveKeepsASessionWhoseKeepAliveCameInTime(t *testing.T) {
	lt, c := newTable()
	lt.Add("a", 10*time.Second)
	lt.Add("b", 10*time.Second)
	c.advance(10 * time.Second)
	if _, ok := lt.Arrive("b", c.now()); ok {
		t.Fatal("a keepalive at the deadline was noted")
	}
	arrived := c.now().Add(-time.Millisecond) // before the deadline, noted late
	ids := lt.Expired(10)
	if len(ids) != 2 {
		t.Fatalf("Expired = %v, want both", ids)
	}
	gen, ok := lt.Arrive("a", arrived)
	if !ok {
		t.Fatal("a keepalive that arrived before the deadline was not noted")
	}
	if got := lt.Reprieve(ids); !reflect.DeepEqual(got, []string{"b"}) {
		t.Fatalf("Reprieve = %v, want [b]", got)
	}
	if ttl, ok := lt.Settle("a", gen, arrived, true); !ok || ttl != 10*time.Second {
		t.Fatalf("Settle = %v, %v; want 10s, true", ttl, ok)
	}
	c.advance(time.Second)
	if got := lt.Expired(10); len(got) != 0 {
		t.Fatalf("the reprieved session expired: %v", got)
	}
}

// A mark taken before a Reset (a new term) is void in the new table: its
// settling does not end a wait noted since.
func TestResetVoidsPendingKeepAlives(t *testing.T) {
	lt, c := newTable()
	lt.Add("a", 10*time.Second)
	gen, _ := lt.Arrive("a", c.now())
	lt.Reset(map[string]time.Duration{"a": 10 * time.Second}, 0)
	gen2, _ := lt.Arrive("a", c.now())
	lt.Settle("a", gen, c.now(), false) // the old term's: void
	c.advance(10 * time.Second)
	if got := lt.Expired(10); len(got) != 0 {
		t.Fatalf("expired while the new term's keepalive awaits confirmation: %v", got)
	}
	lt.Settle("a", gen2, c.now(), false)
	c.advance(time.Duration(pendingRecheck))
	if got := lt.Expired(10); !reflect.DeepEqual(got, []string{"a"}) {
		t.Fatalf("Expired = %v, want [a]", got)
	}
}

// A keepalive that comes after the deadline while one that came in time
// awaits its confirmation is not refused at once: it waits (Unsettled)
// and, once the earlier one extended the lease, is honoured too; had the
// earlier one not been confirmed, the session is as good as expired.
func TestLateKeepAliveWaitsForOneThatCameInTime(t *testing.T) {
	lt, c := newTable()
	lt.Add("a", 10*time.Second)
	c.advance(9 * time.Second)
	inTime := c.now()
	gen, _ := lt.Arrive("a", inTime)
	c.advance(2 * time.Second) // past the deadline
	late := c.now()
	if _, ok := lt.KeepAliveArrived("a", late); ok {
		t.Fatal("a keepalive after the deadline was honoured on its own")
	}
	settled, open := lt.Unsettled("a")
	if !open {
		t.Fatal("the session's fate is open, but Unsettled says it is not")
	}
	select {
	case <-settled:
		t.Fatal("settled before the keepalive that came in time was")
	default:
	}
	lt.Settle("a", gen, inTime, true)
	<-settled
	if ttl, ok := lt.KeepAliveArrived("a", late); !ok || ttl != 10*time.Second {
		t.Fatalf("the late keepalive after the lease was extended: %v, %v; want 10s, true", ttl, ok)
	}

	lt.Add("b", 10*time.Second)
	c.advance(9 * time.Second)
	gen, _ = lt.Arrive("b", c.now())
	c.advance(2 * time.Second)
	settled, _ = lt.Unsettled("b")
	lt.Settle("b", gen, c.now(), false)
	<-settled
	if _, open := lt.Unsettled("b"); open {
		t.Fatal("still open after the only keepalive in time was not confirmed")
	}
	if _, ok := lt.KeepAliveArrived("b", c.now()); ok {
		t.Fatal("a late keepalive was honoured though none in time was confirmed")
	}
}

// Removing a session, or a new term's Reset, releases every wait on it.
func TestRemoveAndResetReleaseTheWaits(t *testing.T) {
	lt, c := newTable()
	lt.Add("a", 10*time.Second)
	lt.Add("b", 10*time.Second)
	lt.Arrive("a", c.now())
	lt.Arrive("b", c.now())
	wa, _ := lt.Unsettled("a")
	wb, _ := lt.Unsettled("b")
	lt.Remove("a")
	<-wa
	lt.Reset(map[string]time.Duration{"b": 10 * time.Second}, 0)
	<-wb
}
