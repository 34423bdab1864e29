package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/raftlock/raftlock/cmd/internal/proccluster"
	"github.com/raftlock/raftlock/node"
	"github.com/raftlock/raftlock/transport"
)

// startInProcess starts a 3-node cluster in this process (real Raft over
// TCP on 127.0.0.1, HTTP API on every node) and returns the HTTP
// addresses.
func startInProcess(t *testing.T) []string {
	t.Helper()
	var (
		trans []*transport.RaftNet
		peers []node.Peer
		lns   []net.Listener
	)
	for i := 1; i <= 3; i++ {
		tr, err := transport.NewRaftTCPTransport(transport.RaftTCPConfig{BindAddr: "127.0.0.1:0"})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		trans, lns = append(trans, tr), append(lns, ln)
		peers = append(peers, node.Peer{ID: fmt.Sprintf("n%d", i), RaftAddr: string(tr.Transport.LocalAddr())})
	}
	dir := t.TempDir()
	var addrs []string
	for i, p := range peers {
		n, err := node.New(node.Config{ID: p.ID, DataDir: filepath.Join(dir, p.ID), RaftBind: p.RaftAddr,
			PeerPort: trans[i], Peers: peers, HTTPAddr: lns[i].Addr().String(),
			Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Error, Output: os.Stderr})})
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: transport.NewServer(n), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(lns[i]) }()
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = srv.Close()
			_ = n.Shutdown(ctx)
		})
		addrs = append(addrs, lns[i].Addr().String())
	}
	return addrs
}

// procCluster is three raftlockd processes started by hand (not through
// proccluster.Start) so that the benchmark gets their PIDs and can kill
// and restart them itself; restart.sh restarts one and prints its PID.
type procCluster struct {
	addrs   []string
	pids    map[string]int
	restart string // the --restart-cmd
	pidDir  string
}

func startProcesses(t *testing.T) *procCluster {
	t.Helper()
	bin := proccluster.BuildDaemon(t)
	dir := t.TempDir()
	c := &procCluster{pids: map[string]int{}, pidDir: filepath.Join(dir, "pids")}
	if err := os.Mkdir(c.pidDir, 0o755); err != nil {
		t.Fatal(err)
	}
	var raftAddrs, peers []string
	for i := 1; i <= 3; i++ {
		raftAddrs = append(raftAddrs, proccluster.FreeAddr(t))
		peers = append(peers, fmt.Sprintf("n%d=%s", i, raftAddrs[i-1]))
	}
	var script strings.Builder
	script.WriteString("#!/bin/sh\ncase $1 in\n")
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("n%d", i)
		http := proccluster.FreeAddr(t)
		c.addrs = append(c.addrs, http)
		args := []string{bin, "--id", id, "--data-dir", filepath.Join(dir, id), "--raft-addr", raftAddrs[i-1],
			"--http-addr", http, "--peers", strings.Join(peers, ","), "--log-level", "error"}
		fmt.Fprintf(&script, "%s) %s >>%s 2>&1 </dev/null & echo $! >%s/%s; echo $! ;;\n",
			id, strings.Join(args, " "), filepath.Join(dir, id+".log"), c.pidDir, id)
	}
	script.WriteString("esac\n")
	restart := filepath.Join(dir, "restart.sh")
	if err := os.WriteFile(restart, []byte(script.String()), 0o755); err != nil {
		t.Fatal(err)
	}
	c.restart = restart + " {id}"
	t.Cleanup(c.killAll)
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("n%d", i)
		out, err := exec.Command(restart, id).Output()
		if err != nil {
			t.Fatalf("start %s: %v", id, err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil {
			t.Fatalf("start %s: output %q", id, out)
		}
		c.pids[id] = pid
	}
	return c
}

// killAll kills every process ever started, by the PIDs restart.sh wrote.
func (c *procCluster) killAll() {
	entries, _ := os.ReadDir(c.pidDir)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(c.pidDir, e.Name()))
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func (c *procCluster) pidList() string {
	var parts []string
	for id, pid := range c.pids {
		parts = append(parts, fmt.Sprintf("%s=%d", id, pid))
	}
	return strings.Join(parts, ",")
}
