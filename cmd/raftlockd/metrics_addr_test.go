package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/cmd/internal/proccluster"
)

// --metrics-addr serves GET /v1/health (and ?stale) and GET /metrics in
// plain HTTP with no client certificate and no token, on a node that runs
// TLS with --client-cert-auth and --acl; and nothing else: the API, the
// status page and writes answer 404 or 405 there. Every metric named by a
// panel of deploy/grafana/raftlock.json or a rule of
// deploy/prometheus/alerts.yml is in its /metrics.
func TestMetricsAddrServesHealthAndMetricsOnlyWithoutCertOrToken(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a raftlockd process")
	}
	cli := proccluster.Build(t, "github.com/raftlock/raftlock/cmd/raftlock", "raftlock")
	dir := tlsInit(t, cli, 1)
	maddr := proccluster.FreeAddr(t)
	c := proccluster.StartTLS(t, proccluster.BuildDaemon(t), dir, 1, "--client-cert-auth", "--acl", "--metrics-addr", maddr)
	get := func(method, path string) (int, string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, method, "http://"+maddr+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), nil
	}
	proccluster.Eventually(t, 30*time.Second, "GET /v1/health 200 on the metrics listener", func() error {
		st, body, err := get("GET", "/v1/health")
		if err == nil && (st != 200 || !strings.Contains(body, `"ok":true`)) {
			err = errors.New(body)
		}
		return err
	})
	for _, c := range []struct {
		method, path string
		status       int
		has          string
	}{
		{"GET", "/v1/health?stale", 200, `"ok":true`},
		{"GET", "/metrics", 200, "raftlock_is_leader 1"},
		{"GET", "/v1/cluster", 404, "not_found"},
		{"GET", "/v1/locks", 404, "not_found"},
		{"GET", "/ui/", 404, "not_found"},
		{"POST", "/v1/sessions", 404, "not_found"},
		{"POST", "/v1/acl/bootstrap", 404, "not_found"},
		{"GET", "/v1/snapshot", 404, "not_found"},
	} {
		st, body, err := get(c.method, c.path)
		if err != nil || st != c.status || !strings.Contains(body, c.has) {
			t.Errorf("%s %s on the metrics listener: %d %.200q %v, want %d with %q", c.method, c.path, st, body, err, c.status, c.has)
		}
	}
	// An API request (with a client certificate, without a token: refused
	// 401), so that the request histogram has a series.
	api := &http.Client{Transport: &http.Transport{TLSClientConfig: proccluster.ClientTLS(t, dir)}}
	if resp, err := api.Get(c.Addrs()[0] + "/v1/locks"); err == nil {
		resp.Body.Close()
	}
	// Every metric the Grafana dashboard and the alert rules read is on a
	// live node (TLS, so its certificate's expiry too).
	_, metrics, err := get("GET", "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	checkDashboardMetricsExist(t, metrics)
	// The probes are not counted as API requests: ten of them leave the
	// API's count of health requests as it was (the test harness polls
	// the API port's health while the node starts, so it may have one).
	healthCount := func() string {
		_, body, err := get("GET", "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, "raftlock_http_request_duration_seconds_count{") && strings.Contains(line, `route="GET /v1/health"`) {
				return line
			}
		}
		return ""
	}
	before := healthCount()
	for range 10 {
		if st, _, err := get("GET", "/v1/health"); err != nil || st != 200 {
			t.Fatalf("GET /v1/health on the metrics listener: %d %v", st, err)
		}
	}
	if after := healthCount(); after != before {
		t.Errorf("the metrics listener's requests are counted in raftlock_http_request_duration_seconds: %q, then %q", before, after)
	}
}

// A metrics listener on a taken port stops the daemon with one line naming
// the fix, before the node touches its data dir.
func TestMetricsAddrTakenStopsWithOneLineAndNoData(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	data := filepath.Join(t.TempDir(), "n1")
	var stderr bytes.Buffer
	code := run([]string{"--id", "n1", "--data-dir", data, "--raft-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
		"--peers", "n1=127.0.0.1:7101", "--metrics-addr", ln.Addr().String()}, &stderr)
	want := "raftlockd: --metrics-addr " + ln.Addr().String() + ": the port is taken (another process listens there): stop it or pick a free port\n"
	if code != 1 || stderr.String() != want {
		t.Errorf("exit %d, stderr %q; want 1, %q", code, stderr.String(), want)
	}
	if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data dir touched: %v", err)
	}
	stderr.Reset()
	if code := run([]string{"--dev", "--metrics-addr", "127.0.0.1:0"}, &stderr); code != 2 || !strings.Contains(stderr.String(), "--metrics-addr is for real nodes") {
		t.Errorf("--dev --metrics-addr: exit %d, %q", code, stderr.String())
	}
}
