package session

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/api/apitest"

	"github.com/raftlock/raftlock/sequencer"
)

// recv takes one value from ch or fails after 5 s.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatalf("%s: channel closed", what)
		}
		return v
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: nothing within 5s", what)
	}
	panic("unreachable")
}

// Watch sends the current state, then each change, and skips answers whose
// state did not change; after an error it asks again.
func TestWatchStreamsChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := apitest.New()
		f.Fail("WatchLock", api.Errorf(api.CodeNoLeader, "failover"))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s, err := Open(ctx, f, TTL(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(context.Background())
		ch, err := s.Watch(ctx, "w")
		if err != nil {
			t.Fatal(err)
		}
		if st := recv(t, ch, "initial"); len(st.Holders) != 0 {
			t.Fatalf("initial state %+v, want free", st)
		}
		// A change to another lock moves the index but not this lock's state.
		other, err := s.TryLock(ctx, "other")
		if err != nil {
			t.Fatal(err)
		}
		l, err := s.TryLock(ctx, "w", Value("v1"))
		if err != nil {
			t.Fatal(err)
		}
		st := recv(t, ch, "held")
		if len(st.Holders) != 1 || st.Holders[0].Token != l.Token() || st.Holders[0].Value != "v1" || st.Mode != sequencer.Exclusive {
			t.Fatalf("held state %+v, want holder token %d", st, l.Token())
		}
		if err := other.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if st := recv(t, ch, "freed"); len(st.Holders) != 0 {
			t.Fatalf("state after unlock %+v, want free", st)
		}
		cancel()
		for range ch {
		}
	})
}

func TestWatchRefusesBadName(t *testing.T) {
	f := apitest.New()
	if _, err := Watch(context.Background(), f, ""); api.CodeOf(err) != api.CodeInvalidArgument {
		t.Fatalf("empty name: %v", err)
	}
	if _, err := Watch(context.Background(), nil, "x"); api.CodeOf(err) != api.CodeInvalidArgument {
		t.Fatalf("nil backend: %v", err)
	}
}

// Campaign/Leader/Observe/Resign: the second campaigner is elected when the
// first resigns, observers see both in order with increasing tokens.
func TestElectionRecipe(t *testing.T) {
	f := apitest.New()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := Open(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Leader(ctx, "e"); !errors.Is(err, ErrElectionNoLeader) {
		t.Fatalf("leader of an empty election: %v", err)
	}
	obs, err := Observe(ctx, f, "e")
	if err != nil {
		t.Fatal(err)
	}
	la, err := a.Campaign(ctx, "e", "host-a:80")
	if err != nil {
		t.Fatal(err)
	}
	first := recv(t, obs, "first leader")
	if first.Value != "host-a:80" || first.SessionHandle != a.Handle() || first.Token() != la.Token() {
		t.Fatalf("first leader %+v", first)
	}
	got := make(chan *Leadership, 1)
	go func() {
		lb, err := b.Campaign(ctx, "e", "host-b:80")
		if err != nil {
			t.Error(err)
		}
		got <- lb
	}()
	if cur, err := b.Leader(ctx, "e"); err != nil || cur != first {
		t.Fatalf("leader while b campaigns: %+v, %v", cur, err)
	}
	if err := la.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	second := recv(t, obs, "second leader")
	lb := recv(t, got, "b elected")
	if second.Value != "host-b:80" || second.Token() <= first.Token() || second.Token() != lb.Token() {
		t.Fatalf("second leader %+v after %+v", second, first)
	}
	select {
	case <-la.Lost():
	default:
		t.Fatal("resigned leadership is not Lost")
	}
}

// Session.Watch runs on the session's clock: a query that gets no answer
// is cut when the fake clock passes its bound, and asked again.
func TestSessionWatchRunsOnTheSessionClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		s := r.open(TTL(api.MaxTTL))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if _, err := s.TryLock(ctx, "other"); err != nil { // moves the index off 0
			t.Fatal(err)
		}
		ch, err := s.Watch(ctx, "w")
		if err != nil {
			t.Fatal(err)
		}
		recv(t, ch, "initial")
		synctest.Wait() // the second query waits for a change
		calls := func() int { return r.fb.Calls("WatchLock") }
		if n := calls(); n != 2 {
			t.Fatalf("%d queries, want 2", n)
		}
		r.fc.Advance(watchSlice + watchSlack - time.Nanosecond)
		synctest.Wait()
		if n := calls(); n != 2 {
			t.Fatalf("%d queries before the bound, want 2", n)
		}
		r.fc.Advance(time.Nanosecond)
		synctest.Wait()
		if n := calls(); n != 3 {
			t.Fatalf("%d queries after the bound, want 3", n)
		}
	})
}

// A watch whose queries fail reports each error through OnWatchError and
// goes on: it is never silent about a cluster it cannot reach.
func TestWatchReportsFailedQueries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := apitest.New()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// A change, so that the fake's index is not 0 (a query from index
		// 0 answers at once).
		if _, err := f.OpenSession(ctx, api.OpenRequest{TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		f.Fail("WatchLock", api.Errorf(api.CodeNoLeader, "removed node"), api.Errorf(api.CodeUnauthenticated, "token deleted"))
		errs := make(chan error, 4)
		ch, err := Watch(ctx, f, "w", OnWatchError(func(err error) { errs <- err }))
		if err != nil {
			t.Fatal(err)
		}
		if st := recv(t, ch, "state after the errors"); st.Name != "w" {
			t.Fatalf("state %+v", st)
		}
		for _, want := range []api.Code{api.CodeNoLeader, api.CodeUnauthenticated} {
			select {
			case err := <-errs:
				if api.CodeOf(err) != want {
					t.Fatalf("reported %v, want code %s", err, want)
				}
			default:
				t.Fatalf("no error reported, want code %s", want)
			}
		}
		// Observe takes the option too.
		f.Fail("WatchLock", api.Errorf(api.CodeNoLeader, "again"))
		leaders, err := Observe(ctx, f, "e", OnWatchError(func(err error) { errs <- err }))
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		select {
		case err := <-errs:
			if api.CodeOf(err) != api.CodeNoLeader {
				t.Fatalf("Observe reported %v", err)
			}
		case <-leaders:
			t.Fatal("a leader of a lock nobody holds")
		default:
			t.Fatal("Observe reported no error")
		}
	})
}

// A semaphore's slot delay starting or ending is a change a watch
// reports, even with the holders and the rest unchanged.
func TestSameLockStateSeesSlotDelays(t *testing.T) {
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	a := api.LockState{Name: "pool", Permits: 2, Holders: []api.Holder{{Holder: "x", Token: 3, Slot: 1}}}
	b := a
	b.SlotDelays = []api.SlotDelay{{Slot: 0, Until: at}}
	c := b
	c.SlotDelays = []api.SlotDelay{{Slot: 0, Until: at.In(time.FixedZone("x", 3600))}}
	if SameLockState(a, b) || !SameLockState(b, c) {
		t.Fatalf("SameLockState: a/b %v (want false), b/c %v (want true)", SameLockState(a, b), SameLockState(b, c))
	}
}
