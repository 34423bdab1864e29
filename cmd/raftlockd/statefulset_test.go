package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/api/apitest"
	"github.com/raftlock/raftlock/cmd/internal/proccluster"
	"github.com/raftlock/raftlock/session"
	"github.com/raftlock/raftlock/transport/client"
	"github.com/raftlock/raftlock/transport/tlsconf"
)

// podIP is the loopback address standing for pod i's IP: a range of its own
// (127.28.0.0/24), so that the manifests' fixed ports (7001, 7101, 9101)
// collide with no other test.
func podIP(i int) string { return fmt.Sprintf("127.28.0.%d", i+1) }

// getJSON decodes the JSON answer of GET url into out.
func getJSON(url string, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(out)
}

// statefulPod is one raftlockd process started as the StatefulSet starts
// its pod.
type statefulPod struct {
	name string
	args []string
	log  *apitest.LogBuffer
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// TestStatefulSetBootstrapAndRollingRestart starts three raftlockd
// processes with exactly the command lines of deploy/kubernetes's
// StatefulSet (Kubernetes' $(POD_NAME), $(POD_NAMESPACE) and $(POD_IP)
// expanded; the stable names raftlock-N.raftlock-peers.default.svc
// resolved to 127.28.0.N+1 by an /etc/hosts of their own, bind-mounted in a
// private mount namespace; the volumes' mount paths, /data and
// /etc/raftlock/tls, and the metrics listener's 0.0.0.0 (each pod has a
// network namespace of its own) mapped to this machine). The certificate
// is the one docs/DEPLOYING.md makes, ACLs are bootstrapped as it says.
// Under load (clients taking and releasing locks), it restarts the pods as
// a rolling update does, by SIGTERM in reverse ordinal order, each once the
// previous one is ready again: no session expires, no request fails, and
// the longest gap between two grants is printed.
func TestStatefulSetBootstrapAndRollingRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts raftlockd processes")
	}
	hostsFile := filepath.Join(t.TempDir(), "hosts")
	var hosts strings.Builder
	hosts.WriteString("127.0.0.1 localhost\n")
	for i := 0; i < 3; i++ {
		fmt.Fprintf(&hosts, "%s raftlock-%d.raftlock-peers.default.svc\n", podIP(i), i)
	}
	if err := os.WriteFile(hostsFile, []byte(hosts.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// The names resolve in a private mount namespace (root and unshare);
	// else the names are replaced by the IPs in the arguments.
	useNames := os.Geteuid() == 0 && exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c",
		`mount --bind "$0" /etc/hosts && getent hosts raftlock-0.raftlock-peers.default.svc`, hostsFile).Run() == nil
	if !useNames {
		t.Log("no private mount namespace here (needs root and unshare): the pods' stable names are replaced by their IPs")
	}

	cli := proccluster.Build(t, "github.com/raftlock/raftlock/cmd/raftlock", "raftlock")
	bin := proccluster.BuildDaemon(t)
	tlsDir := filepath.Join(t.TempDir(), "tls")
	if out, err := exec.Command(cli, "tls", "init", tlsDir, "--node", "node=*.raftlock-peers.default.svc+raftlock.default.svc",
		"--client", "admin").CombinedOutput(); err != nil {
		t.Fatalf("raftlock tls init: %v\n%s", err, out)
	}
	objs := plainManifests(t)
	dataRoot := t.TempDir()
	pods := make([]*statefulPod, 3)
	for i := range pods {
		cmd, _ := podCommand(t, objs, i, podIP)
		p := &statefulPod{name: fmt.Sprintf("raftlock-%d", i), log: &apitest.LogBuffer{}}
		for _, a := range cmd[1:] {
			a = strings.ReplaceAll(a, "/etc/raftlock/tls/", tlsDir+"/")
			a = strings.Replace(a, "--data-dir=/data", "--data-dir="+filepath.Join(dataRoot, p.name), 1)
			a = strings.Replace(a, "--metrics-addr=0.0.0.0:", "--metrics-addr="+podIP(i)+":", 1)
			if !useNames {
				for j := 0; j < 3; j++ {
					a = strings.ReplaceAll(a, fmt.Sprintf("raftlock-%d.raftlock-peers.default.svc", j), podIP(j))
				}
			}
			p.args = append(p.args, a)
		}
		pods[i] = p
	}
	t.Logf("raftlock-0's command line: %s", strings.Join(pods[0].args, " "))
	start := func(p *statefulPod) {
		t.Helper()
		if useNames {
			p.cmd = exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "sh", "-c",
				`mount --bind "$0" /etc/hosts && exec "$@"`, hostsFile, bin}, p.args...)...)
		} else {
			p.cmd = exec.Command(bin, p.args...)
		}
		p.cmd.Stderr = p.log
		if err := p.cmd.Start(); err != nil {
			t.Fatalf("start %s: %v", p.name, err)
		}
		p.done = make(chan struct{})
		go func(cmd *exec.Cmd, done chan struct{}) { p.err = cmd.Wait(); close(done) }(p.cmd, p.done)
	}
	t.Cleanup(func() {
		for _, p := range pods {
			if p.cmd != nil {
				select {
				case <-p.done:
				default:
					_ = p.cmd.Process.Kill()
					<-p.done
				}
			}
			if t.Failed() {
				t.Logf("%s log:\n%s", p.name, p.log.String())
			}
		}
	})
	for _, p := range pods {
		start(p)
	}
	// Ready as the readinessProbe sees it: GET /v1/health on the metrics
	// port answers 200.
	ready := func(i int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+podIP(i)+":9101/v1/health", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("%s: readiness probe HTTP %d", pods[i].name, resp.StatusCode)
		}
		return nil
	}
	allReady := func() error {
		for i := range pods {
			if err := ready(i); err != nil {
				return err
			}
		}
		return nil
	}
	proccluster.Eventually(t, 60*time.Second, "every pod ready", allReady)

	// ACL bootstrap, as docs/DEPLOYING.md does it, through any pod.
	clientTLS, err := tlsconf.ClientConfig(filepath.Join(tlsDir, "ca.pem"), "", "")
	if err != nil {
		t.Fatal(err)
	}
	clientTLS.ServerName = "raftlock.default.svc"
	var addrs []string
	for i := range pods {
		addrs = append(addrs, "https://"+podIP(i)+":7001")
	}
	boot, err := client.NewClient(addrs, client.WithTLS(clientTLS))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	mgmt, err := boot.ACLBootstrap(ctx)
	if err != nil {
		t.Fatalf("acl bootstrap: %v", err)
	}

	// The load: clients each with a session take and release locks.
	cl, err := client.NewClient(addrs, client.WithTLS(clientTLS), client.WithToken(mgmt.Secret))
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		grants   []time.Time
		failures []string
		expired  []string
	)
	const clients = 4
	var sessions []*session.Session
	for c := 0; c < clients; c++ {
		name := fmt.Sprintf("client-%d", c)
		s, err := session.Open(ctx, cl, session.TTL(10*time.Second), session.Name(name), session.OnEvent(func(ev session.Event) {
			if ev.State == session.Expired {
				mu.Lock()
				expired = append(expired, name)
				mu.Unlock()
			}
		}))
		if err != nil {
			t.Fatalf("open session: %v", err)
		}
		sessions = append(sessions, s)
	}
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for c, s := range sessions {
		wg.Add(1)
		go func(c int, s *session.Session) {
			defer wg.Done()
			for loadCtx.Err() == nil {
				l, err := s.Lock(loadCtx, fmt.Sprintf("k8s/lock-%d", c%2))
				if err != nil {
					if loadCtx.Err() == nil {
						mu.Lock()
						failures = append(failures, fmt.Sprintf("client-%d lock: %v", c, err))
						mu.Unlock()
					}
					return
				}
				mu.Lock()
				grants = append(grants, time.Now())
				mu.Unlock()
				time.Sleep(5 * time.Millisecond) // holding the lock, as work would
				if err := l.Unlock(context.WithoutCancel(loadCtx)); err != nil {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("client-%d unlock: %v", c, err))
					mu.Unlock()
					return
				}
			}
		}(c, s)
	}
	grantsSoFar := func() int { mu.Lock(); defer mu.Unlock(); return len(grants) }
	proccluster.Eventually(t, 30*time.Second, "grants under load", func() error {
		if n := grantsSoFar(); n < 50 {
			return fmt.Errorf("%d grants", n)
		}
		return nil
	})

	// The rolling restart: SIGTERM in reverse ordinal order, each pod
	// started again and ready before the next one goes.
	rollStart := time.Now()
	var stops []string
	for i := len(pods) - 1; i >= 0; i-- {
		p := pods[i]
		before := grantsSoFar()
		var h api.HealthInfo
		if err := getJSON("http://"+podIP(i)+":9101/v1/health", &h); err != nil {
			t.Fatal(err)
		}
		role := "follower"
		if h.IsLeader {
			role = "leader"
		}
		t0 := time.Now()
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not stop within the 30 s grace period", p.name)
		}
		stopped := time.Since(t0)
		var ee *exec.ExitError
		if p.err != nil && !(errors.As(p.err, &ee) && ee.ExitCode() == 0) {
			t.Errorf("%s exited with %v after SIGTERM", p.name, p.err)
		}
		stops = append(stops, fmt.Sprintf("%s (%s) %v", p.name, role, stopped.Round(time.Millisecond)))
		start(p)
		proccluster.Eventually(t, 60*time.Second, p.name+" ready again", func() error { return ready(i) })
		proccluster.Eventually(t, 30*time.Second, "grants after "+p.name+" restarted", func() error {
			if n := grantsSoFar(); n < before+20 {
				return fmt.Errorf("%d grants since", n-before)
			}
			return nil
		})
	}
	rollEnd := time.Now()
	stopLoad()
	wg.Wait()
	for _, s := range sessions {
		_ = s.Close(ctx)
	}

	for _, p := range pods {
		if strings.Contains(p.log.String(), "failed to accept connection") {
			t.Errorf("%s logged raft-net's failed to accept connection on a clean stop", p.name)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	sort.Slice(grants, func(a, b int) bool { return grants[a].Before(grants[b]) })
	var longest time.Duration
	for k := 1; k < len(grants); k++ {
		if grants[k].Before(rollStart) || grants[k-1].After(rollEnd) {
			continue
		}
		if gap := grants[k].Sub(grants[k-1]); gap > longest {
			longest = gap
		}
	}
	t.Logf("rolling restart of 3 pods in %v: %d grants, longest gap between grants %v, SIGTERM to exit: %s; sessions expired %d, failed requests %d",
		rollEnd.Sub(rollStart).Round(time.Millisecond), len(grants), longest.Round(time.Millisecond), strings.Join(stops, ", "), len(expired), len(failures))
	if len(expired) != 0 || len(failures) != 0 {
		t.Errorf("sessions expired %v; failed requests %v", expired, failures)
	}
}
