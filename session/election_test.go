package session

import (
	"context"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"

	"github.com/raftlock/raftlock/sequencer"
)

// scriptedLock is a Backend whose lock reads answer what the test sends:
// each WatchLock takes the next state from answers (so the test knows
// exactly what each of the watch's queries saw), and Lock answers current.
// Nothing else is used.
type scriptedLock struct {
	api.Backend
	answers chan api.LockState
	current api.LockState
}

func newScriptedLock() *scriptedLock { return &scriptedLock{answers: make(chan api.LockState)} }

func (s *scriptedLock) WatchLock(ctx context.Context, name string, index uint64, wait time.Duration) (api.LockState, error) {
	select {
	case st := <-s.answers:
		return st, nil
	case <-ctx.Done():
		return api.LockState{}, ctx.Err()
	}
}

func (s *scriptedLock) LockState(ctx context.Context, name string) (api.LockState, error) {
	return s.current, nil
}

// answer hands st to the next query, once one asks.
func (s *scriptedLock) answer(t *testing.T, ctx context.Context, st api.LockState) {
	t.Helper()
	select {
	case s.answers <- st:
	case <-ctx.Done():
		t.Fatal("no query asked for the next answer")
	}
}

// pastGrant is an exclusive grant of the election "e" by session name
// "sess-"+value.
func pastGrant(tok sequencer.Token, value string) api.PastGrant {
	return api.PastGrant{Token: tok, Mode: sequencer.Exclusive, Holder: "h-" + value, Value: value, SessionName: "sess-" + value}
}

// freeElection is the free election "e" at index, with history grants
// complete since since.
func freeElection(index uint64, since sequencer.Token, grants ...api.PastGrant) api.LockState {
	return api.LockState{Name: "e", Holders: []api.Holder{}, Index: index, Grants: grants, GrantsSince: since}
}

// ledElection is the election "e" led by the last of grants.
func ledElection(index uint64, since sequencer.Token, grants ...api.PastGrant) api.LockState {
	st := freeElection(index, since, grants...)
	g := grants[len(grants)-1]
	st.Mode = sequencer.Exclusive
	st.Holders = []api.Holder{{SessionHandle: "sid-" + g.Value, SessionName: g.SessionName, Holder: g.Holder, Token: g.Token, Value: g.Value}}
	return st
}

// wantLeader checks one reported leader: value, token, session (handle
// and name) and gap.
func wantLeader(t *testing.T, got Leader, value string, tok sequencer.Token, handle string, gap bool) {
	t.Helper()
	want := Leader{Election: "e", Value: value, SessionHandle: handle, SessionName: "sess-" + value,
		Sequencer: sequencer.Sequencer{Name: "e", Mode: sequencer.Exclusive, Token: tok}, Gap: gap}
	if got != want {
		t.Fatalf("leader %+v, want %+v", got, want)
	}
}

// Three leaders elected and gone between two of Observe's queries are all
// reported, in grant order, from the history the second answer carries
// (a shared grant in it is no leader); the next answer reports only the
// leader elected since, none twice.
func TestObserveReportsEveryLeaderElectedBetweenTwoQueries(t *testing.T) {
	ctx, f, obs := observeScripted(t)
	f.answer(t, ctx, freeElection(10, 1)) // nobody leads when Observe starts
	reader := api.PastGrant{Token: 25, Mode: sequencer.Shared, Holder: "r", SessionName: "reader"}
	a, b, c := pastGrant(20, "a"), pastGrant(30, "b"), pastGrant(40, "c")
	f.answer(t, ctx, freeElection(45, 1, a, reader, b, c))
	wantLeader(t, recv(t, obs, "a"), "a", 20, "", false)
	wantLeader(t, recv(t, obs, "b"), "b", 30, "", false)
	wantLeader(t, recv(t, obs, "c"), "c", 40, "", false)

	d := pastGrant(50, "d")
	f.answer(t, ctx, ledElection(50, 1, a, reader, b, c, d))
	wantLeader(t, recv(t, obs, "d"), "d", 50, "sid-d", false)
}

// Observe starts with the leader of its first answer; the history before it
// is not reported.
func TestObserveStartsAtTheCurrentLeader(t *testing.T) {
	ctx, f, obs := observeScripted(t)
	a, b, c := pastGrant(20, "a"), pastGrant(30, "b"), pastGrant(40, "c")
	f.answer(t, ctx, ledElection(30, 1, a, b))
	wantLeader(t, recv(t, obs, "b"), "b", 30, "sid-b", false)
	f.answer(t, ctx, ledElection(40, 1, a, b, c))
	wantLeader(t, recv(t, obs, "c"), "c", 40, "sid-c", false)
}

// When an answer's history no longer reaches back to the last leader
// reported, the leaders it still has are reported, the first with Gap set;
// Gap is cleared on the next report. A history reaching back exactly to the
// leader after the last one reported has no gap.
func TestObserveFlagsAGapWhenTheHistoryNoLongerReachesBack(t *testing.T) {
	ctx, f, obs := observeScripted(t)
	a := pastGrant(20, "a")
	f.answer(t, ctx, ledElection(20, 1, a))
	wantLeader(t, recv(t, obs, "a"), "a", 20, "sid-a", false)

	// Grants 21..60 are gone from the history: something may be missing.
	x, y := pastGrant(61, "x"), pastGrant(70, "y")
	f.answer(t, ctx, ledElection(70, 61, x, y))
	wantLeader(t, recv(t, obs, "x"), "x", 61, "", true)
	wantLeader(t, recv(t, obs, "y"), "y", 70, "sid-y", false)

	// The history reaches back to index 71, right after the last answer:
	// nothing is missing.
	z := pastGrant(80, "z")
	f.answer(t, ctx, ledElection(80, 71, z))
	wantLeader(t, recv(t, obs, "z"), "z", 80, "sid-z", false)

	// A gap seen in an answer with no new leader is carried to the next
	// leader reported.
	f.answer(t, ctx, freeElection(200, 150))
	w := pastGrant(210, "w")
	f.answer(t, ctx, ledElection(210, 150, w))
	wantLeader(t, recv(t, obs, "w"), "w", 210, "sid-w", true)
}

// Against a server that keeps no history (GrantsSince 0), Observe reports
// the leader of each answer, as before histories, and cannot flag a gap.
func TestObserveWithoutHistoryReportsEachAnswersLeader(t *testing.T) {
	ctx, f, obs := observeScripted(t)
	// ... nor session names of holders.
	old := func(st api.LockState) api.LockState {
		st.Grants, st.GrantsSince = nil, 0
		for i := range st.Holders {
			st.Holders[i].SessionName = ""
		}
		return st
	}
	f.answer(t, ctx, old(ledElection(20, 1, pastGrant(20, "a"))))
	if first := recv(t, obs, "a"); first.Value != "a" || first.Token() != 20 || first.Gap || first.SessionName != "" {
		t.Fatalf("first leader without history: %+v", first)
	}
	f.answer(t, ctx, old(ledElection(20, 1, pastGrant(20, "a")))) // the same leader: not reported again
	f.answer(t, ctx, old(ledElection(40, 1, pastGrant(30, "b"), pastGrant(40, "c"))))
	if next := recv(t, obs, "c"); next.Value != "c" || next.Token() != 40 || next.Gap {
		t.Fatalf("later leader without history: %+v, want c", next)
	}
}

// CurrentLeader names the leader's session from the history, and never
// flags a gap.
func TestCurrentLeaderNamesTheSession(t *testing.T) {
	f := newScriptedLock()
	f.current = ledElection(30, 1, pastGrant(20, "a"), pastGrant(30, "b"))
	ld, err := CurrentLeader(context.Background(), f, "e")
	if err != nil {
		t.Fatal(err)
	}
	wantLeader(t, ld, "b", 30, "sid-b", false)
}

// A grant made and undone between two queries changes the lock's state:
// Watch reports it, though holders, waiters and delay are the same.
func TestWatchReportsAGrantMadeAndUndoneBetweenQueries(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := newScriptedLock()
	states, err := Watch(ctx, f, "e")
	if err != nil {
		t.Fatal(err)
	}
	f.answer(t, ctx, freeElection(10, 1))
	recv(t, states, "first state")
	f.answer(t, ctx, freeElection(12, 1)) // unchanged: not reported
	f.answer(t, ctx, freeElection(20, 1, pastGrant(15, "a")))
	if st := recv(t, states, "state after a grant and release"); st.Index != 20 || len(st.Grants) != 1 {
		t.Fatalf("watch reported %+v, want the state at 20 with a's grant", st)
	}
}

// observeScripted starts Observe of the election "e" on a scripted lock,
// for 30 s at most.
func observeScripted(t *testing.T) (context.Context, *scriptedLock, <-chan Leader) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	f := newScriptedLock()
	obs, err := Observe(ctx, f, "e")
	if err != nil {
		t.Fatal(err)
	}
	return ctx, f, obs
}
