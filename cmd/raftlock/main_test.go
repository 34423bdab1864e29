package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/api/apitest"
	"github.com/raftlock/raftlock/transport/httpapi"
	"github.com/raftlock/raftlock/transport/httpapi/httpapitest"
)

// fake is the in-memory httpapi.Service of the CLI tests: the contract's
// fake lock service (apitest.Backend) as the leader, n1, of a fixed
// two-node cluster at term 7. n1's HTTP address is the fake's own (httpAddr,
// once served), n2's (deadAddr) a closed port.
type fake struct {
	*apitest.Backend
	httpapitest.Absent // the roles the CLI's tests do not serve
	httpAddr, deadAddr string
}

func newFake(opts ...apitest.Option) *fake {
	f := &fake{Backend: apitest.New(opts...)}
	f.SetTerm(7)
	return f
}

func (f *fake) Cluster(context.Context) (api.ClusterInfo, error) {
	n1, n2 := f.httpAddr, f.deadAddr
	if n1 == "" {
		n1 = "127.0.0.1:7001"
	}
	if n2 == "" {
		n2 = "127.0.0.1:7002"
	}
	return api.ClusterInfo{Leader: "n1", Term: 7, CommitIndex: 42, Members: []api.Member{
		{ID: "n1", RaftAddr: "127.0.0.1:7101", HTTPAddr: n1, Voter: true},
		{ID: "n2", RaftAddr: "127.0.0.1:7102", HTTPAddr: n2, Voter: true},
	}}, nil
}

func (f *fake) Leader() api.LeaderInfo {
	return api.LeaderInfo{ID: "n1", Self: true, Term: 7}
}

func (f *fake) RegisterMember(context.Context, api.Member) error { return nil }

func (f *fake) LocksPage(ctx context.Context, q api.LocksQuery) (api.LocksPage, error) {
	return httpapitest.LocksPage(ctx, f.Backend, q)
}

func (f *fake) WatchLocks(ctx context.Context, prefix string, index uint64, wait time.Duration) (api.LocksChange, error) {
	return httpapitest.WatchLocks(ctx, f.Backend, prefix, index, wait)
}

func (f *fake) ResetPage(ctx context.Context, prefix string, index uint64, after string) (api.LocksChange, error) {
	return httpapitest.ResetPage(ctx, f.Backend, prefix, index, after)
}

// cluster starts a server over the fake and returns a runner of the CLI
// against it.
func cluster(t *testing.T) func(args ...string) (int, string, string) {
	t.Helper()
	_, rl := fakeCluster(t)
	return rl
}

// fakeCluster is cluster, with the fake it serves.
func fakeCluster(t *testing.T) (*fake, func(args ...string) (int, string, string)) {
	t.Helper()
	f := newFake()
	ts := httptest.NewServer(httpapi.NewServer(f))
	t.Cleanup(ts.Close)
	addr := strings.TrimPrefix(ts.URL, "http://")
	f.httpAddr, f.deadAddr = addr, closedAddr(t)
	t.Setenv("RAFTLOCK_ADDR", addr)
	return f, func(args ...string) (int, string, string) {
		t.Helper()
		return runCLI(t, args...)
	}
}

func TestStatus(t *testing.T) {
	rl := cluster(t)
	// n2 (127.0.0.1:7002) does not answer: one of two, no majority.
	code, out, errOut := rl("status")
	if code != 0 || !strings.Contains(out, "leader: n1") || !strings.Contains(out, "term: 7") ||
		!strings.Contains(out, "127.0.0.1:7102") || errOut != "" {
		t.Fatalf("status: %d\n%s\n%s", code, out, errOut)
	}
	code, out, _ = rl("--json", "status")
	var info api.ClusterInfo
	if code != 0 || json.Unmarshal([]byte(out), &info) != nil || info.Leader != "n1" || len(info.Members) != 2 {
		t.Fatalf("status --json: %d %s", code, out)
	}
}

func TestLockLifecycle(t *testing.T) {
	rl := cluster(t)
	code, out, errOut := rl("session", "open", "--ttl", "20s", "--name", "demo")
	if code != 0 {
		t.Fatalf("session open: %d %s %s", code, out, errOut)
	}
	sid := strings.TrimSpace(out)
	code, out, _ = rl("acquire", "--session", sid, "--holder", "h1", "--value", "10.0.0.7:8080", "jobs/compactor")
	if code != 0 || !strings.Contains(out, "token: 2\n") || !strings.Contains(out, "sequencer: rl1:x:2:jobs/compactor\n") ||
		!strings.Contains(out, "holder: h1\n") {
		t.Fatalf("acquire: %d %s", code, out)
	}
	// Flags after the name, --json, a random holder, busy.
	code, out, errOut = rl("acquire", "jobs/compactor", "--session", sid)
	if code != 1 || !strings.HasPrefix(errOut, "raftlock: lock_busy: ") || out != "" {
		t.Fatalf("busy acquire: %d %q %q", code, out, errOut)
	}
	code, out, _ = rl("--json", "acquire", "--session", sid, "other")
	var g struct {
		Token     uint64
		Sequencer string
		Holder    string
	}
	if code != 0 || json.Unmarshal([]byte(out), &g) != nil || g.Token == 0 || len(g.Holder) != 16 || !strings.HasSuffix(g.Sequencer, ":other") {
		t.Fatalf("acquire --json: %d %s", code, out)
	}
	code, out, _ = rl("lock", "get", "jobs/compactor")
	if code != 0 || !strings.Contains(out, "lock jobs/compactor: exclusive, 1 holder(s)") || !strings.Contains(out, `value "10.0.0.7:8080"`) {
		t.Fatalf("lock get: %d %s", code, out)
	}
	code, out, _ = rl("lock", "get", "--json", "jobs/compactor")
	var l api.LockReply
	if code != 0 || json.Unmarshal([]byte(out), &l) != nil || len(l.Holders) != 1 || l.Holders[0].Holder != "h1" {
		t.Fatalf("lock get --json: %d %s", code, out)
	}
	code, out, _ = rl("lock", "list", "jobs/")
	if code != 0 || !strings.Contains(out, "jobs/compactor") || strings.Contains(out, "other") {
		t.Fatalf("lock list: %d %s", code, out)
	}
	code, out, _ = rl("sequencer", "check", "rl1:x:2:jobs/compactor")
	if code != 0 || !strings.HasPrefix(out, "valid") {
		t.Fatalf("sequencer check: %d %s", code, out)
	}
	code, out, _ = rl("session", "keepalive", sid)
	if code != 0 || out != "20s\n" {
		t.Fatalf("keepalive: %d %s", code, out)
	}
	code, out, _ = rl("session", "get", sid)
	if code != 0 || !strings.Contains(out, "name: demo") || !strings.Contains(out, "jobs/compactor") {
		t.Fatalf("session get: %d %s", code, out)
	}
	code, _, errOut = rl("release", "--session", sid, "--holder", "h2", "jobs/compactor")
	if code != 1 || !strings.HasPrefix(errOut, "raftlock: not_holder: ") {
		t.Fatalf("release by non-holder: %d %s", code, errOut)
	}
	code, out, _ = rl("release", "--session", sid, "--holder", "h1", "jobs/compactor")
	if code != 0 || out != "released jobs/compactor\n" {
		t.Fatalf("release: %d %s", code, out)
	}
	code, out, errOut = rl("sequencer", "check", "rl1:x:2:jobs/compactor")
	if code != 1 || !strings.HasPrefix(out, "not valid") || !strings.HasPrefix(errOut, "raftlock: stale_sequencer: ") {
		t.Fatalf("stale sequencer check: %d %q %q", code, out, errOut)
	}
	code, out, _ = rl("lock", "get", "jobs/compactor")
	if code != 0 || !strings.Contains(out, "free") {
		t.Fatalf("free lock: %d %s", code, out)
	}
	if code, _, _ = rl("session", "close", sid); code != 0 {
		t.Fatalf("close: %d", code)
	}
	code, _, errOut = rl("session", "get", sid)
	if code != 1 || !strings.HasPrefix(errOut, "raftlock: session_not_found: ") {
		t.Fatalf("closed session: %d %s", code, errOut)
	}
	code, _, errOut = rl("sequencer", "check", "garbage")
	if code != 1 || !strings.HasPrefix(errOut, "raftlock: invalid_argument: ") {
		t.Fatalf("bad sequencer: %d %s", code, errOut)
	}
}

func TestUsage(t *testing.T) {
	rl := cluster(t)
	for _, args := range [][]string{
		{}, {"bogus"}, {"lock"}, {"lock", "frob"}, {"lock", "get"}, {"lock", "get", "a", "b"},
		{"acquire", "x"}, {"acquire", "--session", "s"}, {"release", "--session", "s", "x"},
		{"session", "open", "--ttl", "soon"}, {"--nope", "status"}, {"status", "extra"},
		{"acquire", "--session", "s", "--wait", "-1s", "x"},
	} {
		code, out, errOut := rl(args...)
		if code != 2 || errOut == "" {
			t.Errorf("%q: %d %q %q, want usage error 2", args, code, out, errOut)
		}
	}
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}, {"lock", "-h"}, {"acquire", "-h"}} {
		code, out, _ := rl(args...)
		if code != 0 || !strings.Contains(out, "usage: raftlock") {
			t.Errorf("%q: %d %q, want usage on stdout", args, code, out)
		}
	}
}

func TestUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"--addr", addr, "--timeout", "100ms", "status"}, &out, &errOut)
	if code != 1 || !strings.HasPrefix(errOut.String(), "raftlock: no_leader: ") {
		t.Fatalf("unreachable: %d %q", code, errOut.String())
	}
	// A list of addresses: the second answers.
	cluster(t)
	code = run(context.Background(), []string{"--addr", addr + "," + os.Getenv("RAFTLOCK_ADDR"), "status"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("second address: %d %s", code, errOut.String())
	}
	code = run(context.Background(), []string{"--addr", "nonsense", "status"}, &out, &errOut)
	if code != 2 {
		t.Fatalf("bad --addr: %d", code)
	}
}

// A duration flag out of its range is a usage error (exit 2) printed once,
// as "raftlock: usage: ..." naming the command, the flag, the value and
// the allowed range, then a hint naming the command's help, before any
// request is sent.
func TestBadDurationFlagsAreUsageErrors(t *testing.T) {
	rl := cluster(t)
	const (
		openHint    = "run 'raftlock help session open' for usage\n"
		acquireHint = "run 'raftlock help acquire' for usage\n"
		globalHint  = "run 'raftlock help' for usage\n"
	)
	for _, tc := range []struct {
		args       []string
		want, hint string
	}{
		{[]string{"session", "open", "--ttl", "0s"}, "raftlock: usage: session open: --ttl 0s out of range [1s, 5m0s]\n", openHint},
		{[]string{"session", "open", "--ttl", "-15s"}, "raftlock: usage: session open: --ttl -15s out of range [1s, 5m0s]\n", openHint},
		{[]string{"session", "open", "--ttl", "999ms"}, "raftlock: usage: session open: --ttl 999ms out of range [1s, 5m0s]\n", openHint},
		{[]string{"session", "open", "--ttl", "5m1s"}, "raftlock: usage: session open: --ttl 5m1s out of range [1s, 5m0s]\n", openHint},
		{[]string{"session", "open", "--lock-delay", "-1ns"}, "raftlock: usage: session open: --lock-delay -1ns out of range [0s, 1m0s]\n", openHint},
		{[]string{"session", "open", "--lock-delay", "61s"}, "raftlock: usage: session open: --lock-delay 1m1s out of range [0s, 1m0s]\n", openHint},
		{[]string{"acquire", "--session", "s", "--wait", "-1s", "x"}, "raftlock: usage: acquire: --wait -1s out of range [0s, 10m0s]\n", acquireHint},
		{[]string{"acquire", "--session", "s", "--wait", "10m1s", "x"}, "raftlock: usage: acquire: --wait 10m1s out of range [0s, 10m0s]\n", acquireHint},
		{[]string{"--timeout", "-1s", "status"}, "raftlock: usage: --timeout -1s out of range [0s, ∞)\n", globalHint},
		{[]string{"session", "open", "--ttl", "soon"}, "raftlock: usage: session open: invalid value \"soon\" for flag -ttl: not a duration: write it like 5s, 500ms or 1m30s\n", openHint},
	} {
		code, out, errOut := rl(tc.args...)
		if code != 2 || errOut != tc.want+tc.hint {
			t.Errorf("%q: exit %d, stderr %q; want 2, %q", tc.args, code, errOut, tc.want+tc.hint)
		}
		if strings.Contains(out, "token:") || strings.HasPrefix(out, "s") {
			t.Errorf("%q: the command ran: stdout %q", tc.args, out)
		}
	}
}

// The bounds of each duration flag are accepted, and the zeros that mean
// something: --lock-delay 0s (none), --wait 0s (try once), --timeout 0s
// (never give up).
func TestDurationFlagBoundsAreAccepted(t *testing.T) {
	rl := cluster(t)
	for _, args := range [][]string{
		{"session", "open", "--ttl", "1s"},
		{"session", "open", "--ttl", "5m"},
		{"session", "open", "--lock-delay", "0s"},
		{"session", "open", "--lock-delay", "1m"},
		{"--timeout", "0s", "session", "open"},
	} {
		if code, out, errOut := rl(args...); code != 0 || !strings.HasPrefix(out, "s") {
			t.Errorf("%q: exit %d %q %q, want a session id", args, code, out, errOut)
		}
	}
	_, out, _ := rl("session", "open")
	sid := strings.TrimSpace(out)
	for i, wait := range []string{"0s", "10m"} {
		args := []string{"acquire", "--session", sid, "--wait", wait, fmt.Sprintf("bound/%d", i)}
		if code, out, errOut := rl(args...); code != 0 || !strings.Contains(out, "token: ") {
			t.Errorf("%q: exit %d %q %q, want a grant", args, code, out, errOut)
		}
	}
}
