package main

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

// chainPrefix names the iptables chains of the checker; the suffix is the
// pid of the checker that owns the chain, so that concurrent runs keep
// their own rules and a run can remove the chains of dead ones.
const chainPrefix = "RLCHK-"

// firewall cuts Raft traffic between nodes, or a client process off from
// the cluster, with iptables rules in a dedicated chain, jumped to from
// OUTPUT (loopback packets all pass it). A rule between nodes matches a
// pair of node addresses and the Raft port of one of them, so runs on
// other ports are not affected; a client's rules match the client's own
// source address and the nodes' HTTP ports.
type firewall struct {
	bin   string
	chain string
}

// newFirewall sets up the run's chain, trying iptables, iptables-nft and
// iptables-legacy in turn. It first removes the chains of dead runs.
func newFirewall(ctx context.Context) (*firewall, error) {
	var errs []error
	for _, bin := range []string{"iptables", "iptables-nft", "iptables-legacy"} {
		path, err := exec.LookPath(bin)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		f := &firewall{bin: path, chain: chainPrefix + strconv.Itoa(os.Getpid())}
		f.removeStale(ctx)
		if err := f.setup(ctx); err != nil {
			errs = append(errs, err)
			f.close()
			continue
		}
		return f, nil
	}
	return nil, fmt.Errorf("iptables unusable (need root and iptables; apt-get install -y iptables): %w", errors.Join(errs...))
}

// run runs one iptables command.
func (f *firewall) run(ctx context.Context, args ...string) error {
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(cctx, f.bin, append([]string{"-w", "5"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", f.bin, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (f *firewall) setup(ctx context.Context) error {
	if err := f.run(ctx, "-N", f.chain); err != nil {
		if err := f.run(ctx, "-F", f.chain); err != nil {
			return err
		}
	}
	if f.run(ctx, "-C", "OUTPUT", "-j", f.chain) == nil {
		return nil
	}
	return f.run(ctx, "-I", "OUTPUT", "-j", f.chain)
}

// removeStale removes the chains of checkers that are no longer running.
func (f *firewall) removeStale(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(cctx, f.bin, "-w", "5", "-S").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		name, ok := strings.CutPrefix(strings.TrimSpace(line), "-N "+chainPrefix)
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(name)
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		stale := &firewall{bin: f.bin, chain: chainPrefix + name}
		stale.close()
	}
}

// partition cuts the Raft traffic between every node of a and every node
// of b, both ways.
func (f *firewall) partition(ctx context.Context, a, b []*nodeProc) error {
	for _, x := range a {
		for _, y := range b {
			for _, r := range [][2]*nodeProc{{x, y}, {y, x}} {
				src, dst := r[0], r[1]
				// src -> dst's Raft server, and src's Raft server -> dst.
				if err := f.run(ctx, "-A", f.chain, "-s", src.ip, "-d", dst.ip, "-p", "tcp",
					"--dport", strconv.Itoa(dst.raftPort), "-j", "DROP"); err != nil {
					return err
				}
				if err := f.run(ctx, "-A", f.chain, "-s", src.ip, "-d", dst.ip, "-p", "tcp",
					"--sport", strconv.Itoa(src.raftPort), "-j", "DROP"); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// cutClient drops every packet between the client address ip and the
// HTTP servers of nodes, both ways: its requests and the answers to them
// vanish, as on a broken network, with no reset to tell it. The rules
// name the nodes' ports, so a concurrent run whose client has the same
// address is not affected.
func (f *firewall) cutClient(ctx context.Context, ip string, nodes []*nodeProc) error {
	for _, n := range nodes {
		port := strconv.Itoa(n.httpPort)
		if err := f.run(ctx, "-A", f.chain, "-s", ip, "-d", n.ip, "-p", "tcp", "--dport", port, "-j", "DROP"); err != nil {
			return err
		}
		if err := f.run(ctx, "-A", f.chain, "-s", n.ip, "-d", ip, "-p", "tcp", "--sport", port, "-j", "DROP"); err != nil {
			return err
		}
	}
	return nil
}

// heal removes every rule of the run.
func (f *firewall) heal(ctx context.Context) error {
	return f.run(ctx, "-F", f.chain)
}

// close removes the run's chain and the jump to it.
func (f *firewall) close() {
	ctx, cancel := waitCtx(30 * time.Second)
	defer cancel()
	for f.run(ctx, "-D", "OUTPUT", "-j", f.chain) == nil {
	}
	_ = f.run(ctx, "-F", f.chain)
	_ = f.run(ctx, "-X", f.chain)
}
