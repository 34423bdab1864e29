package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/cmd/internal/proccluster"
)

// cluster is three real raftlockd processes on 127.0.0.1, driven over
// plain HTTP (not the Go client) to check the wire contract from outside.
type cluster struct {
	*proccluster.Cluster
}

type apiError struct {
	Status int
	Code   string
}

func (e *apiError) Error() string { return fmt.Sprintf("HTTP %d %s", e.Status, e.Code) }

// call sends one request to addr and decodes the JSON answer into out.
func call(addr, method, path string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, "http://"+addr+path, rd)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.Unmarshal(data, &e)
		return &apiError{Status: resp.StatusCode, Code: e.Error.Code}
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// callAny tries every node until one answers without a transient error
// (a killed node's refused connection is one).
func (c *cluster) callAny(method, path string, body, out any) error {
	var err error
	for _, addr := range c.Addrs() {
		err = call(addr, method, path, body, out)
		if ae, ok := err.(*apiError); err == nil || ok && ae.Code != "no_leader" && ae.Code != "unknown_outcome" {
			return err
		}
	}
	return err
}

type lockResp struct {
	Holders []struct {
		SessionHandle string `json:"session_handle"`
		SessionName   string `json:"session_name"`
		Holder        string
		Token         uint64
		Value         string
	}
	Waiters    int
	DelayUntil string `json:"delay_until"`
}

type grantResp struct {
	Token     uint64
	Sequencer string
}

// TestEndToEndKillLeader drives three raftlockd processes over HTTP and
// kill -9s the leader.
func TestEndToEndKillLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs real processes")
	}
	c := cluster{proccluster.Start(t, proccluster.BuildDaemon(t), 3)}
	var cl struct {
		Leader  string
		Term    uint64
		Members []struct{ ID, HTTPAddr string } `json:"members"`
	}
	proccluster.Eventually(t, 20*time.Second, "leader", func() error { return c.callAny("GET", "/v1/cluster", nil, &cl) })

	var s1, s2 struct{ ID string }
	proccluster.Eventually(t, 10*time.Second, "open", func() error {
		return c.callAny("POST", "/v1/sessions", map[string]string{"name": "live", "ttl": "3s"}, &s1)
	})
	if err := c.callAny("POST", "/v1/sessions", map[string]string{"name": "dying", "ttl": "1s", "lock_delay": "2s"}, &s2); err != nil {
		t.Fatal(err)
	}
	stopKA := make(chan struct{})
	kaErr := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stopKA:
				kaErr <- nil
				return
			case <-time.After(500 * time.Millisecond):
			}
			if err := c.callAny("POST", "/v1/sessions/"+s1.ID+"/keepalive", nil, nil); err != nil {
				if ae, ok := err.(*apiError); ok && ae.Code == "session_not_found" {
					kaErr <- err
					return
				}
			}
		}
	}()
	var gx, gy grantResp
	if err := c.callAny("POST", "/v1/acquire", map[string]string{"name": "e2e/x", "session": s1.ID, "holder": "h1", "value": "me"}, &gx); err != nil {
		t.Fatal(err)
	}
	if err := c.callAny("POST", "/v1/acquire", map[string]string{"name": "e2e/y", "session": s2.ID, "holder": "h1"}, &gy); err != nil {
		t.Fatal(err)
	}
	// Bad input leaves state unchanged and the server serving.
	for _, bad := range []struct {
		path, body, code string
	}{
		{"/v1/acquire", `{"name":`, "invalid_argument"},
		{"/v1/acquire", `{"name":"e2e/x","session":"` + s2.ID + `","holder":"h9","bogus":1}`, "invalid_argument"},
		{"/v1/acquire", `{"name":"","session":"` + s2.ID + `","holder":"h9"}`, "invalid_argument"},
		{"/v1/acquire", `{"name":"e2e/x","session":"` + s2.ID + `","holder":"h9"}`, "lock_busy"},
		{"/v1/release", `{"name":"e2e/x","session":"` + s2.ID + `","holder":"h9"}`, "not_holder"},
		{"/v1/sessions", `{"ttl":"-1s"}`, "invalid_argument"},
	} {
		resp, err := http.Post("http://"+c.Nodes[0].HTTPAddr+bad.path, "application/json", strings.NewReader(bad.body))
		if err != nil {
			t.Fatal(err)
		}
		var e struct{ Error struct{ Code string } }
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if e.Error.Code != bad.code {
			t.Errorf("POST %s %s: code %q, want %q", bad.path, bad.body, e.Error.Code, bad.code)
		}
	}

	// kill -9 the leader; time until the next successful acquire.
	leader := -1
	for i, n := range c.Nodes {
		if n.ID == cl.Leader {
			leader = i
		}
	}
	if leader < 0 {
		t.Fatalf("leader %q not among processes", cl.Leader)
	}
	killed := time.Now()
	c.Kill(leader)
	var gz grantResp
	proccluster.Eventually(t, 20*time.Second, "acquire after kill -9", func() error {
		return c.callAny("POST", "/v1/acquire", map[string]string{"name": "e2e/z", "session": s1.ID, "holder": "h1"}, &gz)
	})
	t.Logf("failover: kill -9 of leader %s to next successful acquire: %v", cl.Leader, time.Since(killed))
	if gz.Token <= gy.Token {
		t.Fatalf("token after failover %d, want > %d", gz.Token, gy.Token)
	}
	var lx lockResp
	if err := c.callAny("GET", "/v1/lock?name=e2e/x", nil, &lx); err != nil {
		t.Fatal(err)
	}
	if len(lx.Holders) != 1 || lx.Holders[0].Token != gx.Token || lx.Holders[0].SessionHandle != api.SessionHandle(s1.ID) || lx.Holders[0].Value != "me" {
		t.Fatalf("e2e/x after failover: %+v, want held by %s with token %d", lx, s1.ID, gx.Token)
	}
	// The dying session expires; its lock comes free after the lock-delay
	// with a larger token.
	var gy2 grantResp
	proccluster.Eventually(t, 20*time.Second, "e2e/y after expiry and lock-delay", func() error {
		return c.callAny("POST", "/v1/acquire", map[string]string{"name": "e2e/y", "session": s1.ID, "holder": "h2"}, &gy2)
	})
	if gy2.Token <= gy.Token {
		t.Fatalf("e2e/y token %d, want > %d", gy2.Token, gy.Token)
	}
	if err := c.callAny("GET", "/v1/sessions/"+s2.ID, nil, nil); err == nil {
		t.Fatal("expired session still answers")
	}
	// The killed node restarts from its data dir and serves again.
	c.Restart(leader)
	proccluster.Eventually(t, 20*time.Second, "restarted node serves", func() error {
		var l lockResp
		if err := call(c.Nodes[leader].HTTPAddr, "GET", "/v1/lock?name=e2e/x", nil, &l); err != nil {
			return err
		}
		if len(l.Holders) != 1 || l.Holders[0].Token != gx.Token {
			return fmt.Errorf("lock via restarted node: %+v", l)
		}
		return nil
	})
	close(stopKA)
	if err := <-kaErr; err != nil {
		t.Fatalf("live session expired during the test: %v", err)
	}
}
