package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/cmd/internal/proccluster"
	"github.com/raftlock/raftlock/session"
	"github.com/raftlock/raftlock/transport/client"
)

// TestClientFollowsAFullMembershipRotation pins issue 26, item 7: a Go
// client given only the original members n1-n3, with a session holding a
// lock (its keepalive loop running) and a watch, keeps both through the
// replacement of every member one by one (add n4, remove n1, add n5,
// remove n2, add n6, remove n3): the session never leaves safe, the lock
// is never lost, the watch reports a change made after each step. A
// removed node, still running, answers no_leader naming the leader's HTTP
// address. Once the removed nodes are stopped too, the client still
// works, and its address list becomes the new members'.
func TestClientFollowsAFullMembershipRotation(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs raftlockd processes")
	}
	c := proccluster.Start(t, proccluster.BuildDaemon(t), 3)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	// The test's own operations go to the members of the moment, through
	// clients that do not follow the cluster by themselves.
	members := []int{0, 1, 2}
	ctl := func() *client.Client {
		var addrs []string
		for _, i := range members {
			addrs = append(addrs, c.Nodes[i].HTTPAddr)
		}
		cl, err := client.NewClient(addrs, client.WithMemberSync(-1))
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}

	// The client under test: given n1-n3 only.
	user, err := client.NewClient(c.Addrs())
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		events []session.Event
	)
	s, err := session.Open(ctx, user, session.Name("rotating"), session.OnEvent(func(ev session.Event) {
		mu.Lock()
		events = append(events, ev)
		mu.Unlock()
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer closeWithin(s, 5*time.Second)
	held, err := s.Lock(ctx, "rotation/held")
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	watch, err := s.Watch(wctx, "rotation/watched")
	if err != nil {
		t.Fatal(err)
	}
	<-watch // its first state
	// changed makes a change of the watched lock (from a session of the
	// members of the moment) and waits for the watch to report it.
	changed := func(step string) {
		t.Helper()
		other, err := session.Open(ctx, ctl(), session.Name("changer"))
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		defer closeWithin(other, 5*time.Second)
		l, err := other.TryLock(ctx, "rotation/watched", session.Value(step))
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		timeout := time.After(30 * time.Second)
		for {
			select {
			case st := <-watch:
				if len(st.Holders) == 1 && st.Holders[0].Value == step {
					if err := l.Unlock(ctx); err != nil {
						t.Fatalf("%s: %v", step, err)
					}
					return
				}
			case <-timeout:
				t.Fatalf("%s: the watch did not report the lock's change within 30 s (session %v)", step, s.State())
			}
		}
	}
	check := func(step string) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range events {
			t.Fatalf("%s: the session went %v (%v)", step, ev.State, ev.Err)
		}
		select {
		case <-held.Lost():
			t.Fatalf("%s: the lock was lost", step)
		default:
		}
	}
	changed("start")

	for range 3 {
		cl := ctl()
		n := c.Join(cl.Addrs())
		members = append(members, n)
		var ids []string
		for _, i := range members {
			ids = append(ids, c.Nodes[i].ID)
		}
		awaitVoters(t, cl, ids...)
		gone := members[0]
		if err := cl.RemoveMember(ctx, c.Nodes[gone].ID, false); err != nil {
			t.Fatal(err)
		}
		members = members[1:]
		awaitVoters(t, ctl(), ids[1:]...)
		step := fmt.Sprintf("added %s, removed %s", c.Nodes[n].ID, c.Nodes[gone].ID)
		changed(step)
		check(step)
		t.Logf("%s; the client's addresses: %v", step, user.Addrs())
	}

	// A removed node, still running, names the leader.
	leader, err := ctl().Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var leaderAddr string
	for _, m := range leader.Members {
		if m.ID == leader.Leader {
			leaderAddr = m.HTTPAddr
		}
	}
	proccluster.Eventually(t, 10*time.Second, "a removed node's answer to name the leader", func() error {
		return namesLeader(ctx, c.Nodes[0].HTTPAddr, leaderAddr)
	})

	// The removed nodes stop: the client goes on with what it learned.
	for i := range 3 {
		c.Kill(i)
	}
	changed("removed nodes stopped")
	check("removed nodes stopped")
	// The lock is still the session's, and it is usable.
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lock(ctx, "rotation/held"); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, i := range members {
		want = append(want, c.Nodes[i].HTTPAddr)
	}
	slices.Sort(want)
	proccluster.Eventually(t, 2*client.DefaultMemberSync, "the client's addresses to become the members'", func() error {
		got := user.Addrs()
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("addresses %v, want %v", got, want)
		}
		return nil
	})
}

// namesLeader checks that the node at addr answers a lock read with
// 503 no_leader and X-Raftlock-Leader-Addr leaderAddr.
func namesLeader(ctx context.Context, addr, leaderAddr string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/lock?name=x", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var er api.ErrorReply
	_ = json.Unmarshal(body, &er)
	if resp.StatusCode != http.StatusServiceUnavailable || er.Error.Code != string(api.CodeNoLeader) {
		return fmt.Errorf("HTTP %d %s", resp.StatusCode, body)
	}
	if got := resp.Header.Get(api.HeaderLeaderAddr); got != leaderAddr {
		return fmt.Errorf("%s %q names leader address %q, want %q", api.HeaderLeaderAddr, body, got, leaderAddr)
	}
	return nil
}
