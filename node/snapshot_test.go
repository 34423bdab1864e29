package node

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/sequencer"
	"github.com/raftlock/raftlock/session"
	"github.com/raftlock/raftlock/session/api"
	"github.com/raftlock/raftlock/transport"
)

// TestRestoreIntoRunningClusterRaisesTokensAndDropsNewerSessions pins a
// restore into a running cluster (issue test 5): a backup is taken at T1,
// grants continue to T2, the backup is restored through the HTTP API;
// then the sessions and locks are the backup's, a live client whose
// session did not exist at the backup sees session_not_found and its
// Lost() closes, a live client whose session did exist keeps it (fresh
// deadline), and the next grant's token is above T2, so that a fence that
// saw T2 admits the new holder and still refuses T2's.
func TestRestoreIntoRunningClusterRaisesTokensAndDropsNewerSessions(t *testing.T) {
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

	newer, err := session.Open(ctx, cl, session.TTL(3*time.Second), session.Name("newer"))
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
	if info.Floor < uint64(t2) || info.Sessions != 1 || info.Locks != 1 {
		t.Fatalf("restore answered %+v; want floor >= T2 %d, 1 session, 1 lock", info, t2)
	}
	select {
	case <-b.Lost():
	case <-time.After(20 * time.Second):
		t.Fatalf("the newer session's lock was not lost after the restore (state %v)", newer.State())
	}
	if _, err := cl.KeepAlive(ctx, newer.ID()); api.CodeOf(err) != api.CodeSessionNotFound {
		t.Fatalf("keepalive of a session the backup does not hold: %v, want session_not_found", err)
	}
	st, err := cl.LockState(ctx, "backup/a")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Holders) != 1 || st.Holders[0].Token != t1 || st.Holders[0].Holder != a.Holder() {
		t.Fatalf("backup/a after the restore: %+v; want held by the backup's holder with token %d", st.Holders, t1)
	}
	if _, err := cl.KeepAlive(ctx, old.ID()); err != nil {
		t.Fatalf("keepalive of a restored session: %v", err)
	}
	if err := cl.Release(ctx, api.ReleaseRequest{Name: "backup/a", Session: old.ID(), Holder: a.Holder()}); err != nil {
		t.Fatal(err)
	}
	again, err := session.Open(ctx, cl, session.TTL(3*time.Second), session.Name("again"))
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close(ctx)
	d, err := again.Lock(ctx, "backup/a")
	if err != nil {
		t.Fatal(err)
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
	mgmt, err := n.ACLBootstrap(ctx)
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

// TestRestoreReachesTheLeaderFromAFollower pins the two ways a restore
// sent to a follower reaches the leader: the HTTP API forwards it, body
// and all, even past the 64 KiB limit of other requests; and
// RestoreNewCluster (raftlockd --restore) on a follower posts it to the
// leader's peer port, with its --min-token as the floor.
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
	follower, err := transport.NewClient([]string{c.httpAddrs[fi]})
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
	const minToken = 1 << 40
	info, err = c.snapshotNodes()[fi].RestoreNewCluster(ctx, backup.Bytes(), minToken)
	if err != nil {
		t.Fatalf("RestoreNewCluster on a follower: %v", err)
	}
	if info.Floor < minToken {
		t.Fatalf("floor %d below min token %d", info.Floor, minToken)
	}
	s := mustOpen(t, c, api.OpenRequest{TTL: time.Minute})
	if g := mustAcquire(t, c, api.AcquireRequest{Name: "after", Session: s.ID, Holder: "h"}); uint64(g.Token) <= minToken {
		t.Fatalf("token %d after a restore with min token %d", g.Token, minToken)
	}
}

// TestNewRefusesASnapshotIntervalOutOfRange pins Config.SnapshotInterval's
// bounds: refused (invalid_argument, naming the range) before the data
// dir is touched.
func TestNewRefusesASnapshotIntervalOutOfRange(t *testing.T) {
	for _, d := range []time.Duration{-time.Second, time.Millisecond, 2 * time.Hour} {
		dir := filepath.Join(t.TempDir(), "data")
		n, err := New(Config{ID: "n1", DataDir: dir, RaftBind: "127.0.0.1:0", SnapshotInterval: d})
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
