package httpapi

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/raftlock/raftlock/api"
)

// This file is how a node removed from the cluster answers: every request
// it would forward is answered no_leader at once, naming the current
// leader (X-Raftlock-Leader-Addr) when a member it knows of names one, so
// that a client given the old members finds the new ones.

const (
	// removedProbeEvery is how long a removed node reuses what its peers
	// said about the leader before it asks them again.
	removedProbeEvery = time.Second
	// removedProbeTimeout bounds one round of asking the peers.
	removedProbeTimeout = time.Second
	// maxRemovedPeers bounds how many peers one round asks.
	maxRemovedPeers = 16
)

// removedHint is a removed node's last answer of its peers: the leader
// they named, and when it was asked.
type removedHint struct {
	mu sync.Mutex
	at time.Time
	li api.LeaderInfo
}

// answerRemoved answers r when this node was removed from the cluster:
// no_leader, with the leader's headers as its peers name it. It reports
// whether it answered.
func (s *Server) answerRemoved(w http.ResponseWriter, r *http.Request) bool {
	removed, peers := s.svc.Removed()
	if !removed {
		return false
	}
	li := s.removedLeader(r.Context(), peers)
	msg := "this node was removed from the cluster (it is not in its Raft configuration) and serves nothing"
	if li.HTTPAddr != "" {
		setLeaderHeaders(w.Header(), li)
		msg += "; the leader is " + li.ID + " at " + li.HTTPAddr + " (term " + strconv.FormatUint(li.Term, 10) + "): send requests there"
	} else {
		msg += "; no member it knows of named the leader now: send requests to the cluster's current members"
	}
	s.writeError(w, r, api.Errorf(api.CodeNoLeader, "%s", msg))
	return true
}

// removedLeader returns the leader as the peers name it: asked over their
// peer ports (GET /v1/health, answered locally, and its leader headers),
// at most once a second, the highest term's answer that names an HTTP
// address winning. Zero when none names one.
func (s *Server) removedLeader(ctx context.Context, peers []string) api.LeaderInfo {
	h := &s.removed
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.at.IsZero() && time.Since(h.at) < removedProbeEvery {
		return h.li
	}
	if len(peers) > maxRemovedPeers {
		peers = peers[:maxRemovedPeers]
	}
	ctx, cancel := context.WithTimeout(ctx, removedProbeTimeout)
	defer cancel()
	answers := make(chan api.LeaderInfo, len(peers))
	for _, p := range peers {
		go func() { answers <- s.askPeerLeader(ctx, p) }()
	}
	var best api.LeaderInfo
	for range peers {
		li := <-answers
		if li.HTTPAddr != "" && li.Term >= best.Term {
			best = li
		}
	}
	h.at, h.li = time.Now(), best
	return best
}

// askPeerLeader asks the peer port peer whom it takes for the leader.
func (s *Server) askPeerLeader(ctx context.Context, peer string) api.LeaderInfo {
	u := &url.URL{Scheme: "http", Host: peer, Path: "/v1/health"}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return api.LeaderInfo{}
	}
	resp, err := s.proxy.RoundTrip(req)
	if err != nil {
		return api.LeaderInfo{}
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	term, _ := strconv.ParseUint(resp.Header.Get(api.HeaderTerm), 10, 64)
	return api.LeaderInfo{ID: resp.Header.Get(api.HeaderLeader), HTTPAddr: resp.Header.Get(api.HeaderLeaderAddr), Term: term}
}
