// Package iptables manages one process's chain of iptables rules: the
// black holes of the end-to-end tests (cmd/internal/proccluster) and the
// partitions of the fault checker (cmd/raftlock-check). A chain is named
// after a prefix and the owning process's pid, jumped to from OUTPUT (every
// loopback packet passes OUTPUT once), and removed by Close; opening one
// first removes the chains of the same prefix whose processes are gone.
package iptables

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// commandTimeout bounds one iptables command.
const commandTimeout = 20 * time.Second

// Chain is a chain of DROP rules owned by this process.
type Chain struct {
	bin  string
	name string
}

// Open sets up this process's chain prefix+pid, trying iptables,
// iptables-nft and iptables-legacy in turn, after removing the chains of
// processes that are gone. It reports why none is usable (not root, not
// installed).
func Open(ctx context.Context, prefix string) (*Chain, error) {
	var errs []error
	for _, bin := range []string{"iptables", "iptables-nft", "iptables-legacy"} {
		path, err := exec.LookPath(bin)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c := &Chain{bin: path, name: prefix + strconv.Itoa(os.Getpid())}
		c.removeStale(ctx, prefix)
		if err := c.setup(ctx); err != nil {
			errs = append(errs, err)
			c.Close()
			continue
		}
		return c, nil
	}
	return nil, fmt.Errorf("iptables unusable (need root and iptables; apt-get install -y iptables): %w", errors.Join(errs...))
}

// Drop appends a rule dropping the TCP packets that match (iptables match
// arguments such as "-s", ip, "--dport", port): they vanish, with no
// reset, as in a black hole.
func (c *Chain) Drop(ctx context.Context, match ...string) error {
	args := append([]string{"-A", c.name, "-p", "tcp"}, match...)
	return c.run(ctx, append(args, "-j", "DROP")...)
}

// Flush removes every rule of the chain.
func (c *Chain) Flush(ctx context.Context) error { return c.run(ctx, "-F", c.name) }

// Close removes the jump to the chain and the chain.
func (c *Chain) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for c.run(ctx, "-D", "OUTPUT", "-j", c.name) == nil {
	}
	_ = c.run(ctx, "-F", c.name)
	_ = c.run(ctx, "-X", c.name)
}

// run runs one iptables command.
func (c *Chain) run(ctx context.Context, args ...string) error {
	cctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	out, err := exec.CommandContext(cctx, c.bin, append([]string{"-w", "5"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", c.bin, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// setup creates the chain (or empties it) and jumps to it from OUTPUT.
func (c *Chain) setup(ctx context.Context) error {
	if err := c.run(ctx, "-N", c.name); err != nil {
		if err := c.run(ctx, "-F", c.name); err != nil {
			return err
		}
	}
	if c.run(ctx, "-C", "OUTPUT", "-j", c.name) == nil {
		return nil
	}
	return c.run(ctx, "-I", "OUTPUT", "-j", c.name)
}

// removeStale removes the chains named prefix+pid of processes that are
// gone.
func (c *Chain) removeStale(ctx context.Context, prefix string) {
	cctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	out, err := exec.CommandContext(cctx, c.bin, "-w", "5", "-S").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		suffix, ok := strings.CutPrefix(strings.TrimSpace(line), "-N "+prefix)
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(suffix)
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		stale := &Chain{bin: c.bin, name: prefix + suffix}
		stale.Close()
	}
}
