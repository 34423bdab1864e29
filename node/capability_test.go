package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/sequencer"
	"github.com/raftlock/raftlock/session"
	"github.com/raftlock/raftlock/transport/client"
)

// The tests of "nobody steals a lock": a session id is a secret capability
// that no read answer and no log line reveals, and only members may change
// the member table.

// jsonStrings appends every string in the JSON document data (keys and
// values) to out.
func jsonStrings(t *testing.T, data []byte, out map[string]bool) {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("answer %s: %v", data, err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			out[v] = true
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for k, e := range v {
				out[k] = true
				walk(e)
			}
		}
	}
	walk(v)
}

// Two clients' sessions hold and wait on locks and lead or queue in an
// election; a third client reads every read route, on every node, and tries
// every string any answer carried as a session id: to keep it alive, to
// release each lock with each holder id seen, to close it and to acquire in
// its name. Every attempt fails, and the victims' sessions and locks are
// intact. The answers name the victims' sessions by handle and name only.
func TestReadAnswersGiveNoCapabilityOverOthersSessions(t *testing.T) {
	c := newHTTPCluster(t)
	c.leader()
	ctx := ctxT(t)
	cl := c.client(t)
	defer cl.CloseIdleConnections()

	alice, err := session.Open(ctx, cl, session.Name("alice"), session.TTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close(context.Background())
	bob, err := session.Open(ctx, cl, session.Name("bob"), session.TTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close(context.Background())
	held, err := alice.Lock(ctx, "v/a", session.Value("alice's"))
	if err != nil {
		t.Fatal(err)
	}
	shared, err := bob.RLock(ctx, "v/s")
	if err != nil {
		t.Fatal(err)
	}
	lead, err := alice.Campaign(ctx, "v/e", "alice-leads")
	if err != nil {
		t.Fatal(err)
	}
	wctx, stopWaiting := context.WithCancel(ctx)
	defer stopWaiting()
	waitDone := make(chan error, 2)
	go func() { _, err := bob.Lock(wctx, "v/a"); waitDone <- err }()
	go func() { _, err := bob.Campaign(wctx, "v/e", "bob-queues"); waitDone <- err }()
	for _, name := range []string{"v/a", "v/e"} {
		eventually(t, 10*time.Second, "bob queued on "+name, func() error {
			st, err := cl.LockState(ctx, name)
			if err == nil && st.Waiters != 1 {
				err = fmt.Errorf("%d waiters", st.Waiters)
			}
			return err
		})
	}

	reader, err := session.Open(ctx, cl, session.Name("reader"))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close(context.Background())

	// Every read route, on every node (followers forward), raw.
	seen := map[string]bool{}
	var bodies [][]byte
	for _, addr := range c.httpAddrs {
		for _, path := range []string{
			"/v1/locks?prefix=", "/v1/locks?prefix=v/",
			"/v1/lock?name=v/a", "/v1/lock?name=v/s", "/v1/lock?name=v/e",
			"/v1/lock?name=v/a&index=1&wait=1s", "/v1/lock?name=v/e&index=1&wait=1s",
			"/v1/cluster", "/v1/health", "/v1/sessions/" + reader.ID(),
		} {
			var data json.RawMessage
			getJSON(t, addr, path, &data)
			bodies = append(bodies, data)
			jsonStrings(t, data, seen)
		}
	}
	// Elections through the Go client: the current leader, and Observe.
	ld, err := session.CurrentLeader(ctx, cl, "v/e")
	if err != nil || ld.Value != "alice-leads" || ld.SessionHandle != alice.Handle() || ld.SessionName != "alice" {
		t.Fatalf("leader %+v %v, want alice's", ld, err)
	}
	octx, stopObserving := context.WithCancel(ctx)
	leaders, err := session.Observe(octx, cl, "v/e")
	if err != nil {
		t.Fatal(err)
	}
	observed := <-leaders
	stopObserving()
	if observed.SessionHandle != alice.Handle() {
		t.Fatalf("observed %+v, want alice's session handle %s", observed, alice.Handle())
	}
	for _, l := range []session.Leader{ld, observed} {
		data, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, data)
		jsonStrings(t, data, seen)
	}
	for _, body := range bodies {
		for _, victim := range []*session.Session{alice, bob} {
			if bytes.Contains(body, []byte(victim.ID())) {
				t.Fatalf("a read answer carries session %s's id: %s", victim.Name(), body)
			}
		}
	}
	if !seen[alice.Handle()] || !seen[bob.Handle()] || !seen["alice"] || !seen["bob"] {
		t.Fatalf("the answers do not name the holders by handle and name: %v", slices.Sorted(maps.Keys(seen)))
	}

	// The reader's own id is its own; every other string is tried (but
	// the empty one, no id: its keepalive has no route).
	delete(seen, reader.ID())
	delete(seen, "")
	holders := []string{held.Holder(), shared.Holder(), lead.Holder()}
	locks := []string{"v/a", "v/s", "v/e"}
	refused := func(what string, err error, codes ...api.Code) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s succeeded", what)
		}
		if code := api.CodeOf(err); code != api.CodeInvalidArgument && !slices.Contains(codes, code) {
			t.Fatalf("%s: %v, want one of %v or invalid_argument", what, err, codes)
		}
	}
	for s := range seen {
		_, err := cl.KeepAlive(ctx, s)
		refused(fmt.Sprintf("keepalive of %q", s), err, api.CodeSessionNotFound)
		for _, name := range locks {
			for _, h := range holders {
				err := cl.Release(ctx, api.ReleaseRequest{Name: name, Session: s, Holder: h})
				refused(fmt.Sprintf("release of %s by session %q holder %s", name, s, h), err, api.CodeSessionNotFound, api.CodeNotHolder)
			}
		}
		_, err = cl.Acquire(ctx, api.AcquireRequest{Name: "v/stolen", Session: s, Holder: "thief"})
		refused(fmt.Sprintf("acquire in the name of %q", s), err, api.CodeSessionNotFound)
		refused(fmt.Sprintf("close of %q", s), cl.CloseSession(ctx, s), api.CodeSessionNotFound)
	}

	// The victims' sessions and locks are as they were.
	for _, s := range []*session.Session{alice, bob} {
		if _, err := cl.SessionInfo(ctx, s.ID()); err != nil || s.State() != session.Safe {
			t.Fatalf("session %s after the attempts: %v, %v", s.Name(), s.State(), err)
		}
	}
	for _, want := range []struct {
		name   string
		s      *session.Session
		l      *session.Lock
		mode   sequencer.Mode
		waiter bool
	}{{"v/a", alice, held, sequencer.Exclusive, true}, {"v/s", bob, shared, sequencer.Shared, false},
		{"v/e", alice, lead.Lock, sequencer.Exclusive, true}} {
		st, err := cl.LockState(ctx, want.name)
		if err != nil || st.Mode != want.mode || len(st.Holders) != 1 || st.Holders[0].SessionHandle != want.s.Handle() ||
			st.Holders[0].Holder != want.l.Holder() || st.Holders[0].Token != want.l.Token() || (st.Waiters == 1) != want.waiter {
			t.Fatalf("%s after the attempts: %+v %v", want.name, st, err)
		}
		select {
		case <-want.l.Lost():
			t.Fatalf("%s lost", want.name)
		default:
		}
	}
	if st, err := cl.LockState(ctx, "v/stolen"); err != nil || len(st.Holders) != 0 {
		t.Fatalf("v/stolen: %+v %v", st, err)
	}
	stopWaiting()
	for range 2 {
		if err := <-waitDone; !errors.Is(err, context.Canceled) {
			t.Fatalf("bob's wait: %v", err)
		}
	}
}

// A member record posted to a node's client HTTP port is refused (that
// route is served on the peer port only), the member table keeps the real
// addresses, and requests through a follower still reach the real leader.
func TestClientPortRefusesMemberRecords(t *testing.T) {
	ctx, c := ctxT(t), newHTTPCluster(t)
	cl := c.client(t)
	defer cl.CloseIdleConnections()
	_, li := c.leader()
	real := func() error {
		info, err := cl.Cluster(ctx)
		if err != nil {
			return err
		}
		for i, m := range info.Members {
			if m.HTTPAddr != c.httpAddrs[i] || m.ID != c.id(i) {
				return fmt.Errorf("members %+v, want HTTP addresses %v", info.Members, c.httpAddrs)
			}
		}
		return nil
	}
	// The followers registered over the peer port.
	eventually(t, 10*time.Second, "every member's HTTP address", real)

	evil := c.listen("127.0.0.1:0")
	defer evil.Close()
	for i, addr := range c.httpAddrs {
		for _, id := range []string{c.id(i), c.id(li), "n9"} {
			body := fmt.Sprintf(`{"id":%q,"raft_addr":%q,"http_addr":%q}`, id, c.addrs[i], evil.Addr())
			a := rawPost(ctx, addr, "/v1/internal/members", json.RawMessage(body))
			if a.err != nil || a.status != http.StatusNotFound || a.code != string(api.CodeNotFound) {
				t.Fatalf("forged member %s at %s: %d %s %v, want 404 not_found", id, addr, a.status, a.code, a.err)
			}
		}
	}
	if err := real(); err != nil {
		t.Fatal(err)
	}
	f := (li + 1) % len(c.httpAddrs)
	via, err := client.NewClient([]string{c.httpAddrs[f]})
	if err != nil {
		t.Fatal(err)
	}
	defer via.CloseIdleConnections()
	info, err := via.OpenSession(ctx, api.OpenRequest{Name: "via-follower"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := via.Acquire(ctx, api.AcquireRequest{Name: "m/x", Session: info.ID, Holder: "h"}); err != nil {
		t.Fatal(err)
	}
	n, _ := c.leader()
	if st, err := n.LockState(ctx, "m/x"); err != nil || len(st.Holders) != 1 || st.Holders[0].SessionHandle != api.SessionHandle(info.ID) {
		t.Fatalf("the leader's m/x: %+v %v", st, err)
	}
}

// Nothing a cluster logs, at any level, names a session by its id: not an
// expiry (INFO), not a refused request on either port (DEBUG, with the
// request's path), not a forwarded one (TRACE).
func TestLogsNameNoSessionID(t *testing.T) {
	// Every node appends its lines to one file: each line is one write.
	logs, err := os.OpenFile(filepath.Join(t.TempDir(), "logs"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: cfg.ID, Level: hclog.Trace, Output: logs})
	}, withHTTP)
	c.leader()
	ctx := ctxT(t)
	var ids []string
	for _, addr := range c.httpAddrs {
		cl, err := client.NewClient([]string{addr})
		if err != nil {
			t.Fatal(err)
		}
		defer cl.CloseIdleConnections()
		info, err := cl.OpenSession(ctx, api.OpenRequest{Name: "logged", TTL: time.Second, LockDelay: api.NoLockDelay})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, info.ID)
		if _, err := cl.Acquire(ctx, api.AcquireRequest{Name: "log/" + addr, Session: info.ID, Holder: "h"}); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.SessionInfo(ctx, info.ID); err != nil {
			t.Fatal(err)
		}
		if err := cl.Release(ctx, api.ReleaseRequest{Name: "log/" + addr, Session: info.ID, Holder: "other"}); !errors.Is(err, api.ErrNotHolder) {
			t.Fatalf("release by another holder: %v", err)
		}
		// Refused at the route (no such method), then by the node.
		if a := rawPost(ctx, addr, "/v1/sessions/"+info.ID, nil); a.status != http.StatusMethodNotAllowed {
			t.Fatalf("POST /v1/sessions/ID: %d %s", a.status, a.code)
		}
	}
	// The sessions expire (no keepalives): the leader logs each expiry.
	cl := c.client(t)
	defer cl.CloseIdleConnections()
	for _, id := range ids {
		eventually(t, 20*time.Second, "session expired", func() error {
			_, err := cl.KeepAlive(ctx, "not-"+id) // a refused request of its own
			if !errors.Is(err, api.ErrSessionNotFound) {
				return fmt.Errorf("keepalive of an unknown session: %v", err)
			}
			if _, err := cl.SessionInfo(ctx, id); !errors.Is(err, api.ErrSessionNotFound) {
				return fmt.Errorf("session still open: %v", err)
			}
			return nil
		})
		if _, err := cl.KeepAlive(ctx, id); !errors.Is(err, api.ErrSessionNotFound) {
			t.Fatalf("keepalive of an expired session: %v", err)
		}
	}
	data, err := os.ReadFile(logs.Name())
	if err != nil {
		t.Fatal(err)
	}
	out := string(data)
	if !strings.Contains(out, "session expired") || !strings.Contains(out, "request refused") {
		t.Fatalf("the logs miss the lines under test:\n%s", out)
	}
	for _, id := range ids {
		if strings.Contains(out, id) {
			for _, line := range strings.Split(out, "\n") {
				if strings.Contains(line, id) {
					t.Errorf("a log line names session id %s: %s", id, line)
				}
			}
		}
		if !strings.Contains(out, api.SessionHandle(id)) {
			t.Errorf("no log line names session handle %s", api.SessionHandle(id))
		}
	}
}
