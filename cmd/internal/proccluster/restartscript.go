package proccluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// PID returns node i's process id, 0 when Restart has not started it or
// Kill has killed it.
func (c *Cluster) PID(i int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cmd := c.Nodes[i].cmd; cmd != nil {
		return cmd.Process.Pid
	}
	return 0
}

// PIDList returns "n1=PID,n2=PID,..." of the nodes Restart runs, as
// raftlock-bench's --pids takes it.
func (c *Cluster) PIDList() string {
	var parts []string
	for i, n := range c.Nodes {
		if pid := c.PID(i); pid != 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", n.ID, pid))
		}
	}
	return strings.Join(parts, ",")
}

// RestartScript is for tools that kill nodes by PID and restart them
// themselves (raftlock-bench's --restart-cmd "<script> {id}"): it writes a
// shell script that starts the node whose id is its argument in the
// background, with the command line Restart uses, and prints its PID. The
// nodes it starts append their output to <id>.log beside the script, shown
// when the test fails, and are killed when the test ends; Restart, Kill,
// Freeze and PID do not know them. (A node killed from outside stays
// running to Restart until Kill reaps it.)
func (c *Cluster) RestartScript() string {
	c.t.Helper()
	dir := c.t.TempDir()
	var script strings.Builder
	script.WriteString("#!/bin/sh\ncase $1 in\n")
	for _, n := range c.Nodes {
		fmt.Fprintf(&script, "%s) %s >>%s 2>&1 </dev/null & echo $! >%s; echo $! ;;\n", n.ID,
			shellQuote(append([]string{c.bin}, n.args...)...),
			shellQuote(filepath.Join(dir, n.ID+".log")), shellQuote(filepath.Join(dir, n.ID+".pid")))
	}
	script.WriteString("esac\n")
	path := filepath.Join(dir, "restart.sh")
	if err := os.WriteFile(path, []byte(script.String()), 0o755); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() {
		for _, n := range c.Nodes {
			// The last PID the script printed for the node; those before
			// it were killed by the tool that restarted it.
			data, err := os.ReadFile(filepath.Join(dir, n.ID+".pid"))
			if err != nil {
				continue
			}
			if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			if log, err := os.ReadFile(filepath.Join(dir, n.ID+".log")); err == nil && c.t.Failed() {
				c.t.Logf("%s log (restarted by %s):\n%s", n.ID, path, log)
			}
		}
	})
	return path
}

// shellQuote quotes words for sh, each in single quotes.
func shellQuote(words ...string) string {
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(quoted, " ")
}
