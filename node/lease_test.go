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
