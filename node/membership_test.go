package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/api/apitest"
	"github.com/raftlock/raftlock/transport/client"
	"github.com/raftlock/raftlock/transport/raftnet"
)

// slowRaft keeps one leader through a test that drives it directly on a
// loaded machine.
func slowRaft(cfg *Config) {
	cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 3*time.Second, 3*time.Second, 2*time.Second
}

// addNode starts a new node, n<len+1>, on fresh addresses with an empty
// data dir, serving HTTP when the cluster does; tweak sets its Config
// (e.g. Join) after the cluster's own tweak. It returns the node's index.
func (c *testCluster) addNode(tweak func(*Config)) int {
	c.t.Helper()
	i := len(c.dirs)
	c.dirs = append(c.dirs, filepath.Join(c.t.TempDir(), c.id(i)))
	var tr *raftnet.RaftNet
	var err error
	c.asNode(i, func() {
		tr, err = raftnet.NewRaftTCPTransport(raftnet.RaftTCPConfig{BindAddr: "127.0.0.1:0"})
	})
	if err != nil {
		c.t.Fatal(err)
	}
	c.addrs = append(c.addrs, string(tr.Transport.LocalAddr()))
	var ln net.Listener
	if c.http {
		ln = c.listen("127.0.0.1:0")
		c.httpAddrs = append(c.httpAddrs, ln.Addr().String())
	}
	c.mu.Lock()
	c.nodes, c.servers = append(c.nodes, nil), append(c.servers, nil)
	c.mu.Unlock()
	cfg := c.config(i)
	cfg.PeerPort = tr
	if tweak != nil {
		tweak(&cfg)
	}
	c.run(i, cfg, ln)
	return i
}

// joinVia makes a node join through the cluster's first HTTP addresses.
func joinVia(c *testCluster, nonVoter bool) func(*Config) {
	addrs := append([]string(nil), c.httpAddrs[:min(3, len(c.httpAddrs))]...)
	return func(cfg *Config) { cfg.Join = &JoinConfig{Addrs: addrs, NonVoter: nonVoter} }
}

// awaitMembers waits until the cluster's members are exactly want (id ->
// voter).
func awaitMembers(t *testing.T, cl *client.Client, want map[string]bool) {
	t.Helper()
	eventually(t, 30*time.Second, fmt.Sprintf("members %v", want), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		ms, err := cl.Members(ctx)
		if err != nil {
			return err
		}
		got := make(map[string]bool)
		for _, m := range ms {
			if m.HTTPAddr == "" {
				return fmt.Errorf("member %s has no HTTP address: %+v", m.ID, ms)
			}
			got[m.ID] = m.Voter
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("members %v", got)
		}
		return nil
	})
}

// load acquires and releases one lock in a loop through cl until stop,
// and reports the errors it met (the client retries no_leader itself).
type load struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	errs []error
	n    int
}

func startLoad(t *testing.T, cl *client.Client, session string) *load {
	l := &load{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for i := 0; ; i++ {
			select {
			case <-l.stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			h := fmt.Sprintf("load-%d", i)
			_, err := cl.Acquire(ctx, api.AcquireRequest{Name: "load", Session: session, Holder: h})
			if err == nil {
				err = cl.Release(ctx, api.ReleaseRequest{Name: "load", Session: session, Holder: h})
			}
			cancel()
			l.mu.Lock()
			if err != nil {
				l.errs = append(l.errs, err)
			} else {
				l.n++
			}
			l.mu.Unlock()
		}
	}()
	t.Cleanup(l.end)
	return l
}

func (l *load) end() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
}

// Replacing a dead member (members add n4 by --join, members remove n3),
// growing 3 to 5 and shrinking 5 to 3 under client load keeps every held
// lock with its holder and token and every live session, and the next
// grant of a lock has a larger token.
func TestReplaceGrowShrinkUnderLoadKeepsLocksSessionsAndTokens(t *testing.T) {
	c := newTestCluster(t, 3, slowRaft, withHTTP)
	cl := c.client(t)
	ctx := ctxT(t)
	s := mustOpen(t, c, api.OpenRequest{Name: "holder", TTL: 10 * time.Second})
	stopKA := c.keepAlive(s.ID, time.Second)
	held := map[string]api.Grant{}
	for _, name := range []string{"a", "b"} {
		held[name] = mustAcquire(t, c, api.AcquireRequest{Name: name, Session: s.ID, Holder: "h-" + name})
	}
	ls := mustOpen(t, c, api.OpenRequest{Name: "load", TTL: 10 * time.Second})
	stopLoadKA := c.keepAlive(ls.ID, time.Second)
	l := startLoad(t, cl, ls.ID)

	// Every member has registered its HTTP address.
	awaitMembers(t, cl, map[string]bool{"n1": true, "n2": true, "n3": true})
	_, lead := c.leader()
	dead := (lead + 1) % 3 // a follower dies
	c.stop(dead)
	n4 := c.addNode(joinVia(c, false))
	want := map[string]bool{"n1": true, "n2": true, "n3": true, c.id(n4): true}
	awaitMembers(t, cl, want)
	if err := cl.RemoveMember(ctx, c.id(dead), false); err != nil {
		t.Fatalf("remove dead %s: %v", c.id(dead), err)
	}
	delete(want, c.id(dead))
	awaitMembers(t, cl, want)

	// Grow to 5: n5 joins as a voter, n6 as a non-voter then made one.
	n5 := c.addNode(joinVia(c, false))
	n6 := c.addNode(joinVia(c, true))
	want[c.id(n5)], want[c.id(n6)] = true, false
	awaitMembers(t, cl, want)
	if err := cl.AddMember(ctx, api.Member{ID: c.id(n6), RaftAddr: c.addrs[n6], HTTPAddr: c.httpAddrs[n6], Voter: true}); err != nil {
		t.Fatalf("promote %s: %v", c.id(n6), err)
	}
	want[c.id(n6)] = true
	awaitMembers(t, cl, want)

	// Shrink to 3.
	for _, i := range []int{n5, n6} {
		if err := cl.RemoveMember(ctx, c.id(i), false); err != nil {
			t.Fatalf("remove %s: %v", c.id(i), err)
		}
		delete(want, c.id(i))
		c.stop(i)
	}
	awaitMembers(t, cl, want)

	l.end()
	if len(l.errs) > 0 {
		t.Errorf("load met %d errors, first %v", len(l.errs), l.errs[0])
	}
	if l.n == 0 {
		t.Error("load made no grant")
	}
	for name, g := range held {
		st, err := cl.LockState(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Holders) != 1 || st.Holders[0].Holder != "h-"+name || st.Holders[0].Token != g.Token {
			t.Errorf("lock %s: holders %+v, want h-%s with token %d", name, st.Holders, name, g.Token)
		}
	}
	if err := stopKA(); err != nil {
		t.Errorf("holder session: %v", err)
	}
	if err := stopLoadKA(); err != nil {
		t.Errorf("load session: %v", err)
	}
	if _, err := cl.SessionInfo(ctx, s.ID); err != nil {
		t.Errorf("holder session after the changes: %v", err)
	}
	for name, old := range held {
		if err := cl.Release(ctx, api.ReleaseRequest{Name: name, Session: s.ID, Holder: "h-" + name}); err != nil {
			t.Fatal(err)
		}
		g, err := cl.Acquire(ctx, api.AcquireRequest{Name: name, Session: s.ID, Holder: "h2-" + name})
		if err != nil {
			t.Fatal(err)
		}
		if g.Token <= old.Token {
			t.Errorf("next grant of %s: token %d, not above %d", name, g.Token, old.Token)
		}
	}
	t.Logf("load: %d grants during the membership changes", l.n)
}

// A removal that would leave fewer than 2 voters is refused with
// invalid_argument, unless forced; an unknown member is not_found.
func TestRemoveMemberRefusesFewerThanTwoVotersUnlessForced(t *testing.T) {
	c := newTestCluster(t, 3, slowRaft, withHTTP)
	cl := c.client(t)
	ctx := ctxT(t)
	_, lead := c.leader()
	a, b := (lead+1)%3, (lead+2)%3
	if err := cl.RemoveMember(ctx, "n9", false); api.CodeOf(err) != api.CodeNotFound {
		t.Errorf("remove n9: %v, want not_found", err)
	}
	if err := cl.RemoveMember(ctx, c.id(a), false); err != nil {
		t.Fatalf("remove %s (3 -> 2 voters): %v", c.id(a), err)
	}
	c.stop(a)
	err := cl.RemoveMember(ctx, c.id(b), false)
	if api.CodeOf(err) != api.CodeInvalidArgument || !strings.Contains(err.Error(), "force") {
		t.Fatalf("remove %s (2 -> 1 voter): %v, want invalid_argument naming force", c.id(b), err)
	}
	if err := cl.RemoveMember(ctx, c.id(b), true); err != nil {
		t.Fatalf("forced remove of %s: %v", c.id(b), err)
	}
	c.stop(b)
	ms, err := cl.Members(ctx)
	if err != nil || len(ms) != 1 || ms[0].ID != c.id(lead) {
		t.Fatalf("members after forced removal: %+v, %v", ms, err)
	}
}

// Leadership moves to the voter named, sessions survive it, and a
// transfer to an unknown member is not_found.
func TestTransferLeadershipMovesLeaderAndSessionsSurvive(t *testing.T) {
	c := newTestCluster(t, 3, slowRaft, withHTTP)
	cl := c.client(t)
	ctx := ctxT(t)
	s := mustOpen(t, c, api.OpenRequest{TTL: 10 * time.Second})
	g := mustAcquire(t, c, api.AcquireRequest{Name: "x", Session: s.ID, Holder: "h"})
	if _, err := cl.TransferLeadership(ctx, "n9"); api.CodeOf(err) != api.CodeNotFound {
		t.Errorf("transfer to n9: %v, want not_found", err)
	}
	_, lead := c.leader()
	to := c.id((lead + 1) % 3)
	r, err := cl.TransferLeadership(ctx, to)
	if err != nil {
		t.Fatal(err)
	}
	if r.From != c.id(lead) || r.To != to {
		t.Errorf("transfer answered %+v, want from %s to %s", r, c.id(lead), to)
	}
	if _, now := c.leader(); c.id(now) != to {
		t.Errorf("leader %s, want %s", c.id(now), to)
	}
	if _, err := cl.KeepAlive(ctx, s.ID); err != nil {
		t.Fatalf("keepalive after the transfer: %v", err)
	}
	st, err := cl.LockState(ctx, "x")
	if err != nil || len(st.Holders) != 1 || st.Holders[0].Token != g.Token {
		t.Fatalf("lock x after the transfer: %+v, %v", st, err)
	}
	// Without a target, any other voter takes over.
	r, err = cl.TransferLeadership(ctx, "")
	if err != nil || r.From != to || r.To == to {
		t.Fatalf("transfer without a target: %+v, %v", r, err)
	}
}

// wipe stops node i and empties its data dir.
func (c *testCluster) wipe(i int) {
	c.t.Helper()
	c.stop(i)
	if err := os.RemoveAll(c.dirs[i]); err != nil {
		c.t.Fatal(err)
	}
}

// startErr starts node i (stopped) with cfg changed by tweak, on its old
// addresses, and returns Start's error (a node that starts is stopped).
func (c *testCluster) startErr(i int, tweak func(*Config)) error {
	c.t.Helper()
	cfg := c.config(i)
	cfg.RaftBind = c.addrs[i]
	peers := make([]Peer, 3)
	for j := range peers {
		peers[j] = Peer{ID: c.id(j), RaftAddr: c.addrs[j]}
	}
	cfg.Peers = peers
	if tweak != nil {
		tweak(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n, err := Start(ctx, cfg)
	if err == nil {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		_ = n.Shutdown(sctx)
	}
	return err
}

// A member whose data dir was wiped, restarted with its old peers, does
// not bootstrap a second configuration: the probe finds its peers in a
// cluster and it refuses, naming the fix; with --join it refuses too
// while it is still a member. The cluster keeps its locks and sessions.
func TestWipedMemberDoesNotBootstrapAgainAndNamesTheFix(t *testing.T) {
	c := newTestCluster(t, 3, slowRaft, withHTTP)
	cl := c.client(t)
	ctx := ctxT(t)
	s := mustOpen(t, c, api.OpenRequest{TTL: 30 * time.Second})
	g := mustAcquire(t, c, api.AcquireRequest{Name: "x", Session: s.ID, Holder: "h"})
	_, lead := c.leader()
	w := (lead + 1) % 3
	c.wipe(w)
	err := c.startErr(w, func(cfg *Config) { cfg.ProbePeers = true })
	if err == nil || !strings.Contains(err.Error(), "belongs to a cluster already") ||
		!strings.Contains(err.Error(), "raftlock members remove "+c.id(w)) || !strings.Contains(err.Error(), "--join") {
		t.Fatalf("wiped %s restarted with its peers: %v, want a refusal naming members remove and --join", c.id(w), err)
	}
	err = c.startErr(w, func(cfg *Config) { cfg.Peers = nil; joinVia(c, false)(cfg) })
	if err == nil || !strings.Contains(err.Error(), "is a member of the cluster already") {
		t.Fatalf("wiped %s joining while a member: %v, want a refusal", c.id(w), err)
	}
	// The fix: remove it, then it joins.
	if err := cl.RemoveMember(ctx, c.id(w), false); err != nil {
		t.Fatal(err)
	}
	cfg := c.config(w)
	joinVia(c, false)(&cfg)
	c.run(w, cfg, c.listen(c.httpAddrs[w]))
	awaitMembers(t, cl, map[string]bool{"n1": true, "n2": true, "n3": true})
	st, err := cl.LockState(ctx, "x")
	if err != nil || len(st.Holders) != 1 || st.Holders[0].Token != g.Token {
		t.Fatalf("lock x: %+v, %v", st, err)
	}
	if _, err := cl.KeepAlive(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	// The joined node records the cluster's term and a vote in it.
	c.stop(w)
	store, err := raftboltdb.NewBoltStore(filepath.Join(c.dirs[w], "raft.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if term, _ := store.GetUint64([]byte("CurrentTerm")); term == 0 {
		t.Error("joined node's CurrentTerm is 0")
	}
}

// Nodes with empty data dirs that start together with the probe on
// bootstrap one configuration: every node's entry at index 1 is the same.
func TestProbedBootstrapFormsOneConfiguration(t *testing.T) {
	var trans []*raftnet.RaftNet
	var peers []Peer
	for i := 0; i < 3; i++ {
		tr, err := raftnet.NewRaftTCPTransport(raftnet.RaftTCPConfig{BindAddr: "127.0.0.1:0"})
		if err != nil {
			t.Fatal(err)
		}
		trans = append(trans, tr)
		peers = append(peers, Peer{ID: fmt.Sprintf("n%d", i+1), RaftAddr: string(tr.Transport.LocalAddr())})
	}
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	nodes := make([]*Node, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			nodes[i], errs[i] = Start(ctx, Config{ID: peers[i].ID, DataDir: dirs[i], PeerPort: trans[i], Peers: peers, ProbePeers: true, Wire: testWire{}})
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("n%d: %v", i+1, err)
		}
	}
	eventually(t, 20*time.Second, "a leader", func() error {
		for _, n := range nodes {
			if n.IsLeader() {
				return nil
			}
		}
		return errors.New("none")
	})
	for _, n := range nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = n.Shutdown(ctx)
		cancel()
	}
	var first string
	for i, dir := range dirs {
		got := entryAt1(t, dir)
		if i == 0 {
			first = got
		} else if got != first {
			t.Errorf("n%d's entry at index 1 is %s, n1's %s", i+1, got, first)
		}
	}
}

// entryAt1 describes the configuration entry at index 1 of the log in dir.
func entryAt1(t *testing.T, dir string) string {
	t.Helper()
	stores, err := openDataDirStores(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer stores.Close()
	var l raft.Log
	if err := stores.logs.GetLog(1, &l); err != nil {
		t.Fatalf("%s: index 1: %v", dir, err)
	}
	if l.Type != raft.LogConfiguration {
		t.Fatalf("%s: index 1 is a %v", dir, l.Type)
	}
	return fmt.Sprintf("term %d %v", l.Term, raft.DecodeConfiguration(l.Data).Servers)
}

// Peers that name this node at another address than its own are refused,
// with or without data.
func TestWrongOwnAddressInPeersIsRefused(t *testing.T) {
	tr, err := raftnet.NewRaftTCPTransport(raftnet.RaftTCPConfig{BindAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(Config{ID: "n1", DataDir: t.TempDir(), PeerPort: tr, Wire: testWire{},
		Peers: []Peer{{ID: "n1", RaftAddr: "127.0.0.1:1"}, {ID: "n2", RaftAddr: "127.0.0.1:2"}}})
	if err == nil || !strings.Contains(err.Error(), "its Raft address is "+string(tr.Transport.LocalAddr())) {
		t.Fatalf("New = %v, want a refusal naming the node's address", err)
	}
}

// A node with data given peers other than its configuration logs a WARN
// naming each difference, and keeps its configuration.
func TestChangedPeersOnNodeWithDataAreLoggedAsWarning(t *testing.T) {
	c := newTestCluster(t, 3, slowRaft)
	c.leader()
	c.stop(2)
	logs := &apitest.LogBuffer{}
	cfg := c.config(2)
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info})
	cfg.Peers = []Peer{{ID: "n1", RaftAddr: c.addrs[0]}, {ID: "n3", RaftAddr: c.addrs[2]}, {ID: "n4", RaftAddr: "127.0.0.1:9"}}
	c.run(2, cfg, nil)
	out := logs.String()
	for _, want := range []string{"[WARN]", "--peers differs", "n4=127.0.0.1:9 is in --peers, not in the configuration",
		"n2=" + c.addrs[1] + " is in the configuration, not in --peers"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}

// With ACLs on, a node joins with an admin token; a node without one is
// refused at start (unauthenticated).
func TestJoinWithACLsNeedsAnAdminToken(t *testing.T) {
	c := newTestCluster(t, 1, func(cfg *Config) { cfg.ACL = true }, withHTTP)
	n, _ := c.leader()
	admin, err := n.ACLBootstrap(ctxT(t), api.BootstrapRequest{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.config(0)
	cfg.ID, cfg.DataDir, cfg.RaftBind = "n9", t.TempDir(), "127.0.0.1:0"
	cfg.Join = &JoinConfig{Addrs: c.httpAddrs, Timeout: 5 * time.Second}
	if _, err := Start(ctxT(t), cfg); err == nil || !strings.Contains(err.Error(), "unauthenticated") {
		t.Fatalf("join without a token: %v, want unauthenticated", err)
	}
	i := c.addNode(func(cfg *Config) {
		cfg.Join = &JoinConfig{Addrs: append([]string(nil), c.httpAddrs[:1]...), Token: admin.Secret}
	})
	cl, err := client.NewClient(c.httpAddrs[:1], client.WithToken(admin.Secret))
	if err != nil {
		t.Fatal(err)
	}
	awaitMembers(t, cl, map[string]bool{"n1": true, c.id(i): true})
}

// AddMember changes an existing member's role: a voter is made a
// non-voter only if 2 voters remain, and back; a change of address and
// role at once, or another member's raft_addr, is invalid_argument.
func TestAddMemberChangesRolesWithinTheVoterMinimum(t *testing.T) {
	c := newTestCluster(t, 3, slowRaft, withHTTP)
	cl := c.client(t)
	ctx := ctxT(t)
	awaitMembers(t, cl, map[string]bool{"n1": true, "n2": true, "n3": true})
	_, lead := c.leader()
	a, b := (lead+1)%3, (lead+2)%3
	member := func(i int, voter bool) api.Member {
		return api.Member{ID: c.id(i), RaftAddr: c.addrs[i], HTTPAddr: c.httpAddrs[i], Voter: voter}
	}
	if err := cl.AddMember(ctx, member(a, false)); err != nil {
		t.Fatalf("make %s a non-voter: %v", c.id(a), err)
	}
	want := map[string]bool{"n1": true, "n2": true, "n3": true}
	want[c.id(a)] = false
	awaitMembers(t, cl, want)
	if err := cl.AddMember(ctx, member(b, false)); api.CodeOf(err) != api.CodeInvalidArgument {
		t.Errorf("make %s a non-voter with 2 voters: %v, want invalid_argument", c.id(b), err)
	}
	moved := member(b, false)
	moved.RaftAddr = "127.0.0.1:1"
	if err := cl.AddMember(ctx, moved); api.CodeOf(err) != api.CodeInvalidArgument {
		t.Errorf("move and demote %s at once: %v, want invalid_argument", c.id(b), err)
	}
	taken := api.Member{ID: "n9", RaftAddr: c.addrs[b], HTTPAddr: "127.0.0.1:2", Voter: true}
	if err := cl.AddMember(ctx, taken); api.CodeOf(err) != api.CodeInvalidArgument {
		t.Errorf("add n9 at %s's raft_addr: %v, want invalid_argument", c.id(b), err)
	}
	if err := cl.AddMember(ctx, member(a, true)); err != nil {
		t.Fatalf("make %s a voter again: %v", c.id(a), err)
	}
	awaitMembers(t, cl, map[string]bool{"n1": true, "n2": true, "n3": true})
}

// Two wiped members restarted together never elect each other on empty
// logs: with the third member down they wait for it (and bootstrap
// nothing); once it runs they refuse, for it holds the cluster.
func TestTwoWipedMembersNeverBootstrapWithoutTheThird(t *testing.T) {
	c := newTestCluster(t, 3, slowRaft, withHTTP)
	mustOpen(t, c, api.OpenRequest{TTL: 30 * time.Second})
	c.stop(0)
	c.wipe(1)
	c.wipe(2)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for _, i := range []int{1, 2} {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			cfg := c.config(i)
			cfg.Peers = []Peer{{ID: "n1", RaftAddr: c.addrs[0]}, {ID: "n2", RaftAddr: c.addrs[1]}, {ID: "n3", RaftAddr: c.addrs[2]}}
			cfg.ProbePeers = true
			n, err := Start(ctx, cfg)
			if err == nil {
				_ = n.Shutdown(context.Background())
			}
			errs[i] = err
		}(i)
	}
	wg.Wait()
	for _, i := range []int{1, 2} {
		if errs[i] == nil || !strings.Contains(errs[i].Error(), "not bootstrapping before every peer") {
			t.Errorf("wiped %s with n1 down: %v, want it to wait for n1", c.id(i), errs[i])
		}
	}
	c.start(0)
	err := c.startErr(1, func(cfg *Config) { cfg.ProbePeers = true })
	if err == nil || !strings.Contains(err.Error(), "belongs to a cluster already") {
		t.Fatalf("wiped n2 with n1 up: %v, want a refusal", err)
	}
}
