package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/cmd/internal/proccluster"
	"github.com/raftlock/raftlock/sequencer"
	"github.com/raftlock/raftlock/transport/client"
)

// runCLI runs the raftlock binary cli with args and returns its stdout,
// failing the test if it does not exit 0.
func runCLI(t *testing.T, cli string, args ...string) string {
	t.Helper()
	out, err := exec.Command(cli, args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("raftlock %v: %v: %s", args, err, ee.Stderr)
		}
		t.Fatalf("raftlock %v: %v", args, err)
	}
	return string(out)
}

// grant opens a session and takes lock name with it.
func grant(ctx context.Context, t *testing.T, cl *client.Client, name, holder string) (api.Info, api.Grant) {
	t.Helper()
	info, err := cl.OpenSession(ctx, api.OpenRequest{TTL: time.Minute, Name: holder})
	if err != nil {
		t.Fatalf("open session: %v", err)
	}
	g, err := cl.Acquire(ctx, api.AcquireRequest{Name: name, Session: info.ID, Holder: holder})
	if err != nil {
		t.Fatalf("acquire %s: %v", name, err)
	}
	return info, g
}

// TestRestoreIntoNewClusterKeepsFencesSafe pins issue test 4 end to end,
// with the CLI: a backup is saved (raftlock snapshot save) while holder A
// has token T1; A releases and B takes the lock with T2 > T1, which a
// fence sees; the cluster is destroyed; a new three-node cluster starts
// with raftlockd --restore FILE --min-token T2 --restore-hold 3s on its
// first node; from its very first answer the new cluster serves the
// restored state (never an empty one: no grant at or below T2, ever),
// the backup's session is over (no client of the old cluster is vouched
// for), no lock is granted during the hold (a try is lock_busy, a wait
// queues), the first grant's token is above T2, and the fence admits the
// new holder and still refuses B. Restoring the same file into the running
// new cluster (raftlock snapshot restore) raises tokens again, and a
// corrupted file is refused with nothing changed.
func TestRestoreIntoNewClusterKeepsFencesSafe(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs raftlockd processes")
	}
	bin := proccluster.BuildDaemon(t)
	cli := proccluster.Build(t, "github.com/raftlock/raftlock/cmd/raftlock", "raftlock")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	old := proccluster.Start(t, bin, 3)
	if _, err := old.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	cl := old.Client()
	a, ga := grant(ctx, t, cl, "backup/marker", "a")
	file := filepath.Join(t.TempDir(), "backup.rlsnap")
	runCLI(t, cli, "--addr", old.AddrList(), "snapshot", "save", file)
	var rep struct {
		Index    uint64 `json:"index"`
		Sessions int    `json:"sessions"`
		Locks    int    `json:"locks"`
		Checksum string `json:"checksum"`
	}
	if err := json.Unmarshal([]byte(runCLI(t, cli, "snapshot", "inspect", "-o", "json", file)), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Index < uint64(ga.Token) || rep.Sessions != 1 || rep.Locks != 1 || len(rep.Checksum) != 64 {
		t.Fatalf("inspect: %+v; want index >= T1 %d, 1 session, 1 lock, a SHA-256", rep, ga.Token)
	}
	if err := cl.Release(ctx, api.ReleaseRequest{Name: "backup/marker", Session: a.ID, Holder: "a"}); err != nil {
		t.Fatal(err)
	}
	_, gb := grant(ctx, t, cl, "backup/marker", "b")
	fence := sequencer.NewFence()
	if err := fence.Check(gb.Sequencer); err != nil {
		t.Fatal(err)
	}
	for i := range old.Nodes {
		old.Kill(i)
	}

	const hold = 3 * time.Second
	fresh := proccluster.StartEach(t, bin, 3, func(i int) []string {
		if i == 0 {
			return []string{"--restore", file, "--min-token", fmt.Sprint(gb.Token), "--restore-hold", hold.String()}
		}
		return nil
	})
	ncl := fresh.Client()
	// From the first answer on: the restored state, in its hold.
	var sc api.Info
	proccluster.Eventually(t, time.Minute, "the new cluster opens a session", func() error {
		var err error
		sc, err = ncl.OpenSession(ctx, api.OpenRequest{Name: "c", TTL: 10 * time.Second})
		return err
	})
	started := time.Now()
	if _, err := ncl.Acquire(ctx, api.AcquireRequest{Name: "backup/marker", Session: sc.ID, Holder: "c"}); api.CodeOf(err) != api.CodeLockBusy {
		t.Fatalf("try during the restore hold: %v, want lock_busy", err)
	}
	if _, err := ncl.KeepAlive(ctx, a.ID); api.CodeOf(err) != api.CodeSessionNotFound {
		t.Fatalf("keepalive of the backup's session in the new cluster: %v, want session_not_found", err)
	}
	gc, err := ncl.Acquire(ctx, api.AcquireRequest{Name: "backup/marker", Session: sc.ID, Holder: "c", Wait: time.Minute})
	if err != nil {
		t.Fatalf("wait through the hold: %v", err)
	}
	if waited := time.Since(started); waited < hold/2 {
		t.Fatalf("granted %v into a hold of %v", waited, hold)
	}
	if gc.Token <= gb.Token {
		t.Fatalf("first grant of the new cluster: token %d, not above T2 %d", gc.Token, gb.Token)
	}
	if err := fence.Check(gc.Sequencer); err != nil {
		t.Fatalf("fence that saw T2 refuses the new holder: %v", err)
	}
	if err := fence.Check(gb.Sequencer); !errors.Is(err, sequencer.ErrStale) {
		t.Fatalf("fence admits T2's holder after the restore: %v", err)
	}

	// A corrupted file changes nothing; the good one restores again.
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 1
	bad := filepath.Join(t.TempDir(), "bad.rlsnap")
	if err := os.WriteFile(bad, data, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(cli, "--addr", fresh.AddrList(), "snapshot", "restore", bad).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "invalid_argument") || !strings.Contains(string(out), "checksum mismatch") {
		t.Fatalf("restore of a corrupted file: %v: %s", err, out)
	}
	if st, err := ncl.LockState(ctx, "backup/marker"); err != nil || len(st.Holders) != 1 || st.Holders[0].Token != gc.Token {
		t.Fatalf("state after a refused restore: %+v, %v", st, err)
	}
	runCLI(t, cli, "--addr", fresh.AddrList(), "snapshot", "restore", file)
	_, gd := grant(ctx, t, ncl, "backup/other", "d")
	if gd.Token <= gc.Token {
		t.Fatalf("first grant after the second restore: token %d, not above %d", gd.Token, gc.Token)
	}
}

// TestRecoverLastNodeKeepsStateAndRaisesTokens pins issue test 6: two of
// three nodes are destroyed (killed, data dirs deleted); raftlock
// snapshot inspect of the survivor's data dir names its last index (a
// lower bound for --min-token); raftlockd
// --recover with a peers file naming the survivor alone rewrites its data
// dir; started again, it is a working cluster with the last committed
// state (the locks' histories) but no session, since the lost nodes may
// have committed grants its clients believe in (DESIGN.md, "Server actions
// never outrun the holder"), and no grant before --restore-hold; the next
// grant's token is above every earlier one and above --min-token.
func TestRecoverLastNodeKeepsStateAndRaisesTokens(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs raftlockd processes")
	}
	bin := proccluster.BuildDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := proccluster.Start(t, bin, 3)
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	cl := c.Client()
	a, ga := grant(ctx, t, cl, "recover/kept", "a")
	_, gb := grant(ctx, t, cl, "recover/last", "b")
	// The leader holds every committed entry: it survives.
	s, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range c.Nodes {
		c.Kill(i)
		if i != s {
			if err := os.RemoveAll(c.Flag(i, "--data-dir")); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The survivor's data dir names a lower bound for --min-token.
	cli := proccluster.Build(t, "github.com/raftlock/raftlock/cmd/raftlock", "raftlock")
	var dd struct {
		LastIndex uint64 `json:"last_index"`
	}
	if err := json.Unmarshal([]byte(runCLI(t, cli, "snapshot", "inspect", "-o", "json", c.Flag(s, "--data-dir"))), &dd); err != nil {
		t.Fatal(err)
	}
	if dd.LastIndex < uint64(gb.Token) {
		t.Fatalf("inspect of the survivor's data dir: last index %d below its last token %d", dd.LastIndex, gb.Token)
	}
	peers := filepath.Join(t.TempDir(), "peers.json")
	body := fmt.Sprintf(`[{"id": %q, "address": %q, "non_voter": false}]`, c.Nodes[s].ID, c.Flag(s, "--raft-addr"))
	if err := os.WriteFile(peers, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	minToken := uint64(gb.Token) + 1000
	out, err := exec.Command(bin, "--recover", peers, "--data-dir", c.Flag(s, "--data-dir"),
		"--min-token", fmt.Sprint(minToken), "--restore-hold", "2s").CombinedOutput()
	if err != nil {
		t.Fatalf("raftlockd --recover: %v: %s", err, out)
	}
	c.Restart(s)
	scl, err := client.NewClient([]string{c.Nodes[s].HTTPAddr})
	if err != nil {
		t.Fatal(err)
	}
	proccluster.Eventually(t, time.Minute, "the survivor serves alone", func() error {
		st, err := scl.LockState(ctx, "recover/last")
		if err != nil {
			return err
		}
		if len(st.Holders) != 0 || len(st.Grants) == 0 || st.Grants[len(st.Grants)-1].Token != gb.Token {
			return fmt.Errorf("recover/last %+v: want no holder, its last grant %d in the history", st, gb.Token)
		}
		return nil
	})
	if info, err := scl.Cluster(ctx); err != nil || len(info.Members) != 1 || info.Members[0].ID != c.Nodes[s].ID {
		t.Fatalf("cluster after recovery: %+v, %v; want the peers file's one member", info, err)
	}
	if _, err := scl.KeepAlive(ctx, a.ID); api.CodeOf(err) != api.CodeSessionNotFound {
		t.Fatalf("keepalive of a session after recovery: %v, want session_not_found", err)
	}
	_ = ga
	sc, err := scl.OpenSession(ctx, api.OpenRequest{Name: "c"})
	if err != nil {
		t.Fatal(err)
	}
	gc, err := scl.Acquire(ctx, api.AcquireRequest{Name: "recover/kept", Session: sc.ID, Holder: "c", Wait: time.Minute})
	if err != nil {
		t.Fatalf("acquire through the restore hold: %v", err)
	}
	if uint64(gc.Token) <= minToken {
		t.Fatalf("first grant after recovery: token %d, not above --min-token %d (T2 %d)", gc.Token, minToken, gb.Token)
	}
}

// TestRecoverThreeNodesFromOneCopiedDataDir pins the README's other way
// back to three nodes: the survivor's data dir is recovered with a peers
// file naming all three, copied to the two new nodes, and the three
// started: they form one cluster with the survivor's state, which outlives
// the loss of its first leader, and tokens rise above --min-token.
func TestRecoverThreeNodesFromOneCopiedDataDir(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs raftlockd processes")
	}
	bin := proccluster.BuildDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := proccluster.Start(t, bin, 3)
	s, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cl := c.Client()
	_, ga := grant(ctx, t, cl, "recover/kept", "a")
	var peers []string
	for i := range c.Nodes {
		c.Kill(i)
		peers = append(peers, fmt.Sprintf(`{"id": %q, "address": %q}`, c.Nodes[i].ID, c.Flag(i, "--raft-addr")))
	}
	file := filepath.Join(t.TempDir(), "peers.json")
	if err := os.WriteFile(file, []byte("["+strings.Join(peers, ",")+"]"), 0o600); err != nil {
		t.Fatal(err)
	}
	minToken := uint64(ga.Token) + 1_000_000
	survivor := c.Flag(s, "--data-dir")
	// raftlockd recover here; TestRecoverLastNodeKeepsStateAndRaisesTokens
	// runs its deprecated spelling, --recover.
	if out, err := exec.Command(bin, "recover", "--peers-file", file, "--data-dir", survivor, "--min-token", fmt.Sprint(minToken), "--restore-hold", "0s").CombinedOutput(); err != nil {
		t.Fatalf("raftlockd recover: %v: %s", err, out)
	}
	for i := range c.Nodes {
		if i == s {
			continue
		}
		dir := c.Flag(i, "--data-dir")
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("cp", "-a", survivor, dir).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v: %s", err, out)
		}
	}
	for i := range c.Nodes {
		c.Restart(i)
	}
	l, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := cl.LockState(ctx, "recover/kept"); err != nil || len(st.Holders) != 0 || len(st.Grants) == 0 || st.Grants[len(st.Grants)-1].Token != ga.Token {
		t.Fatalf("state after recovery: %+v, %v; want its history, no holder (no session is recovered)", st, err)
	}
	c.Kill(l)
	_, gb := grant(ctx, t, cl, "recover/new", "b")
	if uint64(gb.Token) <= minToken {
		t.Fatalf("grant after recovery and a failover: token %d, not above --min-token %d", gb.Token, minToken)
	}
}
