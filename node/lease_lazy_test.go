package node

import (
	"reflect"
	"testing"
	"time"
)

// The heap is lazy (a keepalive does not move a session in it): a session
// kept alive after it was queued must be expired at its last deadline,
// neither at the due time it was queued with nor later than its deadline.
func TestKeptAliveSessionExpiresAtItsLastDeadlineNotItsFirst(t *testing.T) {
	lt, c := newTable()
	lt.Add("a", 10*time.Second)
	c.advance(9 * time.Second)
	if _, ok := lt.KeepAlive("a"); !ok { // deadline 19 s
		t.Fatal("keepalive refused")
	}
	c.advance(time.Second) // 10 s: the due time it was queued with
	if got := lt.Expired(10); len(got) != 0 {
		t.Fatalf("expired at its first due time although kept alive: %v", got)
	}
	c.advance(9*time.Second - time.Nanosecond)
	if got := lt.Expired(10); len(got) != 0 {
		t.Fatalf("expired before its deadline: %v", got)
	}
	c.advance(time.Nanosecond)
	if got := lt.Expired(10); !reflect.DeepEqual(got, []string{"a"}) {
		t.Fatalf("Expired at the deadline = %v, want [a]", got)
	}
}

// A keepalive that arrives after the deadline passed is refused even
// before the expiry scan ran: the session is dead from its deadline on.
func TestKeepAliveAfterDeadlineRefusedBeforeTheScan(t *testing.T) {
	lt, c := newTable()
	lt.Add("a", 10*time.Second)
	c.advance(10 * time.Second)
	if _, ok := lt.KeepAlive("a"); ok {
		t.Fatal("keepalive at the deadline revived the session")
	}
	if got := lt.Expired(10); !reflect.DeepEqual(got, []string{"a"}) {
		t.Fatalf("Expired = %v, want [a]", got)
	}
}

// Sessions expire earliest deadline first, whatever order their
// keepalives moved them in, and a session the scan requeued is not handed
// out twice.
func TestExpiredOrdersByCurrentDeadlineAfterKeepAlives(t *testing.T) {
	lt, c := newTable()
	lt.Add("a", 10*time.Second)
	lt.Add("b", 10*time.Second)
	lt.Add("c", 10*time.Second)
	c.advance(5 * time.Second)
	lt.KeepAlive("a") // a: 15 s
	c.advance(2 * time.Second)
	lt.KeepAlive("b") // b: 17 s; c stays at 10 s
	c.advance(time.Minute)
	if got := lt.Expired(10); !reflect.DeepEqual(got, []string{"c", "a", "b"}) {
		t.Fatalf("Expired = %v, want [c a b]", got)
	}
	if got := lt.Expired(10); len(got) != 0 {
		t.Fatalf("second scan = %v, want none", got)
	}
}

// Removing a session that a scan requeued, or one being expired, leaves
// the table consistent: it is never handed out, and Len counts the rest.
func TestRemoveAfterRequeueForgetsTheSession(t *testing.T) {
	lt, c := newTable()
	lt.Add("a", 10*time.Second)
	lt.Add("b", 10*time.Second)
	c.advance(5 * time.Second)
	lt.KeepAlive("a")
	c.advance(5 * time.Second) // scan requeues a at 15 s, hands out b
	if got := lt.Expired(10); !reflect.DeepEqual(got, []string{"b"}) {
		t.Fatalf("Expired = %v, want [b]", got)
	}
	lt.Remove("a")
	lt.Remove("b")
	c.advance(time.Minute)
	if got := lt.Expired(10); len(got) != 0 || lt.Len() != 0 {
		t.Fatalf("after Remove: Expired %v, Len %d", got, lt.Len())
	}
}

// A keepalive is judged by when it arrived: one that came before the
// deadline but waited past it (for the leadership confirmation) extends
// the session from the time it is applied; one that came after the
// deadline is refused; one whose session an expiry was already taken for
// is refused whenever it came.
func TestKeepAliveIsJudgedByItsArrivalNotItsProcessing(t *testing.T) {
	lt, c := newTable()
	lt.Add("a", 10*time.Second)
	lt.Add("b", 10*time.Second)
	lt.Add("c", 10*time.Second)
	c.advance(9 * time.Second)
	arrived := c.now() // 9 s, before every deadline (10 s)
	c.advance(2 * time.Second)
	if ttl, ok := lt.KeepAliveArrived("a", arrived); !ok || ttl != 10*time.Second {
		t.Fatalf("keepalive that arrived in time: %v %v", ttl, ok)
	}
	if d, _ := lt.Deadline("a"); !d.Equal(time.Unix(1000, 0).Add(21 * time.Second)) {
		t.Fatalf("deadline %v, want now+ttl (21 s)", d)
	}
	if _, ok := lt.KeepAliveArrived("b", c.now()); ok {
		t.Fatal("keepalive that arrived after the deadline revived the session")
	}
	if got := lt.Expired(10); !reflect.DeepEqual(got, []string{"b", "c"}) {
		t.Fatalf("Expired = %v, want [b c]", got)
	}
	if _, ok := lt.KeepAliveArrived("c", arrived); ok {
		t.Fatal("keepalive revived a session whose expiry was taken")
	}
}
