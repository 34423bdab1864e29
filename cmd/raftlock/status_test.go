package main

import (
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
