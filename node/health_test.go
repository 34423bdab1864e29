package node

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/raftlock/raftlock/api"
)

// health GETs /v1/health at addr: its status and body.
func health(ctx context.Context, addr string) (int, api.HealthInfo, error) {
	return healthAt(ctx, addr, "/v1/health")
}

// healthAt GETs path at addr: its status and HealthInfo body.
func healthAt(ctx context.Context, addr, path string) (int, api.HealthInfo, error) {
	var h api.HealthInfo
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return 0, h, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, h, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return resp.StatusCode, h, fmt.Errorf("decode health: %w", err)
	}
	return resp.StatusCode, h, nil
}

// awaitHealth polls addr's /v1/health until it answers status, and
// returns how long that took.
func awaitHealth(t *testing.T, addr string, status int, timeout time.Duration) (time.Duration, api.HealthInfo) {
	t.Helper()
	start := time.Now()
	var h api.HealthInfo
	eventually(t, timeout, fmt.Sprintf("health of %s is %d", addr, status), func() error {
		got, hi, err := health(context.Background(), addr)
		if err != nil {
			return err
		}
		if got != status {
			return fmt.Errorf("HTTP %d %+v", got, hi)
		}
		h = hi
		return nil
	})
	return time.Since(start), h
}

// TestHealthIs503WithoutQuorum: with 2 of 3 nodes stopped, the third's
// /v1/health answers 503 with a reason within the election timeout + 1 s
// (the last node being the leader, which must notice it reaches no
// quorum), with the fields pollers read; ?stale still answers 200; with
// the two restarted, 200 again; and the same when the last node is a
// follower (which stops hearing from a leader).
func TestHealthIs503WithoutQuorum(t *testing.T) {
	c := newTestCluster(t, 3, nil, withHTTP)
	_, li := c.leader()
	for i := range c.httpAddrs {
		awaitHealth(t, c.httpAddrs[i], http.StatusOK, 10*time.Second)
	}
	var others []int
	for i := range 3 {
		if i != li {
			others = append(others, i)
		}
	}
	c.stop(others[0])
	start := time.Now()
	c.stop(others[1])
	_, h := awaitHealth(t, c.httpAddrs[li], http.StatusServiceUnavailable, DefaultElectionTimeout+time.Second)
	t.Logf("503 %v after stopping the second node: %+v", time.Since(start).Round(time.Millisecond), h)
	if h.OK || h.Reason == "" {
		t.Errorf("503 body %+v: want ok false and a reason", h)
	}
	if got, _, err := healthStale(c.httpAddrs[li]); err != nil || got != http.StatusOK {
		t.Errorf("?stale: HTTP %d, %v; want 200", got, err)
	}
	c.start(others[0])
	c.start(others[1])
	for i := range c.httpAddrs {
		awaitHealth(t, c.httpAddrs[i], http.StatusOK, 20*time.Second)
	}

	// Again with a follower left alone: it stops hearing from a leader.
	_, li = c.leader()
	last := (li + 1) % 3
	c.stop(li)
	start = time.Now()
	c.stop(3 - li - last)
	_, h = awaitHealth(t, c.httpAddrs[last], http.StatusServiceUnavailable, DefaultElectionTimeout+time.Second)
	t.Logf("follower: 503 %v after stopping the second node: %+v", time.Since(start).Round(time.Millisecond), h)
}

func healthStale(addr string) (int, api.HealthInfo, error) {
	return healthAt(context.Background(), addr, "/v1/health?stale")
}

// TestHealthIs503OffTheConfiguration: a node removed from the Raft
// configuration answers 503 saying so (or that it lost its leader), and
// 200 again once it is added back.
func TestHealthIs503OffTheConfiguration(t *testing.T) {
	c := newTestCluster(t, 3, nil, withHTTP)
	ln, li := c.leader()
	victim := (li + 1) % 3
	for i := range c.httpAddrs {
		awaitHealth(t, c.httpAddrs[i], http.StatusOK, 10*time.Second)
	}
	if err := ln.raft.RemoveServer(raft.ServerID(c.id(victim)), 0, 10*time.Second).Error(); err != nil {
		t.Fatalf("remove %s: %v", c.id(victim), err)
	}
	_, h := awaitHealth(t, c.httpAddrs[victim], http.StatusServiceUnavailable, DefaultElectionTimeout+time.Second)
	t.Logf("removed %s: %+v", c.id(victim), h)
	eventually(t, 10*time.Second, "the removed node says it is no member", func() error {
		_, h, err := health(context.Background(), c.httpAddrs[victim])
		if err != nil {
			return err
		}
		if h.OK || h.Reason != fmt.Sprintf("node %s is not a member of the cluster's configuration", c.id(victim)) {
			return fmt.Errorf("%+v", h)
		}
		return nil
	})
	ln, _ = c.leader()
	if err := ln.raft.AddVoter(raft.ServerID(c.id(victim)), raft.ServerAddress(c.addrs[victim]), 0, 10*time.Second).Error(); err != nil {
		t.Fatalf("add %s back: %v", c.id(victim), err)
	}
	awaitHealth(t, c.httpAddrs[victim], http.StatusOK, 20*time.Second)
}
