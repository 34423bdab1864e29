package proccluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// firewallChainPrefix names the iptables chains of these tests; the suffix
// is the pid of the test process that owns the chain, so that concurrent
// test binaries keep their own rules and a run can remove the chains of
// dead ones (like cmd/raftlock-check's RLCHK- chains).
const firewallChainPrefix = "RLPC-"

// Firewall drops TCP traffic on this host with iptables rules in a chain
// of its own, jumped to from OUTPUT: every packet on loopback passes
// OUTPUT once, so one rule matching a port catches both directions of a
// connection when it names the port as --dport and as --sport. A dropped
// packet is gone without a reset, the way a black hole in the network
// looks to both ends: calls hang until their own deadlines. The chain is
// removed when the test ends.
type Firewall struct {
	t     testing.TB
	bin   string
	chain string
}

// NewFirewall sets up the test's chain, trying iptables, iptables-nft and
// iptables-legacy in turn, after removing the chains of test processes
// that are gone. It reports why none is usable (not root, not installed).
func NewFirewall(t testing.TB) (*Firewall, error) {
	t.Helper()
	var errs []error
	for _, bin := range []string{"iptables", "iptables-nft", "iptables-legacy"} {
		path, err := exec.LookPath(bin)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		f := &Firewall{t: t, bin: path, chain: firewallChainPrefix + strconv.Itoa(os.Getpid())}
		f.removeStale()
		if err := f.setup(); err != nil {
			errs = append(errs, err)
			f.remove()
			continue
		}
		t.Cleanup(f.remove)
		return f, nil
	}
	return nil, fmt.Errorf("iptables unusable (need root and iptables; apt-get install -y iptables): %w", errors.Join(errs...))
}

// RequireFirewall returns a Firewall, or ends the test when iptables is
// unusable here: under CI (CI set in the environment), where the firewall
// must be there, it fails the test; elsewhere it skips it, saying why.
func RequireFirewall(t testing.TB) *Firewall {
	t.Helper()
	f, err := NewFirewall(t)
	if err == nil {
		return f
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("CI must run this test, but %v", err)
	}
	t.Skipf("SKIPPED: needs a usable firewall: %v", err)
	return nil
}

// DropPort drops every TCP packet to or from port on this host, both ways
// (DROP, no RST), until Heal: connections to a server on that port, open
// or new, carry nothing in either direction. The server keeps running,
// and its connections from its own ephemeral ports (e.g. Raft) still
// flow.
func (f *Firewall) DropPort(port int) {
	f.t.Helper()
	p := strconv.Itoa(port)
	for _, dir := range []string{"--dport", "--sport"} {
		if err := f.run("-A", f.chain, "-p", "tcp", dir, p, "-j", "DROP"); err != nil {
			f.t.Fatalf("drop port %d: %v", port, err)
		}
	}
}

// DropPortFor drops every TCP packet between the address peer and port on
// this host, both ways (DROP, no RST), until Heal: a client connecting from
// peer (e.g. 127.0.0.2) is cut off from the server on port, while every
// other address still reaches it.
func (f *Firewall) DropPortFor(port int, peer string) {
	f.t.Helper()
	p := strconv.Itoa(port)
	for _, rule := range [][]string{{"-s", peer, "--dport", p}, {"-d", peer, "--sport", p}} {
		args := append([]string{"-A", f.chain, "-p", "tcp"}, rule...)
		if err := f.run(append(args, "-j", "DROP")...); err != nil {
			f.t.Fatalf("drop port %d for %s: %v", port, peer, err)
		}
	}
}

// Heal removes every rule of the test's chain.
func (f *Firewall) Heal() {
	f.t.Helper()
	if err := f.run("-F", f.chain); err != nil {
		f.t.Fatalf("heal: %v", err)
	}
}

// HTTPPort returns the port of the node's HTTP API.
func (n *Node) HTTPPort() int {
	_, p, err := net.SplitHostPort(n.HTTPAddr)
	if err != nil {
		panic(fmt.Sprintf("node %s: HTTP address %q: %v", n.ID, n.HTTPAddr, err))
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		panic(fmt.Sprintf("node %s: HTTP address %q: %v", n.ID, n.HTTPAddr, err))
	}
	return port
}

// run runs one iptables command.
func (f *Firewall) run(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, f.bin, append([]string{"-w", "5"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", f.bin, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// setup creates the chain (or empties it) and jumps to it from OUTPUT.
func (f *Firewall) setup() error {
	if err := f.run("-N", f.chain); err != nil {
		if err := f.run("-F", f.chain); err != nil {
			return err
		}
	}
	if f.run("-C", "OUTPUT", "-j", f.chain) == nil {
		return nil
	}
	return f.run("-I", "OUTPUT", "-j", f.chain)
}

// remove removes the jump to the chain and the chain.
func (f *Firewall) remove() {
	for f.run("-D", "OUTPUT", "-j", f.chain) == nil {
	}
	_ = f.run("-F", f.chain)
	_ = f.run("-X", f.chain)
}

// removeStale removes the chains of test processes that are gone.
func (f *Firewall) removeStale() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, f.bin, "-w", "5", "-S").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		name, ok := strings.CutPrefix(strings.TrimSpace(line), "-N "+firewallChainPrefix)
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(name)
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		stale := &Firewall{t: f.t, bin: f.bin, chain: firewallChainPrefix + name}
		stale.remove()
	}
}
