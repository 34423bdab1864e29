package proccluster

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// DefaultStartBound is how long a node that Restart started may take to
// answer GET /v1/health (raftlockd serves HTTP once its node has started:
// data dir checked, stores open, bootstrap decided, Raft running) before
// the harness takes it for hung at start. A healthy node answers within
// seconds, even on a loaded machine; a cluster whose peers are all started
// together never waits for a peer that long.
const DefaultStartBound = 60 * time.Second

// ArtifactsEnv names the environment variable that holds the directory
// where the harness keeps the files a failed test leaves (each node's
// log, with its goroutines when it was made to print them), one directory
// per test under it. Without it they go to a new directory under the
// system's temp dir, which is not removed: the failure message names it.
const ArtifactsEnv = "RAFTLOCK_ARTIFACTS"

// dumpWait bounds how long a node made to print its goroutines (SIGQUIT)
// may take to print them and exit.
const dumpWait = 10 * time.Second

// watchStart waits until node n's process cmd answers GET /v1/health, and
// returns then, or when the process exits (exit closed) or the cluster is
// cleaned up. If the process neither answers nor exits within
// c.startBound, it is hung at start: watchStart makes it print every
// goroutine's stack (SIGQUIT, GOTRACEBACK=all from Restart), keeps its log
// in the test's artifact directory, and fails the test naming the file.
func (c *Cluster) watchStart(n *Node, cmd *exec.Cmd, exit <-chan struct{}) {
	defer c.watchers.Done()
	started := time.Now()
	deadline := time.NewTimer(c.startBound)
	defer deadline.Stop()
	poll := time.NewTicker(100 * time.Millisecond) // polling another process
	defer poll.Stop()
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: c.tls}}
	defer hc.CloseIdleConnections()
	url := c.scheme() + n.HTTPAddr + "/v1/health"
	for {
		if answers(hc, url) {
			return
		}
		select {
		case <-exit:
			return
		case <-c.closing:
			return
		case <-deadline.C:
			c.hungAtStart(n, cmd, exit, time.Since(started))
			return
		case <-poll.C:
		}
	}
}

// scheme is the URL scheme of the cluster's HTTP API, with its "://".
func (c *Cluster) scheme() string {
	if c.tls != nil {
		return "https://"
	}
	return "http://"
}

// answers reports whether url answers at all (any status: the node
// serves HTTP).
func answers(hc *http.Client, url string) bool {
	resp, err := hc.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return true
}

// hungAtStart makes node n's process cmd, which has not answered for
// waited, print its goroutines and exit, keeps its log as an artifact and
// fails the test saying where it is.
func (c *Cluster) hungAtStart(n *Node, cmd *exec.Cmd, exit <-chan struct{}, waited time.Duration) {
	_ = cmd.Process.Signal(syscall.SIGQUIT)
	_ = cmd.Process.Signal(syscall.SIGCONT) // a frozen node prints too
	dumped := "its goroutines (SIGQUIT)"
	select {
	case <-exit:
	case <-time.After(dumpWait):
		dumped = fmt.Sprintf("it did not print its goroutines within %v of SIGQUIT", dumpWait)
	}
	path, err := c.keepLog(n, fmt.Sprintf("%s-pid%d-hung-at-start.log", n.ID, cmd.Process.Pid))
	if err != nil {
		c.t.Errorf("proccluster: %s (pid %d) did not answer GET /v1/health within %v of its start; keeping its log: %v\n%s",
			n.ID, cmd.Process.Pid, waited.Round(time.Second), err, n.Log())
		return
	}
	c.t.Errorf("proccluster: %s (pid %d) did not answer GET /v1/health within %v of its start: hung at start; %s and its log are in %s",
		n.ID, cmd.Process.Pid, waited.Round(time.Second), dumped, path)
}

// keepLog writes node n's log so far into the test's artifact directory
// as name and returns its path.
func (c *Cluster) keepLog(n *Node, name string) (string, error) {
	dir, err := c.artifactDir()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(n.Log()), 0o644); err != nil {
		return "", fmt.Errorf("keep %s's log: %w", n.ID, err)
	}
	return path, nil
}

// artifactDir returns the test's artifact directory (ArtifactsEnv), made
// on first use.
func (c *Cluster) artifactDir() (string, error) {
	c.artifactsOnce.Do(func() {
		name := strings.Map(func(r rune) rune {
			if r == '/' || r == ' ' || r == os.PathSeparator {
				return '_'
			}
			return r
		}, c.t.Name())
		if root := os.Getenv(ArtifactsEnv); root != "" {
			c.artifacts = filepath.Join(root, name)
			c.artifactsErr = os.MkdirAll(c.artifacts, 0o755)
		} else {
			c.artifacts, c.artifactsErr = os.MkdirTemp("", "raftlock-artifacts-"+name+"-")
		}
		if c.artifactsErr != nil {
			c.artifactsErr = fmt.Errorf("artifact directory: %w", c.artifactsErr)
		}
	})
	return c.artifacts, c.artifactsErr
}

// keepLogs writes every node's log into the test's artifact directory
// and returns where, for a failed test.
func (c *Cluster) keepLogs() (string, error) {
	for _, n := range c.Nodes {
		if _, err := c.keepLog(n, n.ID+".log"); err != nil {
			return "", err
		}
	}
	return c.artifactDir()
}
