package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/sequencer"
)

// logStoreCluster is a 1-node cluster whose data dir was created with
// log store kind ("" for the default), holding a session and a grant.
func logStoreCluster(t *testing.T, kind string) (*testCluster, api.Info, api.Grant) {
	t.Helper()
	c := newTestCluster(t, 1, func(cfg *Config) { cfg.LogStore = kind })
	s := mustOpen(t, c, api.OpenRequest{TTL: 5 * time.Minute, Name: "s"})
	g := mustAcquire(t, c, api.AcquireRequest{Name: "a", Session: s.ID, Holder: "h"})
	return c, s, g
}

// startWith starts the stopped node 0 of c with log store kind and
// returns Start's error (a node that starts joins c again).
func startWith(t *testing.T, c *testCluster, kind string) error {
	t.Helper()
	c.tweak = func(cfg *Config) { cfg.LogStore = kind }
	cfg := c.config(0)
	n, err := Start(ctxT(t), cfg)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.nodes[0] = n
	c.mu.Unlock()
	return nil
}

// awaitHolder waits until lock a is held with token.
func awaitHolder(t *testing.T, c *testCluster, token sequencer.Token) {
	t.Helper()
	eventually(t, 20*time.Second, "lock a held with the old token", func() error {
		var st api.LockState
		err := c.do(func(n *Node) (err error) { st, err = n.LockState(ctxT(t), "a"); return })
		if err != nil {
			return err
		}
		if len(st.Holders) != 1 || st.Holders[0].Token != token {
			return fmt.Errorf("holders %+v, want token %d", st.Holders, token)
		}
		return nil
	})
}

// readLog reads every entry of the stopped data dir's log.
func readLog(t *testing.T, dir string) []raft.Log {
	t.Helper()
	s, err := openDataDirStores(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first, _ := s.logs.FirstIndex()
	last, _ := s.logs.LastIndex()
	var out []raft.Log
	for i := first; i <= last && last > 0; i++ {
		var l raft.Log
		if err := s.logs.GetLog(i, &l); err != nil {
			t.Fatalf("%s: entry %d: %v", dir, i, err)
		}
		l.AppendedAt = l.AppendedAt.UTC() // codecs differ in the zone kept
		out = append(out, l)
	}
	return out
}

// boltLogLen is how many log entries raft.db itself holds.
func boltLogLen(t *testing.T, dir string) uint64 {
	t.Helper()
	s, err := openBolt(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if last == 0 {
		return 0
	}
	return last - first + 1
}

func TestANewDataDirGetsTheWALLogStoreAndKeepsIt(t *testing.T) {
	c, _, g := logStoreCluster(t, "")
	if got := c.nodes[0].LogStore(); got != LogStoreWAL {
		t.Fatalf("log store of a new data dir = %s, want wal", got)
	}
	c.stop(0)
	if kind, err := LogStoreOf(c.dirs[0]); kind != LogStoreWAL || err != nil {
		t.Fatalf("recorded log store = %q, %v", kind, err)
	}
	if n := boltLogLen(t, c.dirs[0]); n != 0 {
		t.Errorf("raft.db holds %d log entries with the wal log store", n)
	}
	if l := readLog(t, c.dirs[0]); len(l) == 0 || l[len(l)-1].Index < uint64(g.Token) {
		t.Fatalf("the WAL does not hold the grant's entry %d: %d entries", g.Token, len(l))
	}
	c.start(0)
	if got := c.nodes[0].LogStore(); got != LogStoreWAL {
		t.Fatalf("log store after a restart = %s", got)
	}
	awaitHolder(t, c, g.Token)
}

func TestADataDirRefusesAContradictingLogStore(t *testing.T) {
	for _, tc := range []struct{ have, asked string }{{LogStoreBoltDB, LogStoreWAL}, {LogStoreWAL, LogStoreBoltDB}} {
		t.Run(tc.have, func(t *testing.T) {
			c, _, g := logStoreCluster(t, tc.have)
			c.stop(0)
			err := startWith(t, c, tc.asked)
			for _, want := range []string{"holds a " + tc.have + " log store", "--log-store " + tc.have, "--migrate-log-store " + tc.asked} {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("start with --log-store %s on a %s data dir: %v; want an error saying %q", tc.asked, tc.have, err, want)
				}
			}
			if err := startWith(t, c, ""); err != nil {
				t.Fatalf("start without a log store: %v", err)
			}
			if got := c.nodes[0].LogStore(); got != tc.have {
				t.Fatalf("log store = %s, want %s", got, tc.have)
			}
			awaitHolder(t, c, g.Token)
		})
	}
}

func TestMigrateLogStoreMovesEveryEntryBothWays(t *testing.T) {
	c, s, g := logStoreCluster(t, LogStoreBoltDB)
	c.stop(0)
	dir := c.dirs[0]
	before := readLog(t, dir)
	ctx := ctxT(t)
	if _, err := MigrateLogStore(ctx, dir, LogStoreBoltDB, nil); err == nil || !strings.Contains(err.Error(), "already") {
		t.Fatalf("migrate to the store in use: %v", err)
	}
	info, err := MigrateLogStore(ctx, dir, LogStoreWAL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if info.Last != before[len(before)-1].Index {
		t.Errorf("migrate says last %d, the log ends at %d", info.Last, before[len(before)-1].Index)
	}
	if after := readLog(t, dir); !reflect.DeepEqual(after, before) {
		t.Fatalf("the WAL's entries differ from raft.db's: %d vs %d entries", len(after), len(before))
	}
	if n := boltLogLen(t, dir); n != 0 {
		t.Errorf("raft.db still holds %d log entries", n)
	}
	if err := startWith(t, c, ""); err != nil {
		t.Fatal(err)
	}
	if got := c.nodes[0].LogStore(); got != LogStoreWAL {
		t.Fatalf("log store after the migration = %s", got)
	}
	awaitHolder(t, c, g.Token)
	g2 := mustAcquire(t, c, api.AcquireRequest{Name: "b", Session: s.ID, Holder: "h"})
	c.stop(0)
	before = readLog(t, dir)
	if before[len(before)-1].Index < uint64(g2.Token) {
		t.Fatalf("the WAL ends at %d, before the new grant %d", before[len(before)-1].Index, g2.Token)
	}
	if _, err := MigrateLogStore(ctx, dir, LogStoreBoltDB, nil); err != nil {
		t.Fatal(err)
	}
	if after := readLog(t, dir); !reflect.DeepEqual(after, before) {
		t.Fatalf("raft.db's entries differ from the WAL's: %d vs %d entries", len(after), len(before))
	}
	if _, err := os.Stat(filepath.Join(dir, walDirName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("wal/ is left after the migration to boltdb: %v", err)
	}
	if err := startWith(t, c, ""); err != nil {
		t.Fatal(err)
	}
	if got := c.nodes[0].LogStore(); got != LogStoreBoltDB {
		t.Fatalf("log store after the migration back = %s", got)
	}
	awaitHolder(t, c, g.Token)
}

func TestADataDirWithoutARecordOfItsLogStoreIsBoltDB(t *testing.T) {
	c, _, g := logStoreCluster(t, LogStoreBoltDB)
	c.stop(0)
	if err := os.Remove(filepath.Join(c.dirs[0], logStoreFile)); err != nil {
		t.Fatal(err)
	}
	if err := startWith(t, c, ""); err != nil {
		t.Fatal(err)
	}
	if got := c.nodes[0].LogStore(); got != LogStoreBoltDB {
		t.Fatalf("log store of a data dir made before the choice = %s, want boltdb", got)
	}
	awaitHolder(t, c, g.Token)
}

func TestALostStoreBesideAWALLogIsRefused(t *testing.T) {
	for _, tc := range []struct {
		lose string
		want []string
	}{
		{"raft.db", []string{"raft.db", "term and vote", "--join"}},
		{walDirName, []string{walDirName, "log was lost", "--join"}},
	} {
		t.Run(tc.lose, func(t *testing.T) {
			c, _, _ := logStoreCluster(t, LogStoreWAL)
			c.stop(0)
			if err := os.RemoveAll(filepath.Join(c.dirs[0], tc.lose)); err != nil {
				t.Fatal(err)
			}
			err := startWith(t, c, "")
			var d *DataDamagedError
			if !errors.As(err, &d) {
				t.Fatalf("start without %s: %v; want a DataDamagedError", tc.lose, err)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%q does not say %q", err, want)
				}
			}
		})
	}
}

func TestAnUnknownLogStoreIsRefused(t *testing.T) {
	_, err := New(Config{ID: "n1", DataDir: t.TempDir(), RaftBind: "127.0.0.1:0", LogStore: "sqlite", Wire: testWire{}})
	if err == nil || !strings.Contains(err.Error(), `"sqlite"`) {
		t.Fatalf("New with log store sqlite: %v", err)
	}
	if _, err := MigrateLogStore(context.Background(), t.TempDir(), "sqlite", nil); err == nil {
		t.Fatal("migrate to sqlite succeeded")
	}
}
