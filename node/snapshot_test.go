package node

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/sequencer"
	"github.com/raftlock/raftlock/session"
	"github.com/raftlock/raftlock/transport/client"
)

// TestRestoreIntoRunningClusterRaisesTokensAndNeverOutrunsTheHolder: a
// session takes a lock (T1), the backup is taken, it releases the lock and
// a newer session takes it (T2), then the backup is restored through the
// HTTP API. No client may be left believing what the cluster no longer
// says (DESIGN.md, "Server actions never outrun the holder"): the newer
// session (not in the backup) and the old one (its grants differ: the
// backup's grant is a ghost its client released) both end, and their
// clients learn it at their next keepalive, so the newer holder's Lost()
// closes; the lock is not given back to the old holder, and stays
// unavailable for the newer holder's ttl + lock-delay; the next grant's
// token is above T2 and the floor, so that a fence that saw T2 admits the
// new holder and still refuses T2's.
func TestRestoreIntoRunningClusterRaisesTokensAndNeverOutrunsTheHolder(t *testing.T) {
	c := newTestCluster(t, 3, slowRaft, withHTTP)
	ctx := ctxT(t)
	cl := c.client(t)
	old, err := session.Open(ctx, cl, session.TTL(3*time.Second), session.Name("old"))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close(ctx)
	a, err := old.Lock(ctx, "backup/a")
	if err != nil {
		t.Fatal(err)
	}
	var backup bytes.Buffer
	if _, err := cl.Snapshot(ctx, &backup); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	t1 := a.Token()

	const ttl, lockDelay = 3 * time.Second, time.Second
	newer, err := session.Open(ctx, cl, session.TTL(ttl), session.LockDelay(lockDelay), session.Name("newer"))
	if err != nil {
		t.Fatal(err)
	}
	defer newer.Close(ctx)
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := newer.Lock(ctx, "backup/a")
	if err != nil {
		t.Fatal(err)
	}
	t2 := b.Token()
	if t2 <= t1 {
		t.Fatalf("T2 %d not above T1 %d", t2, t1)
	}
	fence := sequencer.NewFence()
	if err := fence.Check(b.Sequencer()); err != nil {
		t.Fatal(err)
	}

	info, err := cl.Restore(ctx, backup.Bytes(), 0)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	restored := time.Now()
	if info.Floor < uint64(t2) || info.Sessions != 0 || info.SessionsEnded != 2 || info.GrantsRevoked != 1 || info.GrantsDropped != 1 {
		t.Fatalf("restore answered %+v; want floor >= T2 %d, 2 sessions ended, 1 grant revoked, 1 dropped", info, t2)
	}
	st, err := cl.LockState(ctx, "backup/a")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Holders) != 0 {
		t.Fatalf("backup/a after the restore: %+v; want no holder (the backup's grant was released since)", st.Holders)
	}
	for _, s := range []*session.Session{old, newer} {
		if _, err := cl.KeepAlive(ctx, s.ID()); api.CodeOf(err) != api.CodeSessionNotFound {
			t.Fatalf("keepalive of a session the restore ended: %v, want session_not_found", err)
		}
	}
	again, err := session.Open(ctx, cl, session.TTL(3*time.Second), session.Name("again"))
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close(ctx)
	if _, err := again.TryLock(ctx, "backup/a"); !errors.Is(err, api.ErrLockBusy) {
		t.Fatalf("try of the revoked lock right after the restore: %v, want lock_busy (ttl + lock-delay)", err)
	}
	d, err := again.Lock(ctx, "backup/a")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.Lost():
	default:
		t.Fatalf("backup/a granted again while the revoked holder's Lost() is open (state %v)", newer.State())
	}
	if waited := time.Since(restored); waited < ttl+lockDelay-500*time.Millisecond {
		t.Fatalf("backup/a granted again %v after the restore; want ttl + lock-delay (%v)", waited, ttl+lockDelay)
	}
	if d.Token() <= t2 || uint64(d.Token()) <= info.Floor {
		t.Fatalf("first grant after the restore has token %d; want above T2 %d and the floor %d", d.Token(), t2, info.Floor)
	}
	if err := fence.Check(d.Sequencer()); err != nil {
		t.Fatalf("fence that saw T2 refuses the new holder: %v", err)
	}
	if err := fence.Check(b.Sequencer()); !errors.Is(err, sequencer.ErrStale) {
		t.Fatalf("fence admits T2's holder after the restore: %v", err)
	}
	// Every node holds the restored state (followers install it).
	eventually(t, 20*time.Second, "followers install the restored state", func() error {
		for _, n := range c.snapshotNodes() {
			l, ok := n.fsm.Lock("backup/a")
			if !ok || len(l.Holders) != 1 || l.Holders[0].Token != uint64(d.Token()) {
				return errors.New(n.ID() + " lags")
			}
		}
		return nil
	})
}

// TestBadBackupIsRefusedAndStateUnchanged pins that a restore checks the
// whole file first: a truncated, corrupted or foreign file, or none, is
// refused with invalid_argument saying why, as is a min token above 2^62,
// and neither the state nor the log changes.
func TestBadBackupIsRefusedAndStateUnchanged(t *testing.T) {
	c := newTestCluster(t, 1, nil, withHTTP) // one node: no follower to lose it to
	ctx := ctxT(t)
	cl := c.client(t)
	info := mustOpen(t, c, api.OpenRequest{TTL: time.Minute})
	mustAcquire(t, c, api.AcquireRequest{Name: "keep", Session: info.ID, Holder: "h"})
	var good bytes.Buffer
	if _, err := cl.Snapshot(ctx, &good); err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(good.Bytes())
	flipped[len(flipped)/2] ^= 0x40
	n, _ := c.leader()
	// The leader records its own HTTP address once: wait for it, so that
	// nothing but the restores below could change the log.
	eventually(t, 10*time.Second, "the leader's member record", func() error {
		for _, m := range n.fsm.Members() {
			if m.ID == n.ID() && m.HTTPAddr == c.httpAddrs[0] {
				return nil
			}
		}
		return errors.New("not yet")
	})
	before, last := n.fsm.Dump(), n.raft.LastIndex()
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"truncated", good.Bytes()[:good.Len()-100], "checksum mismatch"},
		{"corrupted", flipped, "checksum mismatch"},
		{"foreign", []byte("PK\x03\x04 this is a zip file, not a backup"), "foreign file"},
		{"empty", nil, "foreign file"},
		{"only the magic", []byte("RAFTLOCK-BACKUP\n"), "truncated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cl.Restore(ctx, tc.data, 0)
			if api.CodeOf(err) != api.CodeInvalidArgument || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("restore of a %s file: %v; want invalid_argument saying %q", tc.name, err, tc.want)
			}
		})
	}
	if _, err := cl.Restore(ctx, good.Bytes(), MaxMinToken+1); api.CodeOf(err) != api.CodeInvalidArgument || !strings.Contains(err.Error(), "min token") {
		t.Fatalf("restore with a min token above 2^62: %v; want invalid_argument", err)
	}
	if after := n.fsm.Dump(); !bytes.Equal(after, before) || n.raft.LastIndex() != last {
		t.Fatalf("state or log changed by refused restores (last index %d -> %d)", last, n.raft.LastIndex())
	}
}

// TestSnapshotAndRestoreNeedAdminWithACLs pins that backups and restores
// are admin operations: a token with write access to every lock is
// refused both (permission_denied).
func TestSnapshotAndRestoreNeedAdminWithACLs(t *testing.T) {
	c := newTestCluster(t, 1, func(cfg *Config) { cfg.ACL = true })
	n, _ := c.leader()
	ctx := ctxT(t)
	mgmt, err := n.ACLBootstrap(ctx, api.BootstrapRequest{})
	if err != nil {
		t.Fatal(err)
	}
	adminRules, err := api.ParseRules([]string{"admin"})
	if err != nil {
		t.Fatal(err)
	}
	writeRules, err := api.ParseRules([]string{"write:"})
	if err != nil {
		t.Fatal(err)
	}
	admin := api.WithPrincipal(ctx, api.Principal{TokenID: mgmt.ID, Rules: adminRules})
	var buf bytes.Buffer
	if _, err := n.Snapshot(admin, &buf); err != nil {
		t.Fatalf("admin snapshot: %v", err)
	}
	writer := api.WithPrincipal(ctx, api.Principal{TokenID: "w", Rules: writeRules})
	if _, err := n.Snapshot(writer, &bytes.Buffer{}); api.CodeOf(err) != api.CodePermissionDenied {
		t.Fatalf("snapshot with a write token: %v, want permission_denied", err)
	}
	if _, err := n.Restore(writer, buf.Bytes(), 0); api.CodeOf(err) != api.CodePermissionDenied {
		t.Fatalf("restore with a write token: %v, want permission_denied", err)
	}
}

// TestRestoreReachesTheLeaderFromAFollower pins how a restore sent to a
// follower reaches the leader: the HTTP API forwards it, body and all,
// even past the 64 KiB limit of other requests.
func TestRestoreReachesTheLeaderFromAFollower(t *testing.T) {
	c := newTestCluster(t, 3, slowRaft, withHTTP)
	ctx := ctxT(t)
	n, li := c.leader()
	name := strings.Repeat("x", 200)
	for range 400 {
		if _, err := n.OpenSession(ctx, api.OpenRequest{TTL: time.Minute, Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	var backup bytes.Buffer
	if _, err := n.Snapshot(ctx, &backup); err != nil {
		t.Fatal(err)
	}
	if backup.Len() <= 64<<10 {
		t.Fatalf("backup of %d bytes: the test needs one above 64 KiB", backup.Len())
	}
	fi := (li + 1) % 3
	follower, err := client.NewClient([]string{c.httpAddrs[fi]})
	if err != nil {
		t.Fatal(err)
	}
	info, err := follower.Restore(ctx, backup.Bytes(), 0)
	if err != nil {
		t.Fatalf("restore through a follower: %v", err)
	}
	if info.Sessions != 400 {
		t.Fatalf("restored %d sessions, want 400", info.Sessions)
	}
}

// TestNewRefusesASnapshotIntervalOutOfRange pins Config.SnapshotInterval's
// bounds: refused (invalid_argument, naming the range) before the data
// dir is touched.
func TestNewRefusesASnapshotIntervalOutOfRange(t *testing.T) {
	for _, d := range []time.Duration{-time.Second, time.Millisecond, 2 * time.Hour} {
		dir := filepath.Join(t.TempDir(), "data")
		n, err := New(Config{ID: "n1", DataDir: dir, RaftBind: "127.0.0.1:0", SnapshotInterval: d, Wire: testWire{}})
		if err == nil {
			n.Shutdown(ctxT(t))
			t.Fatalf("New accepted SnapshotInterval %v", d)
		}
		if !errors.Is(err, api.ErrInvalidArgument) || !strings.Contains(err.Error(), "SnapshotInterval") ||
			!strings.Contains(err.Error(), "[100ms, 1h0m0s]") {
			t.Errorf("SnapshotInterval %v: %v, want invalid_argument naming the range", d, err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("SnapshotInterval %v: New touched the data dir (%v)", d, err)
		}
	}
}
