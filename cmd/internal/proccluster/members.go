package proccluster

import (
	"fmt"
	"syscall"
	"time"
)

// Args returns a copy of node i's command line (its flags).
func (c *Cluster) Args(i int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.Nodes[i].args...)
}

// SetArgs sets node i's command line for its next Restart.
func (c *Cluster) SetArgs(i int, args []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.Nodes[i].args = append([]string(nil), args...)
}

// Flag returns the value of flag name ("--data-dir") on node i's command
// line ("" if absent).
func (c *Cluster) Flag(i int, name string) string {
	args := c.Args(i)
	for j := 0; j+1 < len(args); j++ {
		if args[j] == name {
			return args[j+1]
		}
	}
	return ""
}

// Wait waits up to timeout for node i's process to exit by itself and
// returns its exit code.
func (c *Cluster) Wait(i int, timeout time.Duration) (int, error) {
	c.mu.Lock()
	n := c.Nodes[i]
	exit := n.exit
	c.mu.Unlock()
	if exit == nil {
		return 0, fmt.Errorf("%s was never started", n.ID)
	}
	select {
	case <-exit:
		c.mu.Lock()
		defer c.mu.Unlock()
		return n.code, nil
	case <-time.After(timeout):
		return 0, fmt.Errorf("%s still runs after %v", n.ID, timeout)
	}
}

// Stop sends SIGTERM to node i and waits up to timeout for it to exit,
// returning its exit code.
func (c *Cluster) Stop(i int, timeout time.Duration) (int, error) {
	c.mu.Lock()
	cmd := c.Nodes[i].cmd
	c.mu.Unlock()
	if cmd == nil {
		return 0, fmt.Errorf("%s is not running", c.Nodes[i].ID)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return 0, err
	}
	return c.Wait(i, timeout)
}
