package main

import (
	"bufio"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// instance is one running process of the example.
type instance struct {
	id  string
	cmd *exec.Cmd
}

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

// Three processes of the example form a cluster and elect one leader; when
// it is killed (-9), another instance is elected with a larger token.
func TestEmbeddedElection(t *testing.T) {
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
	type electedLine struct {
		id    string
		token uint64
	}
	elected := make(chan electedLine, 16)
	var mu sync.Mutex
	var output strings.Builder
	instances := map[string]*instance{}
	dir := t.TempDir()
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("n%d", i)
		cmd := exec.Command(bin, "--id", id, "--raft", raft[id], "--data", filepath.Join(dir, id),
			"--peers", strings.Join(peers, ","), "--ttl", "2s", "--lock-delay", "1s")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		instances[id] = &instance{id: id, cmd: cmd}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				mu.Lock()
				output.WriteString(sc.Text() + "\n")
				mu.Unlock()
				if m := electedRE.FindStringSubmatch(sc.Text()); m != nil {
					tok, _ := strconv.ParseUint(m[2], 10, 64)
					elected <- electedLine{m[1], tok}
				}
			}
		}()
	}
	next := func(what string) electedLine {
		t.Helper()
		select {
		case e := <-elected:
			return e
		case <-time.After(60 * time.Second):
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("%s: nobody elected within 60s; output:\n%s", what, output.String())
		}
		return electedLine{}
	}
	first := next("first election")
	if err := instances[first.id].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	second := next("election after kill -9")
	if second.id == first.id || second.token <= first.token {
		t.Fatalf("second election %+v after %+v: want another instance with a larger token", second, first)
	}
	// The surviving observers saw the new leader too.
	deadline := time.Now().Add(30 * time.Second)
	want := fmt.Sprintf("observes leader %s@", second.id)
	for {
		mu.Lock()
		n := strings.Count(output.String(), want)
		text := output.String()
		mu.Unlock()
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the two surviving instances did not both observe %s:\n%s", second.id, text)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
