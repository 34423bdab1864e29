package node

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/api/apitest"
	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/session"
)

// TestRevokeEndsOneGrantAndTellsTheHolderAtItsKeepalive: over HTTP, a
// revocation ends the grant at once (its sequencer checks invalid), keeps
// the session open, names the grant in the session's keepalive answers,
// keeps the lock from the waiter for the session's ttl + lock-delay, and
// is an overview event, a metric and a log line; bad input changes nothing.
func TestRevokeEndsOneGrantAndTellsTheHolderAtItsKeepalive(t *testing.T) {
	logs := &apitest.LogBuffer{}
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: cfg.ID, Level: hclog.Info, Output: logs})
	}, withHTTP)
	c.awaitRecords(t, fsm.Version, fsm.Version, fsm.Version)
	ctx := ctxT(t)
	cl := c.client(t)
	holder := mustOpen(t, c, api.OpenRequest{Name: "holder", TTL: time.Second, LockDelay: 2 * time.Second})
	waiter := mustOpen(t, c, api.OpenRequest{Name: "waiter", TTL: 10 * time.Second})
	g := mustAcquire(t, c, api.AcquireRequest{Name: "jobs/a", Session: holder.ID, Holder: "h1"})
	stop := c.keepAlive(holder.ID, 200*time.Millisecond)
	defer stop()
	granted := make(chan time.Time, 1)
	go func() {
		if _, err := cl.Acquire(ctx, api.AcquireRequest{Name: "jobs/a", Session: waiter.ID, Holder: "w", Wait: time.Minute}); err == nil {
			granted <- time.Now()
		}
	}()
	eventually(t, 10*time.Second, "the waiter to queue", func() error {
		if st, err := cl.LockState(ctx, "jobs/a"); err != nil || st.Waiters != 1 {
			return fmt.Errorf("%+v %v", st, err)
		}
		return nil
	})
	before, _ := cl.LockState(ctx, "jobs/a")

	// Bad input: a stable code, and nothing changes.
	long := strings.Repeat("r", api.MaxRevokeReasonBytes+1)
	for _, tc := range []struct {
		name string
		req  api.RevokeRequest
		code api.Code
	}{
		{"unknown lock", api.RevokeRequest{Name: "jobs/none", Holder: "h1", Reason: "r"}, api.CodeNotFound},
		{"another holder", api.RevokeRequest{Name: "jobs/a", Holder: "h2", Reason: "r"}, api.CodeNotHolder},
		{"another session", api.RevokeRequest{Name: "jobs/a", SessionHandle: api.SessionHandle(waiter.ID), Reason: "r"}, api.CodeNotHolder},
		{"no reason", api.RevokeRequest{Name: "jobs/a", Holder: "h1"}, api.CodeInvalidArgument},
		{"reason too long", api.RevokeRequest{Name: "jobs/a", Holder: "h1", Reason: long}, api.CodeInvalidArgument},
		{"no holder nor handle", api.RevokeRequest{Name: "jobs/a", Reason: "r"}, api.CodeInvalidArgument},
		{"malformed handle", api.RevokeRequest{Name: "jobs/a", SessionHandle: "XYZ", Reason: "r"}, api.CodeInvalidArgument},
		{"bad lock name", api.RevokeRequest{Name: "", Holder: "h1", Reason: "r"}, api.CodeInvalidArgument},
	} {
		if _, err := cl.RevokeGrant(ctx, tc.req); api.CodeOf(err) != tc.code {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
		}
	}
	if st, _ := cl.LockState(ctx, "jobs/a"); st.Index != before.Index || len(st.Holders) != 1 {
		t.Fatalf("bad revocations changed the lock: %+v, was %+v", st, before)
	}

	start := time.Now()
	rv, err := cl.RevokeGrant(ctx, api.RevokeRequest{Name: "jobs/a", Holder: "h1", SessionHandle: api.SessionHandle(holder.ID), Reason: "stuck job"})
	if err != nil {
		t.Fatal(err)
	}
	if rv.Token != g.Token || rv.Unavailable != 3*time.Second || rv.SessionHandle != api.SessionHandle(holder.ID) || rv.SessionName != "holder" {
		t.Errorf("revocation = %+v", rv)
	}
	if chk, err := cl.CheckSequencer(ctx, g.Sequencer.String()); err != nil || chk.Valid {
		t.Errorf("the revoked grant's sequencer: %+v %v, want invalid at once", chk, err)
	}
	ka, err := cl.KeepAlive(ctx, holder.ID)
	if err != nil {
		t.Fatalf("the revoked holder's session: %v, want still open", err)
	}
	want := api.RevokedGrant{Name: "jobs/a", Holder: "h1", Token: g.Token, Kind: "admin", Reason: "stuck job"}
	if len(ka.Revoked) != 1 || ka.Revoked[0] != want {
		t.Errorf("keepalive answer names %+v, want %+v", ka.Revoked, want)
	}
	if _, err := cl.RevokeGrant(ctx, api.RevokeRequest{Name: "jobs/a", Holder: "h1", Reason: "again"}); api.CodeOf(err) != api.CodeNotFound {
		t.Errorf("a second revocation: %v, want not_found (the lock has no holder)", err)
	}
	at := <-granted
	if d := at.Sub(start); d < 3*time.Second {
		t.Errorf("the waiter was granted %v after the revocation, before ttl + lock-delay (3s)", d)
	}
	ka, err = cl.KeepAlive(ctx, holder.ID)
	if err != nil || len(ka.Revoked) != 0 {
		t.Errorf("keepalive after the delay: %+v %v, want no revocation named", ka, err)
	}

	_, li := c.leader()
	_, _, ov, _ := getOverview(ctx, c.httpAddrs[li], "", "")
	found := false
	for _, e := range ov.Events {
		if e.Kind == "revoked" && e.Lock == "jobs/a" && e.Reason == "stuck job" && e.Token == uint64(g.Token) && e.RevokeKind == "admin" {
			found = true
		}
	}
	if !found {
		t.Errorf("no revoked event on the overview: %+v", ov.Events)
	}
	mf, status, err := scrape(ctx, c.httpAddrs[li], "")
	if err != nil || status != http.StatusOK {
		t.Fatalf("scrape: %d %v", status, err)
	}
	if v, ok := metricValue(mf, "raftlock_revocations_total", map[string]string{"kind": "admin"}); !ok || v != 1 {
		t.Errorf("raftlock_revocations_total{kind=admin} = %v (%v), want 1", v, ok)
	}
	line := ""
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "grant revoked") {
			line = l
		}
	}
	if !strings.Contains(line, "lock=jobs/a") || !strings.Contains(line, fmt.Sprintf("token=%d", g.Token)) ||
		!strings.Contains(line, "acl_token_id=") || strings.Contains(line, holder.ID) {
		t.Errorf("log line %q: want the lock, the token and the ACL token id, never the session id", line)
	}
}

// TestSessionsListAndCloseByHandle: an operator lists sessions by name and
// handle (never ids) and closes one by handle: its client gets
// session_not_found, its lock waits out ttl + lock-delay.
func TestSessionsListAndCloseByHandle(t *testing.T) {
	c := newTestCluster(t, 3, nil, withHTTP)
	c.awaitRecords(t, fsm.Version, fsm.Version, fsm.Version)
	ctx := ctxT(t)
	cl := c.client(t)
	a := mustOpen(t, c, api.OpenRequest{Name: "stuck", TTL: time.Second, LockDelay: time.Second})
	b := mustOpen(t, c, api.OpenRequest{Name: "other", TTL: 10 * time.Second})
	mustAcquire(t, c, api.AcquireRequest{Name: "jobs/s", Session: a.ID, Holder: "h"})
	stop := c.keepAlive(a.ID, 200*time.Millisecond)
	defer stop()

	list, err := cl.Sessions(ctx, api.SessionsQuery{Name: "stuck"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Sessions) != 1 || list.Sessions[0].Handle != api.SessionHandle(a.ID) || list.Sessions[0].Name != "stuck" ||
		len(list.Sessions[0].Locks) != 1 || list.Sessions[0].Locks[0] != "jobs/s" {
		t.Fatalf("sessions named stuck: %+v", list)
	}
	all, err := cl.Sessions(ctx, api.SessionsQuery{})
	if err != nil || len(all.Sessions) != 2 {
		t.Fatalf("every session: %+v %v", all, err)
	}
	for _, s := range all.Sessions {
		if s.Handle == a.ID || s.Handle == b.ID {
			t.Fatal("a session id in the listing")
		}
	}
	for _, tc := range []struct {
		name string
		req  api.CloseByHandleRequest
		code api.Code
	}{
		{"unknown handle", api.CloseByHandleRequest{Handle: "0123456789abcdef", Reason: "r"}, api.CodeNotFound},
		{"malformed handle", api.CloseByHandleRequest{Handle: "0123", Reason: "r"}, api.CodeInvalidArgument},
		{"no reason", api.CloseByHandleRequest{Handle: api.SessionHandle(a.ID)}, api.CodeInvalidArgument},
	} {
		if _, err := cl.CloseSessionByHandle(ctx, tc.req); api.CodeOf(err) != tc.code {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
		}
	}
	if _, err := cl.Sessions(ctx, api.SessionsQuery{Handle: "nothex"}); api.CodeOf(err) != api.CodeInvalidArgument {
		t.Errorf("listing by a malformed handle: %v", err)
	}
	start := time.Now()
	closed, err := cl.CloseSessionByHandle(ctx, api.CloseByHandleRequest{Handle: api.SessionHandle(a.ID), Reason: "stuck"})
	if err != nil || closed.Unavailable != 2*time.Second || closed.Name != "stuck" {
		t.Fatalf("close by handle: %+v %v", closed, err)
	}
	if _, err := cl.KeepAlive(ctx, a.ID); api.CodeOf(err) != api.CodeSessionNotFound {
		t.Errorf("the closed session's keepalive: %v, want session_not_found", err)
	}
	g, err := cl.Acquire(ctx, api.AcquireRequest{Name: "jobs/s", Session: b.ID, Holder: "w", Wait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 2*time.Second {
		t.Errorf("the closed session's lock granted %v after the close, before ttl + lock-delay", d)
	}
	if g.Token == 0 {
		t.Error("no token")
	}
}

// TestMaxHoldRevokesTheGrantAtItsLimit: the leader revokes a grant at its
// hold limit (kind max_hold, told at the keepalive, the lock delayed for
// ttl + lock-delay); a hold limit out of range is invalid_argument and
// changes nothing.
func TestMaxHoldRevokesTheGrantAtItsLimit(t *testing.T) {
	c := newTestCluster(t, 3, nil, withHTTP)
	c.awaitRecords(t, fsm.Version, fsm.Version, fsm.Version)
	ctx := ctxT(t)
	cl := c.client(t)
	s := mustOpen(t, c, api.OpenRequest{Name: "holder", TTL: time.Second, LockDelay: time.Second})
	stop := c.keepAlive(s.ID, 200*time.Millisecond)
	defer stop()
	for _, d := range []time.Duration{500 * time.Millisecond, 25 * time.Hour, -time.Second} {
		if _, err := cl.Acquire(ctx, api.AcquireRequest{Name: "jobs/m", Session: s.ID, Holder: "h", MaxHold: d}); api.CodeOf(err) != api.CodeInvalidArgument {
			t.Errorf("max_hold %v: %v, want invalid_argument", d, err)
		}
	}
	if st, err := cl.LockState(ctx, "jobs/m"); err != nil || len(st.Holders) != 0 {
		t.Fatalf("a refused acquire took the lock: %+v %v", st, err)
	}
	start := time.Now()
	g, err := cl.Acquire(ctx, api.AcquireRequest{Name: "jobs/m", Session: s.ID, Holder: "h", MaxHold: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var ka api.KeepAliveAnswer
	eventually(t, 10*time.Second, "the keepalive names the revoked grant", func() error {
		ka, err = cl.KeepAlive(ctx, s.ID)
		if err != nil || len(ka.Revoked) != 1 {
			return fmt.Errorf("%+v %v", ka, err)
		}
		return nil
	})
	if d := time.Since(start); d < time.Second {
		t.Errorf("revoked %v after the grant, before its hold limit", d)
	}
	if r := ka.Revoked[0]; r.Kind != "max_hold" || r.Token != g.Token || r.Name != "jobs/m" {
		t.Errorf("revoked %+v", r)
	}
	if st, _ := cl.LockState(ctx, "jobs/m"); len(st.Holders) != 0 || st.DelayUntil.IsZero() {
		t.Errorf("after the hold limit: %+v, want no holder and a delay", st)
	}
}

// TestRequestReleaseReachesTheHolder: a waiter asks the holder to
// release: the lock shows who asked and when, the holder's Go client
// closes ReleaseRequested() at its next keepalive, the holder chooses
// (here it releases and the waiter is granted); a lock not held is
// not_found and changes nothing.
func TestRequestReleaseReachesTheHolder(t *testing.T) {
	c := newTestCluster(t, 3, nil, withHTTP)
	c.awaitRecords(t, fsm.Version, fsm.Version, fsm.Version)
	ctx := ctxT(t)
	cl := c.client(t)
	hs, err := session.Open(ctx, cl, session.TTL(3*time.Second), session.Name("holder"))
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close(context.Background())
	ws, err := session.Open(ctx, c.client(t), session.TTL(3*time.Second), session.Name("waiter"))
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close(context.Background())
	if err := ws.RequestRelease(ctx, "jobs/r"); api.CodeOf(err) != api.CodeNotFound {
		t.Fatalf("request release of a free lock: %v, want not_found", err)
	}
	l, err := hs.TryLock(ctx, "jobs/r")
	if err != nil {
		t.Fatal(err)
	}
	if err := ws.RequestRelease(ctx, "jobs/r"); err != nil {
		t.Fatal(err)
	}
	st, err := cl.LockState(ctx, "jobs/r")
	if err != nil || len(st.Holders) != 1 || st.Holders[0].ReleaseRequested == nil ||
		st.Holders[0].ReleaseRequested.SessionHandle != ws.Handle() || st.Holders[0].ReleaseRequested.SessionName != "waiter" {
		t.Fatalf("lock state %+v %v, want release_requested by the waiter", st, err)
	}
	select {
	case <-l.ReleaseRequested():
	case <-time.After(10 * time.Second):
		t.Fatal("the holder was not told at its keepalives")
	}
	if r, ok := l.RequestedBy(); !ok || r.BySessionHandle != ws.Handle() {
		t.Errorf("RequestedBy = %+v %v", r, ok)
	}
	if isClosedChan(l.Lost()) {
		t.Error("a release request lost the lock")
	}
	granted := make(chan error, 1)
	go func() {
		_, err := ws.Lock(ctx, "jobs/r")
		granted <- err
	}()
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-granted; err != nil {
		t.Fatal(err)
	}
	if st, _ := cl.LockState(ctx, "jobs/r"); len(st.Holders) != 1 || st.Holders[0].ReleaseRequested != nil {
		t.Errorf("the new grant carries the old request: %+v", st)
	}
}

func isClosedChan(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestNewLeaderRestartsHoldLimitInFull: a hold limit is timed again in
// full by a new leader from its promotion: the grant outlives its limit
// as counted from the grant when the leader that granted it dies (a limit
// may run long after a failover, never short), and is still revoked.
func TestNewLeaderRestartsHoldLimitInFull(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.awaitRecords(t, fsm.Version, fsm.Version, fsm.Version)
	s := mustOpen(t, c, api.OpenRequest{Name: "holder", TTL: 30 * time.Second, LockDelay: time.Second})
	const limit = 3 * time.Second
	mustAcquire(t, c, api.AcquireRequest{Name: "jobs/f", Session: s.ID, Holder: "h", MaxHold: limit})
	time.Sleep(limit / 2) // the wall-clock part of the scenario, not synchronisation
	_, li := c.leader()
	c.stop(li)
	_, nl := c.leader()
	promoted := time.Now()
	n := c.snapshotNodes()[nl]
	eventually(t, 20*time.Second, "the new leader revokes the grant", func() error {
		if len(n.fsm.Revoked(s.ID)) == 0 {
			return fmt.Errorf("not revoked yet")
		}
		return nil
	})
	if d := time.Since(promoted); d < limit-100*time.Millisecond {
		t.Errorf("revoked %v after the new leader was found, want its full limit %v", d, limit)
	}
}
