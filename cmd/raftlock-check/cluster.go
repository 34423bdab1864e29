package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/raftlock/raftlock/internal/freeport"
)

// nodeProc is one raftlockd process (and its data, across restarts).
type nodeProc struct {
	id       string
	ip       string
	raftPort int
	httpPort int
	// streamPort is the node's --stream-addr port, served when the
	// cluster's stream is set (--client-proto stream).
	streamPort int
	dataDir    string
	logPath    string
	// disk, when the run has disk faults, is the node's own disk, which
	// holds dataDir (disks.go).
	disk *nodeDisk

	// join: the node (re)joins the cluster with --join instead of
	// bootstrapping from --peers (a spare brought in, or a member wiped and
	// brought back; see membership.go).
	join bool

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	paused bool
}

// httpAddr is the node's HTTP API address.
func (n *nodeProc) httpAddr() string { return net.JoinHostPort(n.ip, strconv.Itoa(n.httpPort)) }

// raftAddr is the node's Raft address.
func (n *nodeProc) raftAddr() string { return net.JoinHostPort(n.ip, strconv.Itoa(n.raftPort)) }

// running reports whether the process is up (possibly paused).
func (n *nodeProc) running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil
}

// serving reports whether the process is up and not paused.
func (n *nodeProc) serving() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil && !n.paused
}

// cluster is the raftlockd processes of a run.
type cluster struct {
	bin string
	// nodes are the members of the cluster; spares are laid out (address,
	// certificate) but not members: the membership faults swap them in and
	// out (membership.go).
	nodes  []*nodeProc
	spares []*nodeProc
	args   []string // flags every node gets
	peers  string   // --peers of the nodes that bootstrap
	// admin is the management token's secret, with ACLs on (setupACL).
	admin string
	// certs, when set, are the run's TLS certificates: every node serves
	// HTTPS and mutual TLS on its peer port, and requires a client
	// certificate (--client-cert-auth); clientTLS is the configuration of
	// the checker's own requests (health probes).
	certs     *certFiles
	clientTLS *tls.Config
	// ports are the reservations of the nodes' ports (freePort).
	ports []*freeport.Reservation
	// stream: every node serves the stream protocol on its streamPort.
	stream bool
}

// all returns the members and the spares.
func (c *cluster) all() []*nodeProc {
	return append(append([]*nodeProc(nil), c.nodes...), c.spares...)
}

// enableTLS makes certificates for the nodes (spares included) in dir and starts every node
// with TLS from then on.
func (c *cluster) enableTLS(dir string) error {
	certs, err := writeCerts(dir, c.all())
	if err != nil {
		return err
	}
	tc, err := certs.clientTLS()
	if err != nil {
		return err
	}
	c.certs, c.clientTLS = certs, tc
	return nil
}

// apiAddr is the address a client is given for node n: https://host:port
// with TLS, host:port without.
func (c *cluster) apiAddr(n *nodeProc) string {
	if c.certs != nil {
		return "https://" + n.httpAddr()
	}
	return n.httpAddr()
}

// apiAddrs returns every node's apiAddr.
func (c *cluster) apiAddrs() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, c.apiAddr(n))
	}
	return out
}

// newCluster lays out n nodes under dir, and n spares (replace-node uses
// one, rotate-members all), each on its own loopback address with ports
// picked free.
func newCluster(bin, dir string, n int, extra []string) (*cluster, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cluster dir: %w", err)
	}
	c := &cluster{bin: bin, args: extra}
	var peers []string
	for i := 0; i < 2*n; i++ {
		ip := nodeIP(i)
		rp, err := c.freePort(ip)
		if err != nil {
			return nil, err
		}
		hp, err := c.freePort(ip)
		if err != nil {
			return nil, err
		}
		sp, err := c.freePort(ip)
		if err != nil {
			return nil, err
		}
		id := fmt.Sprintf("n%d", i+1)
		nd := &nodeProc{id: id, ip: ip, raftPort: rp, httpPort: hp, streamPort: sp,
			dataDir: filepath.Join(dir, id), logPath: filepath.Join(dir, id+".log")}
		if i >= n {
			c.spares = append(c.spares, nd)
			continue
		}
		c.nodes = append(c.nodes, nd)
		peers = append(peers, id+"="+nd.raftAddr())
	}
	c.peers = strings.Join(peers, ",")
	return c, nil
}

// start starts node n (again, with the data it has).
func (c *cluster) start(n *nodeProc) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		return nil
	}
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("node %s log: %w", n.id, err)
	}
	fmt.Fprintf(logf, "==== raftlock-check: starting %s at %s\n", n.id, time.Now().Format(time.RFC3339Nano))
	args := append([]string{"--id", n.id, "--data-dir", n.dataDir, "--raft-addr", n.raftAddr(),
		"--http-addr", n.httpAddr()}, c.args...)
	if c.stream {
		args = append(args, "--stream-addr", net.JoinHostPort(n.ip, strconv.Itoa(n.streamPort)))
	}
	if n.join {
		args = append(args, "--join", c.joinAddrs(n))
	} else {
		args = append(args, "--peers", c.peers)
	}
	if c.certs != nil {
		cert, key := c.certs.nodeCert(n.id)
		args = append(args, "--tls-cert", cert, "--tls-key", key, "--tls-ca", c.certs.CA, "--client-cert-auth")
	}
	cmd := exec.Command(c.bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if c.admin != "" {
		// --join asks with the management token (not in ps).
		cmd.Env = append(os.Environ(), "RAFTLOCK_ACL_TOKEN="+c.admin)
	}
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start node %s: %w", n.id, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	n.cmd, n.exited, n.paused = cmd, exited, false
	return nil
}

// signal sends sig to node n if it runs.
func (c *cluster) signal(n *nodeProc, sig syscall.Signal) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Signal(sig)
	switch sig {
	case syscall.SIGSTOP:
		n.paused = true
	case syscall.SIGCONT:
		n.paused = false
	}
}

// take detaches n's running process (nil if none) and the channel closed
// when it exits: the caller ends it.
func (n *nodeProc) take() (*exec.Cmd, <-chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	cmd, exited := n.cmd, n.exited
	n.cmd, n.paused = nil, false
	return cmd, exited
}

// reapExited detaches n's process if it has exited on its own, and
// returns its exit status (ok false: it still runs, or none was started).
func (c *cluster) reapExited(n *nodeProc) (code int, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return 0, false
	}
	select {
	case <-n.exited:
	default:
		return 0, false
	}
	code = n.cmd.ProcessState.ExitCode()
	n.cmd, n.paused = nil, false
	return code, true
}

// kill kills node n with SIGKILL and reaps it.
func (c *cluster) kill(n *nodeProc) {
	cmd, exited := n.take()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
}

// stop stops node n: SIGCONT, SIGTERM, and SIGKILL after grace.
func (c *cluster) stop(n *nodeProc, grace time.Duration) {
	cmd, exited := n.take()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	}
}

// stopAll stops every node (spares included) at once.
func (c *cluster) stopAll(grace time.Duration) {
	var wg sync.WaitGroup
	for _, n := range c.all() {
		wg.Add(1)
		go func(n *nodeProc) {
			defer wg.Done()
			c.stop(n, grace)
		}(n)
	}
	wg.Wait()
}

// startAll starts every node that is down.
func (c *cluster) startAll() error {
	for _, n := range c.nodes {
		if err := c.start(n); err != nil {
			return err
		}
	}
	return nil
}

// resumeAll resumes every paused node.
func (c *cluster) resumeAll() {
	for _, n := range c.all() {
		c.signal(n, syscall.SIGCONT)
	}
}

// waitCtx is a context for a cleanup step that must run even when the
// run's context has ended.
func waitCtx(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
