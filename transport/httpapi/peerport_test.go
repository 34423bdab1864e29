package httpapi

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/transport/httpapi/httpapitest"
	"github.com/raftlock/raftlock/transport/raftnet"

	"github.com/hashicorp/raft"
)

// newPeerPort opens a peer port on 127.0.0.1 serving svc's API; both close
// at the end of the test.
func newPeerPort(t *testing.T, svc Service) *raftnet.RaftNet {
	t.Helper()
	return newTLSPeerPort(t, svc, nil)
}

// answerVotes answers every RequestVote reaching rn's Raft transport.
func answerVotes(ctx context.Context, rn *raftnet.RaftNet) {
	for {
		select {
		case <-ctx.Done():
			return
		case rpc := <-rn.Transport.Consumer():
			rpc.Respond(&raft.RequestVoteResponse{Granted: true}, nil)
		}
	}
}

// requestVote sends one RequestVote from `from` to `to` and fails the test
// unless it is granted.
func requestVote(t *testing.T, from, to *raftnet.RaftNet) {
	t.Helper()
	var resp raft.RequestVoteResponse
	target := to.Transport.LocalAddr()
	if err := from.Transport.RequestVote("n2", target, &raft.RequestVoteRequest{Term: 1}, &resp); err != nil {
		t.Fatalf("RequestVote over the peer port: %v", err)
	}
	if !resp.Granted {
		t.Fatal("RequestVote over the peer port: not granted")
	}
}

// getHealth asks the API on the peer port of rn for /v1/health.
func getHealth(t *testing.T, rn *raftnet.RaftNet) api.HealthInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+string(rn.Transport.LocalAddr())+"/v1/health", nil)
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatalf("API over the peer port: %v", err)
	}
	defer resp.Body.Close()
	var h api.HealthInfo
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("API over the peer port: HTTP %d, %v", resp.StatusCode, err)
	}
	return h
}

// TestPeerPortCarriesRaftAndTheAPI pins the peer port's one rule: Raft's
// RPCs and HTTP requests share the port, each reaching its own server.
func TestPeerPortCarriesRaftAndTheAPI(t *testing.T) {
	svc := httpapitest.New("n1")
	a, b := newPeerPort(t, svc), newPeerPort(t, httpapitest.New("n2"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go answerVotes(ctx, a)
	requestVote(t, b, a)
	if h := getHealth(t, a); !h.OK || h.Leader != svc.Leader().ID {
		t.Fatalf("health over the peer port: %+v", h)
	}
	requestVote(t, b, a) // Raft still served after an HTTP connection
}

// TestPeerPortSilentConnectionHoldsUpNoOne pins that the port sorts
// connections in their own goroutines: a peer that connects and sends
// nothing delays neither Raft nor the API.
func TestPeerPortSilentConnectionHoldsUpNoOne(t *testing.T) {
	a, b := newPeerPort(t, httpapitest.New("n1")), newPeerPort(t, httpapitest.New("n2"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go answerVotes(ctx, a)
	for range 3 {
		c, err := net.Dial("tcp", string(a.Transport.LocalAddr()))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	requestVote(t, b, a)
	getHealth(t, a)
}

// TestFollowerForwardsToTheLeadersPeerPort pins where forwarding goes: to
// the leader's peer port when it has one, so that a leader whose HTTP
// address nobody reaches (here: one that accepts and never answers) still
// serves what its followers forward.
func TestFollowerForwardsToTheLeadersPeerPort(t *testing.T) {
	leader := httpapitest.New("n1")
	port := newPeerPort(t, leader)
	follower := httpapitest.New("n2")
	follower.SetLeader(api.LeaderInfo{ID: "n1", HTTPAddr: httpapitest.FrozenAddr(t), PeerAddr: string(port.Transport.LocalAddr()), Term: 3})
	fts := newTestServer(t, follower)
	c := newTestClient(t, hostOf(fts))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.OpenSession(ctx, api.OpenRequest{Name: "via-peer-port"}); err != nil {
		t.Fatalf("open through the follower: %v", err)
	}
	if n := leader.Calls("*"); n != 1 {
		t.Fatalf("the leader served %d calls, want 1", n)
	}
	if n := follower.Calls("*"); n != 0 {
		t.Fatalf("the follower served %d calls itself", n)
	}
}
