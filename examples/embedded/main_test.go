package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/raftlock/raftlock/transport/tlsconf"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

var electedRE = regexp.MustCompile(`^(n\d) elected: rl1:x:(\d+):app/leader$`)

// electedLine is one "elected" line of an instance.
type electedLine struct {
	id    string
	token uint64
}

// example is three running processes of the example, forming one cluster.
type example struct {
	t       *testing.T
	cmds    map[string]*exec.Cmd
	exited  map[string]chan struct{} // closed when the process has exited
	waitErr map[string]error         // its Wait's error, once exited
	elected chan electedLine

	mu     sync.Mutex
	output strings.Builder
}

// startExample builds the example and starts three instances of it (with
// withTLS, over mutual TLS with certificates made for them).
func startExample(t *testing.T, withTLS bool) *example {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs three processes")
	}
	bin := filepath.Join(t.TempDir(), "embedded")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var peers []string
	raft := map[string]string{}
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("n%d", i)
		raft[id] = freeAddr(t)
		peers = append(peers, id+"="+raft[id])
	}
	e := &example{t: t, cmds: map[string]*exec.Cmd{}, exited: map[string]chan struct{}{}, waitErr: map[string]error{},
		elected: make(chan electedLine, 16)}
	dir := t.TempDir()
	var ca *tlsconf.CA
	if withTLS {
		var err error
		if ca, err = tlsconf.NewCA("embedded test CA", time.Hour); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "ca.pem"), ca.CertPEM(), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("n%d", i)
		args := []string{"--id", id, "--raft", raft[id], "--data", filepath.Join(dir, id),
			"--peers", strings.Join(peers, ","), "--ttl", "2s", "--lock-delay", "1s"}
		if ca != nil {
			cert, key, err := ca.IssueNode(id, []string{"127.0.0.1"}, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			cp, kp := filepath.Join(dir, id+".pem"), filepath.Join(dir, id+"-key.pem")
			if err := os.WriteFile(cp, cert, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(kp, key, 0o600); err != nil {
				t.Fatal(err)
			}
			args = append(args, "--tls-cert", cp, "--tls-key", kp, "--tls-ca", filepath.Join(dir, "ca.pem"))
		}
		cmd := exec.Command(bin, args...)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = stderrOf{e, id}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		e.cmds[id] = cmd
		exited := make(chan struct{})
		e.exited[id] = exited
		scanned := make(chan struct{})
		go func() {
			defer close(scanned)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				e.mu.Lock()
				e.output.WriteString(sc.Text() + "\n")
				e.mu.Unlock()
				if m := electedRE.FindStringSubmatch(sc.Text()); m != nil {
					tok, _ := strconv.ParseUint(m[2], 10, 64)
					e.elected <- electedLine{m[1], tok}
				}
			}
		}()
		go func() {
			<-scanned // Wait closes the pipe: read it all first
			err := cmd.Wait()
			e.mu.Lock()
			e.waitErr[id] = err
			e.mu.Unlock()
			close(exited)
		}()
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-exited
		})
	}
	return e
}

// stderrOf writes instance id's standard error into the example's output,
// line by line, each prefixed with "id stderr: ".
type stderrOf struct {
	e  *example
	id string
}

func (w stderrOf) Write(p []byte) (int, error) {
	w.e.mu.Lock()
	defer w.e.mu.Unlock()
	for _, line := range strings.SplitAfter(string(p), "\n") {
		if line != "" {
			w.e.output.WriteString(w.id + " stderr: " + line)
		}
	}
	return len(p), nil
}

// text is everything the instances printed so far.
func (e *example) text() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.output.String()
}

// next waits for the next election.
func (e *example) next(what string) electedLine {
	e.t.Helper()
	select {
	case l := <-e.elected:
		return l
	case <-time.After(60 * time.Second):
		e.t.Fatalf("%s: nobody elected within 60s; output:\n%s", what, e.text())
	}
	return electedLine{}
}

// signal sends sig to instance id.
func (e *example) signal(id string, sig syscall.Signal) {
	e.t.Helper()
	if err := e.cmds[id].Process.Signal(sig); err != nil {
		e.t.Fatal(err)
	}
}

// waitOutput waits until the instances have printed want.
func (e *example) waitOutput(want string) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(e.text(), want) {
		if time.Now().After(deadline) {
			e.t.Fatalf("no %q within 30s; output:\n%s", want, e.text())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Three processes of the example form a cluster and elect one leader; when
// it is killed (-9), another instance is elected with a larger token.
func TestEmbeddedElection(t *testing.T) {
	e := startExample(t, false)
	first := e.next("first election")
	e.signal(first.id, syscall.SIGKILL)
	second := e.next("election after kill -9")
	if second.id == first.id || second.token <= first.token {
		t.Fatalf("second election %+v after %+v: want another instance with a larger token", second, first)
	}
	// The surviving observers saw the new leader too.
	for id := range e.cmds {
		if id != first.id {
			e.waitOutput(fmt.Sprintf("%s observes leader %s@", id, second.id))
		}
	}
}

// The last instance standing, its two peers gone (no quorum: its session
// can be neither resigned nor closed), still stops on SIGTERM within
// sessionStopTimeout + nodeStopTimeout, and exits 0.
func TestEmbeddedStopsWithoutQuorum(t *testing.T) {
	e := startExample(t, false)
	leader := e.next("first election")
	last := "n1"
	if leader.id == last {
		last = "n2"
	}
	// last has its session (it observes the election) before it is left
	// alone.
	e.waitOutput(last + " observes leader " + leader.id + "@")
	for id := range e.cmds {
		if id != last {
			e.signal(id, syscall.SIGKILL)
			<-e.exited[id]
		}
	}
	e.signal(last, syscall.SIGTERM)
	start := time.Now()
	bound := sessionStopTimeout + nodeStopTimeout + 2*time.Second // 2s: process exit on a loaded machine
	select {
	case <-e.exited[last]:
		e.mu.Lock()
		err := e.waitErr[last]
		e.mu.Unlock()
		if err != nil {
			t.Fatalf("%s exited with %v after SIGTERM; output:\n%s", last, err, e.text())
		}
		t.Logf("%s, alone, exited %v after SIGTERM", last, time.Since(start).Round(time.Millisecond))
	case <-time.After(bound):
		t.Fatalf("%s, alone, still running %v after SIGTERM; output:\n%s", last, bound, e.text())
	}
}

// The replicas of three instances started with --tls-cert, --tls-key and
// --tls-ca talk over mutual TLS: they form a cluster and elect a leader,
// and another after it is killed.
func TestEmbeddedElectionTLS(t *testing.T) {
	e := startExample(t, true)
	first := e.next("first election over TLS")
	e.signal(first.id, syscall.SIGKILL)
	second := e.next("election over TLS after kill -9")
	if second.id == first.id || second.token <= first.token {
		t.Fatalf("second election %+v after %+v: want another instance with a larger token", second, first)
	}
}

// An instance given only part of the TLS flags refuses to start.
func TestEmbeddedPartialTLSRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the example")
	}
	bin := filepath.Join(t.TempDir(), "embedded")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--id", "n1", "--raft", freeAddr(t), "--data", t.TempDir(),
		"--peers", "n1=127.0.0.1:1", "--tls-cert", "x.pem").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--tls-key") {
		t.Fatalf("--tls-cert alone: %v, %s; want a refusal naming the missing flags", err, out)
	}
}
