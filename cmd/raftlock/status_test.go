package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/cmd/internal/proccluster"
)

// TestStatusShowsEachMembersStateAndADeadOneUnreachable runs three
// raftlockd processes: status names one leader and two healthy followers
// with their applied index and lag; with a follower killed, status still
// answers (exit 0) and shows it unreachable. Every node's log names the
// leader it follows and the term, and its startup line the node id, data
// dir and log store.
func TestStatusShowsEachMembersStateAndADeadOneUnreachable(t *testing.T) {
	daemon, _ := binaries(t)
	c := proccluster.Start(t, daemon, 3, "--log-level", "info")
	ctx := ctxFor(t, time.Minute)
	li, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	status := func() (statusReport, string, error) {
		code, out, errOut := runCLI(t, "--addr", c.AddrList(), "-o", "json", "status")
		var rep statusReport
		if code != 0 {
			return rep, out, fmt.Errorf("exit %d: %s", code, errOut)
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			return rep, out, fmt.Errorf("decode %q: %w", out, err)
		}
		return rep, out, nil
	}
	leaderID := c.Nodes[li].ID
	proccluster.Eventually(t, 20*time.Second, "status shows a leader and two healthy followers", func() error {
		rep, out, err := status()
		if err != nil {
			return err
		}
		states := map[string]int{}
		for _, m := range rep.Members {
			if !m.Healthy || m.AppliedIndex == 0 || m.Lag == nil {
				return fmt.Errorf("member %s: %s", m.ID, out)
			}
			if m.State == "follower" && m.LastContactMillis == nil {
				return fmt.Errorf("follower %s without last contact: %s", m.ID, out)
			}
			states[m.State]++
		}
		if rep.Leader != leaderID || states["leader"] != 1 || states["follower"] != 2 {
			return fmt.Errorf("states %v: %s", states, out)
		}
		return nil
	})
	victim := (li + 1) % 3
	c.Kill(victim)
	proccluster.Eventually(t, 20*time.Second, "status shows the killed member unreachable", func() error {
		rep, out, err := status()
		if err != nil {
			return err
		}
		for _, m := range rep.Members {
			if m.ID == c.Nodes[victim].ID && m.State == "unreachable" {
				return nil
			}
		}
		return fmt.Errorf("%s", out)
	})
	code, out, errOut := runCLI(t, "--addr", c.AddrList(), "status")
	if code != 0 || !regexp.MustCompile(`(?m)^  `+c.Nodes[victim].ID+` +unreachable `).MatchString(out) ||
		!regexp.MustCompile(`(?m)^  `+leaderID+` +leader +ok `).MatchString(out) {
		t.Errorf("status text: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("status:\n%s", out)
	// A majority unreachable: status says so and exits non-zero.
	c.Kill((li + 2) % 3)
	proccluster.Eventually(t, 20*time.Second, "status with 2 of 3 members dead exits non-zero", func() error {
		code, out, errOut := runCLI(t, "--addr", c.AddrList(), "status")
		if code == 0 || errOut == "" {
			return fmt.Errorf("exit %d\n%s%s", code, out, errOut)
		}
		return nil
	})
	t.Logf("%s log:\n%s", c.Nodes[li].ID, c.Nodes[li].Log())
	for i, n := range c.Nodes {
		log := n.Log()
		if !strings.Contains(log, "leader changed: leader="+leaderID) || !regexp.MustCompile(`leader changed: .* term=\d+`).MatchString(log) {
			t.Errorf("%s's log does not name the leader %s and term:\n%s", n.ID, leaderID, log)
		}
		if i != victim && !regexp.MustCompile(`serving: id=`+n.ID+` .*data_dir=\S+ log_store=(wal|boltdb) log=\S+`).MatchString(log) {
			t.Errorf("%s's startup line lacks its id, data dir or log store:\n%s", n.ID, log)
		}
	}
}

// A member that has not registered its HTTP address yet (just after a
// bootstrap or a join) is "joining", not "unreachable", and does not count
// against the quorum; members without a scheme are asked over https://
// when the CLI talks TLS; a majority unreachable is an error.
func TestStatusJoiningMembersTLSAddressesAndNoQuorum(t *testing.T) {
	c := newCLI(&strings.Builder{}, &strings.Builder{})
	c.addrs = []string{"https://10.0.0.1:7001"}
	if got := c.memberURL("10.0.0.2:7001"); got != "https://10.0.0.2:7001" {
		t.Errorf("memberURL in a TLS cluster: %q", got)
	}
	c.addrs = []string{"10.0.0.1:7001"}
	if got := c.memberURL("10.0.0.2:7001"); got != "10.0.0.2:7001" {
		t.Errorf("memberURL in a plaintext cluster: %q", got)
	}
	c.caFile = "ca.pem"
	if got := c.memberURL("10.0.0.2:7001"); got != "https://10.0.0.2:7001" {
		t.Errorf("memberURL with --ca: %q", got)
	}
	joining := statusReport{Members: []memberStatus{{}}}
	c.askMembers(context.Background(), &joining)
	if m := joining.Members[0]; m.State != "joining" || m.Lag != nil {
		t.Errorf("a member without an HTTP address: %+v, want joining", m)
	}
	rep := statusReport{Members: []memberStatus{{State: "leader"}, {State: "joining"}, {State: "joining"}}}
	if err := noQuorum(rep); err != nil {
		t.Errorf("2 of 3 joining (just after a bootstrap): %v", err)
	}
	rep.Members[1].State = "unreachable"
	rep.Members[2].State = "unreachable"
	if err := noQuorum(rep); err == nil || !strings.Contains(err.Error(), "2 of 3 members unreachable") {
		t.Errorf("2 of 3 down: %v", err)
	}
}
